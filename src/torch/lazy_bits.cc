#include "torch/lazy_bits.h"

#include <cstring>

#include "pickle/constants.h"
#include "tensorseal/error.h"
#include "torch/constants.h"

namespace tensorseal::detail::torch {
namespace {


// Flips bit `bit` (0 = least significant) of the little-endian value at `p`.
void flip_bit(std::byte* p, unsigned bit) { p[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8)); }

// Two's complement negation of a little-endian integer of `width` bytes.
void negate_int(std::byte* p, unsigned width) {
  unsigned carry = 1;
  for (unsigned i = 0; i < width; ++i) {
    const unsigned v = (~static_cast<unsigned>(p[i]) & 0xFFu) + carry;
    p[i] = static_cast<std::byte>(v & 0xFFu);
    carry = v >> 8;
  }
}

}  // namespace

std::shared_ptr<const Tensor> apply_lazy_bits(const Tensor& t, bool neg, bool conj, const Limits& limits,
                                              const std::string& file) {
  const DTypeInfo& d = info(t.dtype);
  const std::string dt(name(t.dtype));
  auto refuse = [&](const std::string& why) {
    throw Error(rules::kUnsupportedRebuild, "tensor metadata " + why + " on a " + dt + " tensor", file);
  };
  // Element layout: width in bytes, and for complex dtypes the width of one part.
  const bool complex = t.dtype == DType::kComplex32 || t.dtype == DType::kComplex64 || t.dtype == DType::kComplex128;
  const bool floating = t.dtype == DType::kFloat16 || t.dtype == DType::kBFloat16 || t.dtype == DType::kFloat32 ||
                        t.dtype == DType::kFloat64;
  const bool integer = t.dtype == DType::kInt8 || t.dtype == DType::kInt16 || t.dtype == DType::kInt32 ||
                       t.dtype == DType::kInt64 || t.dtype == DType::kUInt8 || t.dtype == DType::kUInt16 ||
                       t.dtype == DType::kUInt32 || t.dtype == DType::kUInt64;
  if (conj && !complex) refuse("'conj'");
  if (neg && !(complex || floating || integer)) refuse("'neg'");
  const unsigned width = d.bits / 8;
  if (t.nbytes() > limits.max_alloc)
    throw Error(pickle::rules::kMaxAlloc,
                "materialising a " + std::to_string(t.nbytes()) + "-byte conj/neg view exceeds the allocation limit " +
                    std::to_string(limits.max_alloc), file);
  std::vector<std::byte> scratch;
  const auto src = t.contiguous_bytes(scratch);
  std::vector<std::byte> out(src.begin(), src.end());
  const unsigned part = complex ? width / 2 : width;  // a real element or one complex part
  for (std::size_t at = 0; at + width <= out.size(); at += width) {
    std::byte* e = out.data() + at;
    if (integer) {
      negate_int(e, width);
      continue;
    }
    const unsigned sign = part * 8 - 1;          // the sign bit of a part
    if (neg) flip_bit(e, sign);                          // real part (or the real value)
    if (complex && neg != conj) flip_bit(e + part, sign);  // imaginary part
  }
  auto copy = std::make_shared<Tensor>(*make_contiguous(t.dtype, t.shape, Storage::owned(std::move(out), t.dtype)));
  copy->requires_grad = t.requires_grad;
  copy->is_parameter = t.is_parameter;
  return copy;
}

}  // namespace tensorseal::detail::torch
