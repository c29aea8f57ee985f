// The checks the resolver (torch/rebuild.cc) makes on a composite's rebuild call before
// it keeps the call: what torch would not check (a part outside another) or cannot build
// is refused with Error(torch/bad-rebuild-args), so composite_of (torch/composite.cc)
// decodes only calls torch.load builds. The grammar: torch/composite.cc.
#include <fmt/format.h>

#include "torch/args.h"
#include "torch/composite.h"
#include "torch/constants.h"
#include "util/checked.h"
#include "util/endian.h"

namespace tensorseal::detail::torch {
namespace {

// The elements of a small int64 (or, with `int32_too`, int32) plain tensor, row-major:
// nested sizes/strides/offsets, jagged offsets/lengths.
std::vector<std::int64_t> int_elements(const Tensor& t, const std::string& fn, const char* what, const io::Input& in,
                                       bool int32_too = false) {
  const bool int32 = int32_too && t.dtype == DType::kInt32;
  if ((t.dtype != DType::kInt64 && !int32) || t.quantization || t.numpy != NumpyType::kNone)
    bad_args(fn, fmt::format("{} is not an {} tensor", what, int32_too ? "int32 or int64" : "int64"), in);
  std::vector<std::byte> scratch;
  const auto bytes = t.contiguous_bytes(scratch);
  const std::size_t item = int32 ? 4 : 8;
  std::vector<std::int64_t> out(bytes.size() / item);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] =
        int32 ? util::load_le<std::int32_t>(bytes.data() + 4 * i) : util::load_le<std::int64_t>(bytes.data() + 8 * i);
  return out;
}

}  // namespace

// _rebuild_nested_tensor(buffer, sizes, strides, offsets) is
// torch._nested_view_from_buffer: component i views the 1-d `buffer` at offsets[i]
// with sizes[i] and strides[i] (rows of two (n, d) int64 tensors). The call stays an
// object (its parts are plain tensors); what torch would not check (a component
// outside the buffer) or cannot build (torch.save of nested_tensor([]) writes 0-d
// sizes, which torch.load's internal assert refuses) is refused here.
void check_nested(const Object& o, const std::string& fn, const io::Input& in) {
  const auto& a = tuple_args(o, fn, in, 4, 4);
  if (o.kwargs || o.state || !o.list_items.empty() || !o.dict_items.empty())
    bad_args(fn, "unexpected object state", in);
  for (const auto& x : a)
    if (!x.is(Value::Kind::kTensor)) bad_args(fn, "arguments are not four tensors", in);
  const Tensor& buffer = *a[0].as_tensor();
  const Tensor& sizes_t = *a[1].as_tensor();
  const Tensor& strides_t = *a[2].as_tensor();
  if (buffer.shape.size() != 1 || !buffer.is_contiguous() || buffer.quantization || buffer.numpy != NumpyType::kNone)
    bad_args(fn, "buffer is not a 1-d contiguous tensor", in);
  const auto offsets = int_elements(*a[3].as_tensor(), fn, "offsets", in);
  if (a[3].as_tensor()->shape.size() != 1) bad_args(fn, "offsets is not 1-d", in);
  const std::size_t n = offsets.size();
  if (sizes_t.shape.size() != 2 || sizes_t.shape != strides_t.shape || static_cast<std::size_t>(sizes_t.shape[0]) != n)
    bad_args(fn, "sizes and strides are not two (n, d) tensors for n offsets", in);
  const auto sizes = int_elements(sizes_t, fn, "sizes", in);
  const auto strides = int_elements(strides_t, fn, "strides", in);
  const auto d = static_cast<std::size_t>(sizes_t.shape[1]);
  const auto numel = static_cast<std::int64_t>(buffer.numel());
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t last = offsets[i];  // index of the component's last element
    bool empty = false;
    if (last < 0) bad_args(fn, fmt::format("component {} has a negative offset", i), in);
    for (std::size_t k = 0; k < d; ++k) {
      if (sizes[i * d + k] < 0 || strides[i * d + k] < 0)
        bad_args(fn, fmt::format("component {} has a negative size or stride", i), in);
      if (sizes[i * d + k] == 0) empty = true;
    }
    // An empty component reaches no element (torch.save writes them over empty buffers).
    for (std::size_t k = 0; k < d && !empty; ++k) {
      const std::int64_t size = sizes[i * d + k], stride = strides[i * d + k];
      auto step = util::mul(static_cast<std::uint64_t>(size > 0 ? size - 1 : 0), static_cast<std::uint64_t>(stride));
      if (!step || *step > static_cast<std::uint64_t>(numel))
        bad_args(fn, fmt::format("component {} lies outside the buffer", i), in);
      last += static_cast<std::int64_t>(*step);
      if (last < 0 || last > numel) bad_args(fn, fmt::format("component {} lies outside the buffer", i), in);
    }
    if (!empty && last >= numel)
      bad_args(fn, fmt::format("component {} lies outside the buffer of {} elements", i, numel), in);
  }
}

// _rebuild_from_type_v2(_rebuild_njt, NestedTensor, (kwargs,), state) is a jagged
// nested tensor (layout torch.jagged): NestedTensor(**kwargs) over `values`, whose dim
// _ragged_idx - 1 holds the components one after another, component i starting at
// offsets[i] and ending at offsets[i + 1] (or offsets[i] + lengths[i]). The call stays
// an object (composite_of lists it); keyword arguments NestedTensor does not take, and
// what torch would not check (a component outside `values`, decreasing offsets), are
// refused.
void check_jagged(const std::vector<Value>& a, const std::string& fn, const io::Input& in) {
  if (!a[1].is(Value::Kind::kGlobal) ||
      qualname(a[1].as_global()) != "torch.nested._internal.nested_tensor.NestedTensor")
    bad_args(fn, "_rebuild_njt rebuilt as a type other than NestedTensor", in);
  if (a[2].items().size() != 1 || !a[2].items()[0].is(Value::Kind::kDict))
    bad_args(fn, "_rebuild_njt takes one dict of keyword arguments", in);
  const Value* values = nullptr;
  const Value* offsets = nullptr;
  const Value* lengths = nullptr;
  std::int64_t ragged_idx = 1;
  for (const auto& [k, v] : a[2].items()[0].as_dict().items) {
    const std::string_view key = k.is(Value::Kind::kStr) ? k.as_str() : std::string_view();
    if (key == "values")
      values = &v;
    else if (key == "offsets")
      offsets = &v;
    else if (key == "lengths")
      lengths = v.is_none() ? nullptr : &v;
    else if (key == "_ragged_idx") {
      if (!v.is(Value::Kind::kInt)) bad_args(fn, "_ragged_idx is not an int", in);
      ragged_idx = v.as_int();
    } else if (key == "requires_grad") {
      if (!v.is(Value::Kind::kBool)) bad_args(fn, "requires_grad is not a bool", in);
    } else if (key == "_metadata_cache") {
      if (v.is_none()) continue;
      if (!v.is(Value::Kind::kDict)) bad_args(fn, "_metadata_cache is not a dict", in);
      for (const auto& [ck, cv] : v.as_dict().items) {
        const std::string_view name = ck.is(Value::Kind::kStr) ? ck.as_str() : std::string_view();
        if (name != "min_seqlen" && name != "max_seqlen")
          bad_args(fn, "_metadata_cache holds an entry other than min_seqlen / max_seqlen", in);
        if (!cv.is(Value::Kind::kTensor)) bad_args(fn, fmt::format("_metadata_cache.{} is not a tensor", name), in);
      }
    } else {
      bad_args(fn, "unknown keyword argument of _rebuild_njt", in);
    }
  }
  if (!values || !values->is(Value::Kind::kTensor) || !offsets || !offsets->is(Value::Kind::kTensor) ||
      (lengths && !lengths->is(Value::Kind::kTensor)))
    bad_args(fn, "values and offsets (and lengths when given) are not tensors", in);
  const Tensor& v = *values->as_tensor();
  if (v.quantization || v.numpy != NumpyType::kNone) bad_args(fn, "values is not a plain tensor", in);
  if (ragged_idx < 1 || ragged_idx > static_cast<std::int64_t>(v.shape.size()))
    bad_args(fn, "_ragged_idx is outside the dimensions of values", in);
  const std::int64_t total = v.shape[static_cast<std::size_t>(ragged_idx - 1)];
  if (offsets->as_tensor()->shape.size() != 1) bad_args(fn, "offsets is not 1-d", in);
  const auto off = int_elements(*offsets->as_tensor(), fn, "offsets", in, true);
  if (off.empty()) bad_args(fn, "offsets is empty", in);
  const std::size_t n = off.size() - 1;
  for (std::int64_t o : off)
    if (o < 0 || o > total) bad_args(fn, fmt::format("an offset lies outside the {} rows of values", total), in);
  if (lengths) {
    if (lengths->as_tensor()->shape.size() != 1) bad_args(fn, "lengths is not 1-d", in);
    const auto len = int_elements(*lengths->as_tensor(), fn, "lengths", in, true);
    if (len.size() != n) bad_args(fn, "lengths does not have one entry per component", in);
    for (std::size_t i = 0; i < n; ++i)
      if (len[i] < 0 || len[i] > total - off[i]) bad_args(fn, fmt::format("component {} lies outside values", i), in);
  } else {
    for (std::size_t i = 0; i < n; ++i)
      if (off[i + 1] < off[i]) bad_args(fn, fmt::format("offsets decrease at component {}", i), in);
  }
  const Value& state = a[3];
  if (!state.is_none() && !state.is(Value::Kind::kDict)) bad_args(fn, "the NestedTensor's state is not a dict", in);
  if (state.is(Value::Kind::kDict))
    for (const auto& [k, x] : state.as_dict().items)
      if (!k.is(Value::Kind::kStr)) bad_args(fn, "a NestedTensor attribute's name is not a str", in);
}

// _rebuild_from_type_v2(_rebuild_wrapper_subclass, DTensor, (DTensor, dtype, size,
// stride, storage_offset, layout, device, requires_grad), (None, {'_local_tensor': t,
// '_spec': DTensorSpec})) is a torch.distributed DTensor saved by torch.save (its
// attributes are __slots__, hence the pair of dicts): this rank's local
// tensor plus its place in the global `size`. It stays the call (composite_of lists
// it); arguments torch.save does not write are refused.
void check_dtensor(const std::vector<Value>& a, const std::string& fn, const io::Input& in) {
  const auto& w = a[2].items();
  if (w.size() != 8 || !w[0].is(Value::Kind::kGlobal) || qualname(w[0].as_global()) != qualname(a[1].as_global()))
    bad_args(fn,
             "_rebuild_wrapper_subclass of a DTensor takes (DTensor, dtype, size, stride, offset, layout, "
             "device, requires_grad)",
             in);
  const auto dtype = dtype_of_global(w[1]);
  if (!dtype) bad_args(fn, "dtype argument is not a torch dtype", in);
  const auto size = int_list(w[2], fn, "size", in), stride = int_list(w[3], fn, "stride", in);
  if (size.size() != stride.size() || size.size() > in.options->limits.max_ndim)
    bad_args(fn, "size and stride differ in length or have too many dimensions", in);
  for (std::size_t i = 0; i < size.size(); ++i)
    if (size[i] < 0 || stride[i] < 0) bad_args(fn, "a negative size or stride", in);
  if (!w[4].is(Value::Kind::kInt) || !w[7].is(Value::Kind::kBool))
    bad_args(fn, "malformed offset or requires_grad", in);
  const Value* local = state_entry(a[3], "_local_tensor");
  const Value* spec = state_entry(a[3], "_spec");
  if (!local || !local->is(Value::Kind::kTensor) || !spec || !spec->is(Value::Kind::kObject))
    bad_args(fn, "the DTensor's state has no _local_tensor tensor and _spec object", in);
  const Tensor& t = *local->as_tensor();
  if (t.dtype != *dtype || t.quantization || t.numpy != NumpyType::kNone || t.shape.size() != size.size())
    bad_args(fn, "the local tensor's dtype or number of dimensions is not the DTensor's", in);
  for (std::size_t i = 0; i < size.size(); ++i)
    if (t.shape[i] > size[i]) bad_args(fn, "the local tensor is larger than the DTensor", in);
}

// _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad): a tensor on
// torch's meta device (shape and dtype, no data). It stays the call (nothing to read;
// composite_of lists it); arguments torch could not build a tensor from are refused.
void check_meta(const Object& o, const std::string& fn, const io::Input& in) {
  const auto& a = tuple_args(o, fn, in, 4, 4);
  if (o.kwargs || o.state || !o.list_items.empty() || !o.dict_items.empty())
    bad_args(fn, "unexpected object state", in);
  if (!dtype_of_global(a[0])) bad_args(fn, "dtype argument is not a torch dtype", in);
  const auto size = int_list(a[1], fn, "size", in), stride = int_list(a[2], fn, "stride", in);
  if (size.size() != stride.size()) bad_args(fn, "size and stride differ in length", in);
  if (size.size() > in.options->limits.max_ndim) bad_args(fn, "too many dimensions", in);
  for (std::size_t i = 0; i < size.size(); ++i)
    if (size[i] < 0 || stride[i] < 0) bad_args(fn, "a negative size or stride", in);
  // A meta tensor holds no data, but torch still computes its element count.
  if (!util::numel(size)) bad_args(fn, "the size's element count overflows int64 (torch cannot build it)", in);
  if (!a[3].is(Value::Kind::kBool)) bad_args(fn, "requires_grad is not a bool", in);
}

}  // namespace tensorseal::detail::torch
