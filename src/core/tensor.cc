#include "tensorseal/tensor.h"

#include <fmt/format.h>

#include <string>

#include "tensorseal/error.h"
#include "util/checked.h"

namespace tensorseal {

std::uint64_t Tensor::numel() const noexcept {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

std::uint64_t Tensor::nbytes() const noexcept {
  const auto bits = info(dtype).bits;
  return (numel() * bits + 7) / 8;
}

std::vector<std::int64_t> Tensor::contiguous_strides(std::span<const std::int64_t> shape) {
  if (!detail::util::stride_span(shape))
    throw Error(rules::kSizeOverflow, fmt::format("shape [{}]: the strides overflow 64 bits", fmt::join(shape, ", ")));
  std::vector<std::int64_t> s(shape.size());
  std::int64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<std::int64_t>(shape[i], 1);
  }
  return s;
}

bool Tensor::is_contiguous() const noexcept {
  // As torch: a tensor without elements is contiguous whatever its strides.
  for (auto d : shape)
    if (d == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

void Tensor::validate() const {
  if (strides.size() != shape.size())
    throw Error(rules::kBadShape, fmt::format("tensor has {} dimensions but {} strides", shape.size(), strides.size()));
  if (!storage) throw Error(rules::kBadShape, "tensor has no storage");
  if (storage_offset < 0) throw Error(rules::kBadShape, fmt::format("negative storage offset {}", storage_offset));
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) throw Error(rules::kBadShape, fmt::format("negative dimension {}", shape[i]));
    if (strides[i] < 0) throw Error(rules::kBadShape, fmt::format("negative stride {}", strides[i]));
  }
  const auto count = detail::util::numel(shape);
  if (!count)
    throw Error(
        rules::kSizeOverflow,
        fmt::format("shape [{}]: the element count overflows int64 (torch refuses it too)", fmt::join(shape, ", ")));
  const std::uint64_t n = *count;
  const auto bits = info(dtype).bits;
  if (!detail::util::mul(n, bits)) throw Error(rules::kSizeOverflow, "byte size overflows 64 bits");
  if (n == 0) return;
  if (bits % 8 != 0) {
    // Packed sub-byte elements can only be described contiguously from byte 0.
    if (!is_contiguous() || storage_offset != 0 || (n * bits) % 8 != 0)
      throw Error(rules::kBadShape,
                  std::string(name(dtype)) + " tensors must be contiguous, start at 0 and fill whole bytes");
    if (n * bits / 8 > storage->size())
      throw Error(rules::kViewOutOfBounds,
                  fmt::format("tensor needs {} bytes but its storage has {}", n * bits / 8, storage->size()));
    return;
  }
  std::uint64_t last = static_cast<std::uint64_t>(storage_offset);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    auto step = detail::util::mul(static_cast<std::uint64_t>(shape[i] - 1), static_cast<std::uint64_t>(strides[i]));
    auto sum = step ? detail::util::add(last, *step) : std::nullopt;
    if (!sum) throw Error(rules::kSizeOverflow, "view extent overflows 64 bits");
    last = *sum;
  }
  auto end = detail::util::add(last, 1);
  auto end_bytes = end ? detail::util::mul(*end, bits / 8) : std::nullopt;
  if (!end_bytes) throw Error(rules::kSizeOverflow, "view extent overflows 64 bits");
  if (*end_bytes > storage->size())
    throw Error(rules::kViewOutOfBounds,
                fmt::format("view reaches byte {} of a storage of {} bytes", *end_bytes, storage->size()));
}

std::pair<std::uint64_t, std::uint64_t> Tensor::storage_extent() const noexcept {
  if (numel() == 0) return {0, 0};
  const auto bits = info(dtype).bits;
  if (bits % 8 != 0) return {0, nbytes()};
  const std::uint64_t item = bits / 8;
  std::uint64_t last = static_cast<std::uint64_t>(storage_offset);
  for (std::size_t i = 0; i < shape.size(); ++i)
    last += static_cast<std::uint64_t>(shape[i] - 1) * static_cast<std::uint64_t>(strides[i]);
  return {static_cast<std::uint64_t>(storage_offset) * item, (last + 1) * item};
}

void Tensor::for_each_run(const std::function<void(std::span<const std::byte>)>& sink) const {
  const std::uint64_t n = numel();
  if (n == 0) return;
  const auto bits = info(dtype).bits;
  if (bits % 8 != 0 || is_contiguous()) {
    const std::uint64_t item = bits % 8 == 0 ? bits / 8 : 0;
    // Pieces and streams are read as they are: no join.
    storage->stream(static_cast<std::uint64_t>(storage_offset) * item, nbytes(), sink);
    return;
  }
  const auto bytes = storage->bytes();
  const std::uint64_t item = bits / 8;
  // Find the innermost block of dimensions that is contiguous: its elements form one run.
  std::size_t nd = shape.size();
  std::size_t inner = nd;  // dims [inner, nd) are merged into one run
  std::int64_t expected = 1;
  while (inner > 0) {
    std::size_t d = inner - 1;
    if (shape[d] != 1 && strides[d] != expected) break;
    expected *= shape[d];
    --inner;
  }
  const std::uint64_t run_elems = static_cast<std::uint64_t>(expected);
  const std::uint64_t run_bytes = run_elems * item;
  std::vector<std::int64_t> idx(inner, 0);
  std::uint64_t runs = n / run_elems;
  std::int64_t pos = storage_offset;
  for (std::uint64_t r = 0; r < runs; ++r) {
    sink(bytes.subspan(static_cast<std::uint64_t>(pos) * item, run_bytes));
    // Advance the odometer over the outer dims.
    for (std::size_t d = inner; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        pos += strides[d];
        break;
      }
      pos -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

std::span<const std::byte> Tensor::contiguous_bytes(std::vector<std::byte>& scratch) const {
  if (numel() == 0) return {};
  if (is_contiguous() || info(dtype).bits % 8 != 0) {
    const std::uint64_t item = info(dtype).bits % 8 == 0 ? info(dtype).bits / 8 : 0;
    return storage->bytes().subspan(static_cast<std::uint64_t>(storage_offset) * item, nbytes());
  }
  scratch.clear();
  scratch.reserve(nbytes());
  for_each_run([&](std::span<const std::byte> r) { scratch.insert(scratch.end(), r.begin(), r.end()); });
  return scratch;
}

std::shared_ptr<Tensor> make_contiguous(DType dtype, std::vector<std::int64_t> shape,
                                        std::shared_ptr<const Storage> storage) {
  auto t = std::make_shared<Tensor>();
  t->dtype = dtype;
  t->strides = Tensor::contiguous_strides(shape);
  t->shape = std::move(shape);
  t->storage = std::move(storage);
  return t;
}

std::string_view scheme_name(Quantization::Scheme s) noexcept {
  switch (s) {
    case Quantization::Scheme::kPerTensorAffine:
      return "per_tensor_affine";
    case Quantization::Scheme::kPerChannelAffine:
      return "per_channel_affine";
    case Quantization::Scheme::kPerChannelAffineFloatQParams:
      return "per_channel_affine_float_qparams";
  }
  return "?";
}

bool carries_quantized(DType d) noexcept { return d == DType::kQInt8 || d == DType::kQUInt8 || d == DType::kQInt32; }

std::string_view python_type_name(const Tensor& t) noexcept {
  if (t.numpy == NumpyType::kArray) return "numpy.ndarray";
  if (t.numpy == NumpyType::kScalar) return "numpy.generic";
  return t.is_parameter ? "torch.nn.Parameter" : "torch.Tensor";
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace tensorseal
