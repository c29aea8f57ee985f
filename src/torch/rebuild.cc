#include "torch/rebuild.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include "core/expansion.h"
#include "core/format_names.h"
#include "pickle/constants.h"
#include "pickle/stdlib.h"
#include "pickle/vm.h"
#include "torch/args.h"
#include "torch/composite.h"
#include "torch/constants.h"
#include "util/checked.h"
#include "util/endian.h"
#include "util/text.h"

namespace tensorseal::detail::torch {

// The name a global is known by, with Python 2 aliases folded (protocol 2 pickles
// made with fix_imports say __builtin__ / copy_reg) and numpy 2's module names folded
// into numpy 1.x's (the spelling a numpy object was pickled with is kept apart, in
// Tensor::numpy_module: numpy_module_of).
std::string qualname(const Global& g) {
  std::string m = g.module;
  if (m == "__builtin__") m = "builtins";
  if (m == "copy_reg") m = "copyreg";
  if (m == "numpy._core.multiarray") m = "numpy.core.multiarray";
  if (m == "numpy._core.numeric") m = "numpy.core.numeric";
  return m + "." + g.name;
}

namespace {
std::string callable_name(const Object& o) {
  if (o.callable && o.callable->is(Value::Kind::kGlobal)) return qualname(o.callable->as_global());
  return "";
}

// Which numpy named the reconstruction function `o` calls (numpy._core.* is numpy 2's).
NumpyModule numpy_module_of(const Object& o) {
  return o.callable && o.callable->is(Value::Kind::kGlobal) &&
                 o.callable->as_global().module.starts_with("numpy._core.")
             ? NumpyModule::kUnderscoreCore
             : NumpyModule::kCore;
}
}  // namespace

[[noreturn]] void bad_args(const std::string& fn, const std::string& why, const io::Input& in) {
  throw Error(rules::kBadRebuildArgs, fn + ": " + why, in.name);
}

const std::vector<Value>& tuple_args(const Object& o, const std::string& fn, const io::Input& in, std::size_t min,
                                     std::size_t max) {
  if (!o.args || !o.args->is(Value::Kind::kTuple)) bad_args(fn, "arguments are not a tuple", in);
  const auto& a = o.args->items();
  if (a.size() < min || a.size() > max) {
    const std::string range = min == max ? fmt::format("{}", min) : fmt::format("{}..{}", min, max);
    bad_args(fn, fmt::format("takes {} arguments, got {}", range, a.size()), in);
  }
  return a;
}

std::vector<std::int64_t> int_list(const Value& v, const std::string& fn, const char* what, const io::Input& in) {
  // torch.Size(...) objects appear where tuples do in some producers.
  const Value* src = &v;
  if (v.is(Value::Kind::kObject)) {
    const Object& o = v.as_object();
    if (callable_name(o) == "torch.Size" && o.args && o.args->is(Value::Kind::kTuple) && o.args->items().size() == 1)
      src = &o.args->items()[0];
  }
  if (!src->is(Value::Kind::kTuple) && !src->is(Value::Kind::kList))
    bad_args(fn, std::string(what) + " is not a tuple", in);
  std::vector<std::int64_t> out;
  for (const auto& x : src->items()) {
    if (!x.is(Value::Kind::kInt)) bad_args(fn, std::string(what) + " holds a non-integer", in);
    out.push_back(x.as_int());
  }
  return out;
}

namespace {
bool truthy(const Value& v) {
  if (v.is(Value::Kind::kBool)) return v.as_bool();
  if (v.is(Value::Kind::kInt)) return v.as_int() != 0;
  return false;
}
}  // namespace

std::optional<DType> dtype_of_global(const Value& v) {
  if (!v.is(Value::Kind::kGlobal) || v.as_global().module != "torch") return std::nullopt;
  return dtype_from_name(v.as_global().name);
}

std::uint64_t StorageRef::nbytes() const { return typed ? numel * itemsize(dtype) : numel; }

StorageRef parse_storage_pid(const Value& pid, bool legacy, const std::string& name, std::uint64_t offset) {
  auto fail = [&](const std::string& why) -> StorageRef { throw Error(rules::kBadPersistentId, why, name, offset); };
  if (!pid.is(Value::Kind::kTuple)) fail(fmt::format("persistent id is a {}, not a tuple", kind_name(pid.kind())));
  const auto& f = pid.items();
  // A Python 2 file read with encoding='bytes' gives the tag, key and location as bytes;
  // torch decodes them as ASCII (serialization._maybe_decode_ascii).
  auto text = [](const Value& v) -> std::optional<std::string> {
    if (v.is(Value::Kind::kStr)) return std::string(v.as_str());
    if (v.is(Value::Kind::kBytes) && !v.is_bytearray() &&
        std::all_of(v.as_bytes().begin(), v.as_bytes().end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
      return std::string(v.as_bytes());
    return std::nullopt;
  };
  const auto tag = f.empty() ? std::nullopt : text(f[0]);
  if (!tag) fail("persistent id has no type tag");
  if (*tag != "storage") fail(fmt::format("persistent id type '{}' is not 'storage'", *tag));
  const std::size_t want = legacy ? 6 : 5;
  if (f.size() != want) fail(fmt::format("storage persistent id has {} fields, expected {}", f.size(), want));
  StorageRef r;
  if (!f[1].is(Value::Kind::kGlobal)) fail("storage type is not a global name");
  r.type_name = f[1].as_global().name;
  if (r.type_name == "UntypedStorage" || r.type_name == "TypedStorage") {
    r.typed = false;
  } else if (auto dt = dtype_from_legacy_storage(r.type_name); dt && f[1].as_global().module == "torch") {
    r.dtype = *dt;
    r.typed = true;
  } else {
    throw Error(rules::kUnknownStorageType,
                fmt::format("unknown storage class {}.{}", f[1].as_global().module, r.type_name), name, offset);
  }
  if (auto k = text(f[2]))
    r.key = *k;
  else if (f[2].is(Value::Kind::kInt))
    r.key = std::to_string(f[2].as_int());
  else
    fail("storage key is not a string");
  auto location = text(f[3]);
  if (!location) fail("storage location is not a string");
  r.location = *location;
  if (!f[4].is(Value::Kind::kInt) || f[4].as_int() < 0) fail("storage size is not a non-negative integer");
  r.numel = static_cast<std::uint64_t>(f[4].as_int());
  if (r.typed && !util::mul(r.numel, itemsize(r.dtype)))
    throw Error(tensorseal::rules::kSizeOverflow, fmt::format("storage of {} elements overflows", r.numel), name,
                offset);
  if (legacy) r.view_metadata = f[5];
  return r;
}

std::shared_ptr<Storage> swapped_copy(const Storage& s, DType dtype) {
  std::vector<std::byte> data(s.bytes().begin(), s.bytes().end());
  util::byteswap_inplace(data, swap_unit(dtype));
  auto out = Storage::owned(std::move(data), s.dtype);
  return out;
}

// ---- resolution -----------------------------------------------------------------

namespace {

struct Resolution {
  Resolver& r;
  const io::Input& in;
  std::unordered_map<const void*, Value> done;  // node -> resolved value
  std::unordered_set<const void*> in_progress;  // cycle guard

  Value tensor_from(const std::string& fn, const Value& storage_v, const Value& offset_v, const Value& size_v,
                    const Value& stride_v, const Value& rg_v, std::optional<DType> dtype) {
    if (!storage_v.is(Value::Kind::kStorage)) bad_args(fn, "first argument is not a storage", in);
    if (!offset_v.is(Value::Kind::kInt)) bad_args(fn, "storage offset is not an integer", in);
    auto t = std::make_shared<Tensor>();
    t->storage = storage_v.as_storage();
    t->dtype = dtype ? *dtype : t->storage->dtype;
    t->storage_offset = offset_v.as_int();
    t->shape = int_list(size_v, fn, "size", in);
    t->strides = int_list(stride_v, fn, "stride", in);
    t->requires_grad = truthy(rg_v);
    if (t->shape.size() > in.options->limits.max_ndim) bad_args(fn, "too many dimensions", in);
    try {
      t->validate();
      core::check_expansion(*t, in.options->limits);
    } catch (const Error& e) {
      throw e.located(in.name);
    }
    return Value(std::shared_ptr<const Tensor>(t));
  }

  // The metadata argument of _rebuild_tensor_v2/_v3 (None or a dict from
  // torch._C._get_tensor_metadata): the lazy conj/neg bits make a lazy view (tensor.h
  // LazyBits) that keeps sharing the storage; any other key is refused, not ignored.
  Value with_metadata(Value tensor, const Value& meta, const std::string& fn) {
    if (meta.is_none()) return tensor;
    if (!meta.is(Value::Kind::kDict)) bad_args(fn, "tensor metadata is not a dict", in);
    bool neg = false, conj = false;
    for (const auto& [k, v] : meta.as_dict().items) {
      const bool known_key = k.is(Value::Kind::kStr) && (k.as_str() == "neg" || k.as_str() == "conj");
      if (!known_key)
        throw Error(rules::kUnsupportedRebuild,
                    fmt::format("{}: tensor metadata key {} is not understood", fn, repr(k, 60)), in.name);
      if (!v.is(Value::Kind::kBool)) bad_args(fn, fmt::format("tensor metadata '{}' is not a bool", k.as_str()), in);
      (k.as_str() == "neg" ? neg : conj) = v.as_bool();
    }
    if (!neg && !conj) return tensor;
    const Tensor& raw = *tensor.as_tensor();
    if (!can_carry_lazy_bits(raw.dtype, neg, conj))
      throw Error(rules::kUnsupportedRebuild,
                  fmt::format("tensor metadata '{}' on a {} tensor",
                              conj && !can_carry_lazy_bits(raw.dtype, false, true) ? "conj" : "neg", name(raw.dtype)),
                  in.name);
    // The applied values are computed when something reads them: bounded like any copy.
    if (raw.storage->size() > in.options->limits.max_alloc)
      throw Error(pickle::rules::kMaxAlloc,
                  fmt::format("{}: the values of a {}-byte conj/neg view exceed the allocation limit {}", fn,
                              raw.storage->size(), in.options->limits.max_alloc),
                  in.name);
    return Value(lazy_view(raw, neg, conj));
  }

  // A per-channel scale or zero-point vector: a tensor, or a list of numbers (older
  // torch), which _rebuild_qtensor turns into a tensor of `list_dtype` (float64/int64,
  // float32 for float qparams).
  std::shared_ptr<const Tensor> channel_values(const Value& v, DType list_dtype, const std::string& fn,
                                               const char* what) {
    if (v.is(Value::Kind::kTensor)) {
      auto t = v.as_tensor();
      if (t->shape.size() != 1 || t->quantization || t->numpy != NumpyType::kNone)
        bad_args(fn, std::string(what) + " is not a 1-d tensor", in);
      return t;
    }
    if (!v.is(Value::Kind::kList)) bad_args(fn, std::string(what) + " is neither a tensor nor a list", in);
    std::string data;
    for (const Value& x : v.items()) {
      if (list_dtype == DType::kInt64) {
        if (!x.is(Value::Kind::kInt)) bad_args(fn, std::string(what) + " holds a non-integer", in);
        util::append_le<std::int64_t>(data, x.as_int());
      } else {
        double d = 0;
        if (x.is(Value::Kind::kFloat))
          d = x.as_float();
        else if (x.is(Value::Kind::kInt))
          d = static_cast<double>(x.as_int());
        else
          bad_args(fn, std::string(what) + " holds a non-number", in);
        if (list_dtype == DType::kFloat32)
          util::append_le<std::uint32_t>(data, std::bit_cast<std::uint32_t>(static_cast<float>(d)));
        else
          util::append_le<std::uint64_t>(data, std::bit_cast<std::uint64_t>(d));
      }
    }
    const auto n = static_cast<std::int64_t>(v.items().size());
    std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data.data()),
                                 reinterpret_cast<const std::byte*>(data.data()) + data.size());
    return make_contiguous(list_dtype, {n}, Storage::owned(std::move(bytes), list_dtype));
  }

  // The tensor rebuilt by _rebuild_qtensor: the integer elements plus the quantizer
  // parameters (qscheme, scale, zero_point) or (qscheme, scales, zero_points, axis).
  // Schemes torch itself cannot load (symmetric ones) and the packed quint4x2/quint2x4
  // are refused rather than read wrong.
  void require_quantized_dtype(DType d, const std::string& fn) {
    if (!carries_quantized(d))
      throw Error(rules::kUnsupportedRebuild, fmt::format("{}: quantized dtype {} is not supported", fn, name(d)),
                  in.name);
  }

  Value quantized(const Value& base, const Value& params, const std::string& fn) {
    auto t = std::make_shared<Tensor>(*base.as_tensor());
    require_quantized_dtype(t->dtype, fn);
    if (!params.is(Value::Kind::kTuple) || params.items().empty() || !params.items()[0].is(Value::Kind::kGlobal))
      bad_args(fn, "quantizer parameters are not (qscheme, ...)", in);
    const auto& p = params.items();
    const Global& g = p[0].as_global();
    auto q = std::make_shared<Quantization>();
    const std::string scheme = g.module == "torch" ? g.name : "";
    if (scheme == "per_tensor_affine") {
      if (p.size() != 3 || !p[2].is(Value::Kind::kInt) || !(p[1].is(Value::Kind::kFloat) || p[1].is(Value::Kind::kInt)))
        bad_args(fn, "per_tensor_affine parameters are not (qscheme, scale, zero_point)", in);
      q->scheme = Quantization::Scheme::kPerTensorAffine;
      q->scale = p[1].is(Value::Kind::kFloat) ? p[1].as_float() : static_cast<double>(p[1].as_int());
      q->zero_point = p[2].as_int();
    } else if (scheme == "per_channel_affine" || scheme == "per_channel_affine_float_qparams") {
      const bool fq = scheme == "per_channel_affine_float_qparams";
      if (p.size() != 4 || !p[3].is(Value::Kind::kInt))
        bad_args(fn, scheme + " parameters are not (qscheme, scales, zero_points, axis)", in);
      q->scheme = fq ? Quantization::Scheme::kPerChannelAffineFloatQParams : Quantization::Scheme::kPerChannelAffine;
      q->scales = channel_values(p[1], fq ? DType::kFloat32 : DType::kFloat64, fn, "scales");
      q->zero_points = channel_values(p[2], fq ? DType::kFloat32 : DType::kInt64, fn, "zero_points");
      // Tensor.__reduce_ex__ writes per_channel_affine for float-qparams tensors too;
      // torch's rebuild tells them apart by the zero points' dtype, and so do we.
      if (q->zero_points->dtype == DType::kFloat32 || q->zero_points->dtype == DType::kFloat64 ||
          q->zero_points->dtype == DType::kFloat16 || q->zero_points->dtype == DType::kBFloat16)
        q->scheme = Quantization::Scheme::kPerChannelAffineFloatQParams;
      q->axis = p[3].as_int();
      if (q->axis < 0 || q->axis >= static_cast<std::int64_t>(t->shape.size()))
        bad_args(fn, fmt::format("axis {} is outside the tensor's dimensions", q->axis), in);
      const auto channels = t->shape[static_cast<std::size_t>(q->axis)];
      if (q->scales->shape[0] != channels || q->zero_points->shape[0] != channels)
        bad_args(fn, "scales and zero_points do not have one value per channel", in);
      q->scales->validate();
      q->zero_points->validate();
    } else {
      throw Error(rules::kUnsupportedRebuild,
                  fmt::format("{}: qscheme {}.{} cannot be loaded (torch refuses it too)", fn, g.module, g.name),
                  in.name);
    }
    t->quantization = std::move(q);
    return Value(std::shared_ptr<const Tensor>(t));
  }

  // The `state` _rebuild_from_type_v2 and _rebuild_parameter_with_state set on the
  // tensor object (its __dict__): None or {} leave `t` as it is; a dict of str keys to
  // values without tensors becomes Tensor::attributes; anything else is refused.
  Value with_attributes(const Value& t, const Value& state, const std::string& fn) {
    if (state.is_none() || (state.is(Value::Kind::kDict) && state.as_dict().items.empty())) return t;
    if (!state.is(Value::Kind::kDict) || state.as_dict().kind != DictKind::kDict)
      throw Error(rules::kUnsupportedRebuild,
                  fn + ": tensor state other than a plain dict (__slots__) is not supported", in.name);
    for (const auto& [k, v] : state.as_dict().items) {
      if (!k.is(Value::Kind::kStr)) bad_args(fn, "a tensor attribute's name is not a str", in);
      if (reaches_data(v))
        throw Error(rules::kUnsupportedRebuild, fmt::format("{}: tensor attribute '{}' holds a tensor", fn, k.as_str()),
                    in.name);
    }
    auto out = std::make_shared<Tensor>(*t.as_tensor());
    if (out->numpy != NumpyType::kNone || out->quantization)
      throw Error(rules::kUnsupportedRebuild,
                  fn + ": attributes on a numpy object or a quantized tensor are not supported", in.name);
    out->attributes = std::make_shared<const Value>(state);
    return Value(std::shared_ptr<const Tensor>(out));
  }

  // The rebuild call of a composite tensor (torch/composite.h: sparse, nested, meta,
  // ...), which the tree keeps as the call.
  static bool is_composite_call(const Value& v) {
    return v.is(Value::Kind::kObject) && composite_of(v.as_object()).has_value();
  }

  Value as_parameter(const Value& data, bool requires_grad, const std::string& fn) {
    if (!data.is(Value::Kind::kTensor)) bad_args(fn, "data is not a tensor", in);
    auto t = std::make_shared<Tensor>(*data.as_tensor());
    t->is_parameter = true;
    t->requires_grad = requires_grad;
    return Value(std::shared_ptr<const Tensor>(t));
  }

  // The rows of kRebuildCalls: torch's (and numpy's) rebuild functions, one member
  // each, called with the object (arguments resolved) and its qualified name. Each
  // returns the typed value, or nullopt to keep the object (validated by check_*).
  std::optional<Value> rebuild_tensor_v2(const Object& o, const std::string& fn) {  // also _rebuild_tensor
    const auto& a = tuple_args(o, fn, in, 4, 7);
    Value t = tensor_from(fn, a[0], a[1], a[2], a[3], a.size() > 4 ? a[4] : Value(false), std::nullopt);
    return a.size() > 6 ? with_metadata(t, a[6], fn) : t;
  }

  std::optional<Value> rebuild_tensor_v3(const Object& o, const std::string& fn) {
    const auto& a = tuple_args(o, fn, in, 7, 8);
    auto dt = dtype_of_global(a[6]);
    if (!dt) bad_args(fn, "dtype argument is not a torch dtype", in);
    Value t = tensor_from(fn, a[0], a[1], a[2], a[3], a[4], dt);
    return a.size() > 7 ? with_metadata(t, a[7], fn) : t;
  }

  // (storage, storage_offset, size, stride, quantizer_params, requires_grad, backward_hooks)
  std::optional<Value> rebuild_qtensor(const Object& o, const std::string& fn) {
    const auto& a = tuple_args(o, fn, in, 7, 7);
    if (!(a[6].is_none() || (a[6].is(Value::Kind::kDict) && a[6].as_dict().items.empty())))
      throw Error(rules::kUnsupportedRebuild, fn + " with backward hooks is not supported", in.name);
    // The dtype first: a packed quint4x2/quint2x4 view would otherwise fail as out of
    // bounds, naming the wrong rule.
    if (a[0].is(Value::Kind::kStorage)) require_quantized_dtype(a[0].as_storage()->dtype, fn);
    return quantized(tensor_from(fn, a[0], a[1], a[2], a[3], a[5], std::nullopt), a[4], fn);
  }

  // torch 1.10-1.13's spelling of a CSR tensor: (layout, (crow_indices, col_indices,
  // values, size)), exactly the arguments torch 2 gives _rebuild_sparse_tensor (which
  // no longer has this function). Folded into that call: one tensor, one content
  // hash, and a canonical rewrite torch 2 loads.
  std::optional<Value> rebuild_sparse_csr_tensor(const Object& o, const std::string& fn) {
    const auto& a = tuple_args(o, fn, in, 2, 2);
    if (o.kwargs || o.state || !o.list_items.empty() || !o.dict_items.empty())
      bad_args(fn, "unexpected object state", in);
    const bool csr = a[0].is(Value::Kind::kObject) &&
                     callable_name(a[0].as_object()) == "torch.serialization._get_layout" && a[0].as_object().args &&
                     a[0].as_object().args->is(Value::Kind::kTuple) && a[0].as_object().args->items().size() == 1 &&
                     a[0].as_object().args->items()[0].is(Value::Kind::kStr) &&
                     a[0].as_object().args->items()[0].as_str() == "torch.sparse_csr";
    if (!csr) bad_args(fn, "layout is not torch.sparse_csr (the only one torch rebuilt here)", in);
    if (!a[1].is(Value::Kind::kTuple) || a[1].items().size() != 4)
      bad_args(fn, "data is not (crow, col, values, size)", in);
    auto folded = std::make_shared<Object>(o);
    folded->callable = std::make_shared<Value>(Value::global("torch._utils", "_rebuild_sparse_tensor"));
    return Value(std::shared_ptr<Object>(std::move(folded)));
  }

  std::optional<Value> rebuild_nested_tensor(const Object& o, const std::string& fn) {
    check_nested(o, fn, in);
    return std::nullopt;  // stays the call; composite_of lists it
  }

  std::optional<Value> rebuild_meta_tensor(const Object& o, const std::string& fn) {
    check_meta(o, fn, in);
    return std::nullopt;  // stays the call; composite_of lists it
  }

  // (data, requires_grad, backward_hooks[, state]); also _rebuild_parameter_with_state.
  std::optional<Value> rebuild_parameter(const Object& o, const std::string& fn) {
    const auto& a = tuple_args(o, fn, in, 3, 4);
    if (!(a[2].is_none() || (a[2].is(Value::Kind::kDict) && a[2].as_dict().items.empty())))
      throw Error(rules::kUnsupportedRebuild, fn + " with backward hooks is not supported", in.name);
    if (is_composite_call(a[0])) {  // a Parameter of a sparse, nested or meta tensor: stays the call
      // Its attributes: as torch writes them (composite_of decodes the call), or refused.
      if (a.size() == 4 && !a[3].is_none() && !(a[3].is(Value::Kind::kDict) && a[3].as_dict().items.empty()) &&
          !composite_of(o))
        throw Error(rules::kUnsupportedRebuild,
                    fn + ": these attributes on a Parameter of a sparse, nested or meta tensor are not supported",
                    in.name);
      return std::nullopt;
    }
    const Value p = as_parameter(a[0], truthy(a[1]), fn);
    return a.size() == 4 ? with_attributes(p, a[3], fn) : p;
  }

  // (func, type, args, state): func(*args) rebuilt as `type`.
  std::optional<Value> rebuild_from_type_v2(const Object& o, const std::string& fn) {
    const auto& a = tuple_args(o, fn, in, 4, 4);
    if (!a[2].is(Value::Kind::kTuple) || !a[0].is(Value::Kind::kGlobal)) bad_args(fn, "malformed arguments", in);
    if (qualname(a[0].as_global()) == "torch.nested._internal.nested_tensor._rebuild_njt") {
      check_jagged(a, fn, in);
      return std::nullopt;  // stays the call; composite_of lists it
    }
    if (qualname(a[0].as_global()) == "torch._utils._rebuild_wrapper_subclass" && a[1].is(Value::Kind::kGlobal) &&
        is_dtensor_type(a[1].as_global())) {
      check_dtensor(a, fn, in);
      return std::nullopt;  // stays the call; composite_of lists it
    }
    auto inner = std::make_shared<Object>();
    inner->callable = std::make_shared<Value>(a[0]);
    inner->args = std::make_shared<Value>(a[2]);
    auto base = known(*inner);
    if (!base && a[1].is(Value::Kind::kGlobal) && qualname(a[1].as_global()) == "torch.Tensor" && !a[3].is_none() &&
        !(a[3].is(Value::Kind::kDict) && a[3].as_dict().items.empty()) && !composite_of(o) && composite_of(*inner))
      // A sparse, nested or meta tensor whose attributes are not what composite_of
      // reads (a tensor among them, __slots__): refused, as for a plain tensor.
      throw Error(rules::kUnsupportedRebuild,
                  fn + ": these attributes on a sparse, nested or meta tensor are not supported", in.name);
    if (!base || !base->is(Value::Kind::kTensor)) return std::nullopt;
    if (a[1].is(Value::Kind::kGlobal)) {
      const std::string type = qualname(a[1].as_global());
      if (type == "torch.Tensor") return with_attributes(*base, a[3], fn);
      if (type == "torch.nn.parameter.Parameter")
        return with_attributes(as_parameter(*base, base->as_tensor()->requires_grad, fn), a[3], fn);
    }
    return std::nullopt;  // a tensor subclass: stays an opaque object (args resolved)
  }

  std::optional<Value> load_from_bytes(const Object& o, const std::string& fn) {
    const auto& a = tuple_args(o, fn, in, 1, 1);
    if (!a[0].is(Value::Kind::kBytes)) bad_args(fn, "payload is not bytes", in);
    return nested(a[0].as_bytes());
  }

  // The typed replacement for an object whose callable is a row of kRebuildCalls, or
  // nullopt. (Standard-library calls were read by the VM's reduce hook, pickle/stdlib.h.)
  std::optional<Value> known(const Object& o);

  std::optional<DType> numpy_dtype(const Value& v, bool* big) {
    if (!v.is(Value::Kind::kObject)) return std::nullopt;
    const Object& d = v.as_object();
    if (callable_name(d) != "numpy.dtype" || !d.args || !d.args->is(Value::Kind::kTuple) || d.args->items().empty() ||
        !d.args->items()[0].is(Value::Kind::kStr))
      return std::nullopt;
    std::string descr(d.args->items()[0].as_str());
    std::string order = "<";
    if (d.state && d.state->is(Value::Kind::kTuple) && d.state->items().size() >= 2 &&
        d.state->items()[1].is(Value::Kind::kStr))
      order = std::string(d.state->items()[1].as_str());
    if (order == "|" || order == "=") order = "<";
    return dtype_from_numpy(order + descr, big);
  }

  Value array_tensor(DType dt, bool big, std::vector<std::int64_t> shape, bool fortran, std::string_view raw,
                     NumpyType type, NumpyModule module, const std::string& fn) {
    std::uint64_t numel = 1;
    for (auto d : shape) {
      if (d < 0) bad_args(fn, "negative dimension", in);
      auto m = util::mul(numel, static_cast<std::uint64_t>(d));
      if (!m) bad_args(fn, "element count overflows", in);
      numel = *m;
    }
    auto nb = util::mul(numel, itemsize(dt));
    if (!nb || *nb != raw.size())
      bad_args(fn,
               fmt::format("array data has {} bytes, shape and dtype need {}", raw.size(),
                           nb ? fmt::to_string(*nb) : "more"),
               in);
    std::vector<std::byte> data(reinterpret_cast<const std::byte*>(raw.data()),
                                reinterpret_cast<const std::byte*>(raw.data()) + raw.size());
    if (big) util::byteswap_inplace(data, swap_unit(dt));
    auto t = make_contiguous(dt, shape, Storage::owned(std::move(data), dt));
    t->numpy = type;
    t->numpy_module = module;
    if (fortran && shape.size() > 1) {  // column-major strides over the same bytes
      std::int64_t acc = 1;
      for (std::size_t i = 0; i < shape.size(); ++i) {
        t->strides[i] = acc;
        acc *= std::max<std::int64_t>(shape[i], 1);
      }
    }
    return Value(std::shared_ptr<const Tensor>(t));
  }

  std::optional<Value> numpy_array(const Object& o, const std::string&) {
    // _reconstruct(ndarray, (0,), b'b') then BUILD (version 1, shape, dtype, fortran, raw).
    // Only numpy.ndarray itself: a subclass (np.matrix, np.memmap, ...) or another
    // state version stays an opaque object rather than lose its type.
    if (!o.state || !o.state->is(Value::Kind::kTuple) || !o.args || !o.args->is(Value::Kind::kTuple) ||
        o.args->items().empty() || !o.args->items()[0].is(Value::Kind::kGlobal) || o.kwargs || !o.list_items.empty() ||
        !o.dict_items.empty())
      return std::nullopt;
    const std::string type = qualname(o.args->items()[0].as_global());
    if (type != "numpy.ndarray") return std::nullopt;
    const auto& s = o.state->items();
    if (s.size() != 5 || !s[0].is(Value::Kind::kInt) || s[0].as_int() != 1) return std::nullopt;
    bool big = false;
    auto dt = numpy_dtype(s[2], &big);
    if (!dt || !s[4].is(Value::Kind::kBytes)) return std::nullopt;  // object arrays stay opaque
    return array_tensor(*dt, big, int_list(s[1], "numpy array", "shape", in), truthy(s[3]), s[4].as_bytes(),
                        NumpyType::kArray, numpy_module_of(o), "numpy array");
  }

  // What numpy's __reduce_ex__ gives at pickle protocol >= 5 for a C- or F-contiguous
  // array: _frombuffer(buffer, dtype, shape, order), the buffer in-band (bytes, or
  // bytearray when writable) holding the elements in `order` ('C' or 'F').
  std::optional<Value> numpy_frombuffer(const Object& o, const std::string&) {
    if (o.how != Construct::kReduce || !o.args || !o.args->is(Value::Kind::kTuple) || o.args->items().size() != 4 ||
        o.state || o.kwargs || !o.list_items.empty() || !o.dict_items.empty())
      return std::nullopt;
    const auto& a = o.args->items();
    bool big = false;
    auto dt = numpy_dtype(a[1], &big);
    if (!dt || !a[0].is(Value::Kind::kBytes) || !a[3].is(Value::Kind::kStr)) return std::nullopt;
    const std::string_view order = a[3].as_str();
    if (order != "C" && order != "F") return std::nullopt;
    return array_tensor(*dt, big, int_list(a[2], "numpy array", "shape", in), order == "F", a[0].as_bytes(),
                        NumpyType::kArray, numpy_module_of(o), "numpy array");
  }

  std::optional<Value> numpy_scalar(const Object& o, const std::string&) {
    if (!o.args || !o.args->is(Value::Kind::kTuple) || o.args->items().size() != 2 || o.state || o.kwargs ||
        !o.list_items.empty() || !o.dict_items.empty())
      return std::nullopt;
    bool big = false;
    auto dt = numpy_dtype(o.args->items()[0], &big);
    if (!dt || !o.args->items()[1].is(Value::Kind::kBytes)) return std::nullopt;
    return array_tensor(*dt, big, {}, false, o.args->items()[1].as_bytes(), NumpyType::kScalar, numpy_module_of(o),
                        "numpy scalar");
  }

  Value nested(std::string_view payload) {
    const auto cache_key = std::pair(payload.data(), payload.size());
    if (auto it = r.nested_cache.find(cache_key); it != r.nested_cache.end()) return it->second;
    if (in.nesting + 1 > in.options->limits.max_nested_files)
      throw Error(rules::kNestingTooDeep,
                  fmt::format("_load_from_bytes payloads nested deeper than {}", in.options->limits.max_nested_files),
                  in.name);
    if (in.read_nested == nullptr)
      throw Error(tensorseal::rules::kInternal, "a nested file (_load_from_bytes) reached a reader given no ReadNested",
                  in.name);
    const std::uint32_t index = ++r.nested_seen;
    io::Input sub;
    sub.name = fmt::format("{}/_load_from_bytes#{}", in.name, index);
    sub.options = in.options;
    sub.nesting = in.nesting + 1;
    sub.read_nested = in.read_nested;
    sub.whole =
        Storage::owned(std::vector<std::byte>(reinterpret_cast<const std::byte*>(payload.data()),
                                              reinterpret_cast<const std::byte*>(payload.data()) + payload.size()));
    Checkpoint c = in.read_nested(sub);
    const std::string prefix = fmt::format("_load_from_bytes#{} ({})", index, core::format_name(c.format));
    for (auto& g : c.globals) r.out->globals.push_back({g.module, g.name, g.where});
    for (auto& f : c.facts) r.out->facts.push_back({f.topic, prefix + " " + f.where, f.value});
    r.out->facts.push_back(core::fact(torch::topics::kNestedFile, prefix, fmt::format("{} bytes", payload.size())));
    r.nested_cache.emplace(cache_key, c.root);
    return c.root;
  }

  Value visit(const Value& v, int depth) {
    using K = Value::Kind;
    const void* node = v.node();
    switch (v.kind()) {
      case K::kList:
      case K::kTuple:
      case K::kDict:
      case K::kSet:
      case K::kObject:
        break;
      default:
        return v;
    }
    if (auto it = done.find(node); it != done.end()) return it->second;
    if (!in_progress.insert(node).second) return v;  // a cycle: keep the node itself
    Value out = v;                                   // the same node: its children are replaced in place
    switch (v.kind()) {
      case K::kList:
      case K::kTuple:
        for (auto& x : out.items()) x = visit(x, depth + 1);
        break;
      case K::kSet:
        for (auto& x : out.as_set().items) x = visit(x, depth + 1);
        break;
      case K::kDict: {
        Dict& d = out.as_dict();
        for (auto& [k, x] : d.items) {
          k = visit(k, depth + 1);
          x = visit(x, depth + 1);
        }
        if (d.attrs)
          for (auto& [k, x] : d.attrs->items) x = visit(x, depth + 1);
        break;
      }
      case K::kObject: {
        Object& o = out.as_object();
        for (auto* p : {&o.callable, &o.args, &o.kwargs, &o.state})
          if (*p) *p = std::make_shared<Value>(visit(**p, depth + 1));
        for (auto& x : o.list_items) x = visit(x, depth + 1);
        for (auto& [k, x] : o.dict_items) {
          k = visit(k, depth + 1);
          x = visit(x, depth + 1);
        }
        if (auto typed = known(o)) out = *typed;
        break;
      }
      default:
        break;
    }
    in_progress.erase(node);
    done.emplace(node, out);
    return out;
  }
};

// torch's rebuild functions (and numpy's reconstructors inside torch pickles), by the
// qualified name `qualname` gives; sorted. The standard library's calls are the other
// table, pickle/stdlib.h, run by the VM's reduce hook before this pass.
struct RebuildCall {
  std::string_view name;
  std::optional<Value> (Resolution::*handle)(const Object& o, const std::string& fn);
};
constexpr RebuildCall kRebuildCalls[] = {
    {"numpy.core.multiarray._reconstruct", &Resolution::numpy_array},
    {"numpy.core.multiarray.scalar", &Resolution::numpy_scalar},
    {"numpy.core.numeric._frombuffer", &Resolution::numpy_frombuffer},
    {"torch._tensor._rebuild_from_type_v2", &Resolution::rebuild_from_type_v2},
    {"torch._utils._rebuild_meta_tensor_no_storage", &Resolution::rebuild_meta_tensor},
    {"torch._utils._rebuild_nested_tensor", &Resolution::rebuild_nested_tensor},
    {"torch._utils._rebuild_parameter", &Resolution::rebuild_parameter},
    {"torch._utils._rebuild_parameter_with_state", &Resolution::rebuild_parameter},
    {"torch._utils._rebuild_qtensor", &Resolution::rebuild_qtensor},
    {"torch._utils._rebuild_sparse_csr_tensor", &Resolution::rebuild_sparse_csr_tensor},
    {"torch._utils._rebuild_tensor", &Resolution::rebuild_tensor_v2},
    {"torch._utils._rebuild_tensor_v2", &Resolution::rebuild_tensor_v2},
    {"torch._utils._rebuild_tensor_v3", &Resolution::rebuild_tensor_v3},
    {"torch.storage._load_from_bytes", &Resolution::load_from_bytes},
};
static_assert(std::is_sorted(std::begin(kRebuildCalls), std::end(kRebuildCalls),
                             [](const RebuildCall& a, const RebuildCall& b) { return a.name < b.name; }),
              "kRebuildCalls must stay sorted by name");

std::optional<Value> Resolution::known(const Object& o) {
  const std::string fn = callable_name(o);
  if (fn.empty()) return std::nullopt;
  auto it = std::lower_bound(std::begin(kRebuildCalls), std::end(kRebuildCalls), std::string_view(fn),
                             [](const RebuildCall& c, std::string_view k) { return c.name < k; });
  if (it == std::end(kRebuildCalls) || it->name != fn) return std::nullopt;
  return (this->*(it->handle))(o, fn);
}

}  // namespace

Value Resolver::resolve(const Value& raw) {
  Resolution res{*this, *in, {}, {}};
  return res.visit(raw, 0);
}

Value unpickle(const io::Input& in, std::span<const std::byte> stream, std::uint64_t base_offset,
               const std::string& where, const std::function<Value(const Value&, std::uint64_t)>& persistent_load,
               Checkpoint& out, std::uint64_t* end, int* protocol) {
  pickle::Hooks hooks;
  hooks.persistent_load = persistent_load;
  hooks.reduce = [](const Object& o, std::uint64_t) { return pickle::stdlib_reduce(o); };
  hooks.py2_strings = in.options->py2_strings;
  pickle::Parsed p = pickle::parse(stream, in.name, base_offset, in.options->limits, hooks);
  for (auto& g : p.globals) out.globals.push_back(std::move(g));
  // Facts are located by stream ("data.pkl"), never by file name, so two files'
  // facts line up in `explain`.
  for (auto& f : p.facts) out.facts.push_back({f.topic, where, f.value});
  if (end) *end = p.end;
  if (protocol) *protocol = p.protocol;
  Resolver r;
  r.in = &in;
  r.out = &out;
  return r.resolve(p.value);
}

}  // namespace tensorseal::detail::torch
