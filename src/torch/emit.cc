// Tensor forms written (protocol 2):
//   tensor     _rebuild_tensor_v2(<storage pid>, offset, (sizes), (strides), requires_grad, OrderedDict())
//              or, for dtypes without a legacy storage class (uint16, float8, ...):
//              _rebuild_tensor_v3(<untyped pid>, offset, sizes, strides, requires_grad, OrderedDict(), dtype)
//   Parameter  _rebuild_parameter(<tensor>, requires_grad, OrderedDict())
//   attributes _rebuild_from_type_v2(_rebuild_tensor_v2, torch.Tensor, (<args>), {attributes})
//              for a tensor with Python attributes; a Parameter's go to
//              _rebuild_parameter_with_state(<tensor>, requires_grad, OrderedDict(), {attributes})
//   storage    BINPERSID ('storage', torch.<Type>Storage, key, 'cpu', numel[, None])
//   quantized  _rebuild_qtensor(<storage pid>, offset, (sizes), (strides), (qscheme, ...),
//              requires_grad, OrderedDict())
//   ndarray    <np>.multiarray._reconstruct(numpy.ndarray, (0,), b'b')
//              BUILD (1, (shape), <dtype>, False, <row-major little-endian bytes>)
//   np scalar  <np>.multiarray.scalar(<dtype>, <bytes>)
//   <dtype>    numpy.dtype(descr, False, True) BUILD (3, '<'|'|', None, None, None, -1, -1, 0),
//              one memoized object per dtype, as numpy's own reduce gives
// numpy objects carry their bytes in the pickle, as numpy pickles them. <np> is the
// module the source pickled (Tensor::numpy_module): numpy.core (numpy 1.x) or
// numpy._core (numpy 2). torch.load(weights_only=True) allowlists name the loader's
// numpy's module exactly, so only the source's spelling loads where the source loads.
// Location is always 'cpu': the device is not content, and a canonical file must load
// on any machine.
#include "torch/emit.h"

#include <algorithm>
#include <span>

#include "pickle/opcodes.h"
#include "tensorseal/error.h"
#include "torch/constants.h"
#include "util/checked.h"

namespace tensorseal::detail::torch {
namespace {

void persistent_id(pickle::Writer& w, StoragePlan& plan, PlannedStorage& s, bool legacy, bool typed) {
  const std::string& key = plan.use(s);
  w.mark();
  w.text("storage");
  if (typed)
    w.global("torch", info(s.dtype).legacy_storage);
  else
    w.global("torch.storage", "UntypedStorage");
  w.text(key);
  w.text("cpu");
  const std::uint64_t item = itemsize(s.dtype);
  w.value(Value(static_cast<std::int64_t>(typed && item ? s.nbytes / item : s.nbytes)));
  if (legacy) w.value(Value());
  w.tuple_from_mark();
  w.binpersid();
}

void empty_ordered_dict(pickle::Writer& w) {
  w.global("collections", "OrderedDict");
  w.begin_tuple(0);
  w.end_tuple(0);
  w.reduce();
}

// Written item by item: a temporary tuple node must not be handed to value(), whose
// memo is keyed by node identity (a later temporary could reuse the address).
void int_tuple(pickle::Writer& w, std::span<const std::int64_t> xs) {
  w.begin_tuple(xs.size());
  for (auto x : xs) w.value(Value(x));
  w.end_tuple(xs.size());
}

// The view's strides: its own, or the tensor's row-major strides (Tensor::
// contiguous_strides) for a view planned contiguous, computed here without a vector.
void stride_tuple(pickle::Writer& w, const PlannedView& v, const Tensor& t) {
  if (!v.contiguous) return int_tuple(w, v.strides);
  constexpr std::size_t kInline = 16;
  // contiguous_strides also refuses strides past int64 (a zero-size shape of huge dims).
  if (t.shape.size() > kInline || !util::stride_span(t.shape)) return int_tuple(w, Tensor::contiguous_strides(t.shape));
  std::int64_t strides[kInline];
  std::int64_t acc = 1;
  for (std::size_t i = t.shape.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= std::max<std::int64_t>(t.shape[i], 1);
  }
  int_tuple(w, std::span<const std::int64_t>(strides, t.shape.size()));
}

// torch._utils._rebuild_qtensor(<typed storage pid>, offset, size, stride, params,
// requires_grad, OrderedDict()), params = (torch.<qscheme>, scale, zero_point) or
// (torch.per_channel_affine, <scales>, <zero_points>, axis): Tensor.__reduce_ex__'s form.
void quantized_tensor(pickle::Writer& w, StoragePlan& plan, const Tensor& t, bool legacy, bool requires_grad) {
  const PlannedView& v = plan.view(t);
  const Quantization& q = *t.quantization;
  w.global("torch._utils", "_rebuild_qtensor");
  w.mark();
  persistent_id(w, plan, *v.storage, legacy, true);
  w.value(Value(v.offset));
  int_tuple(w, t.shape);
  stride_tuple(w, v, t);
  if (q.per_channel()) {
    // torch writes per_channel_affine for float qparams too (the zero points' dtype
    // tells them apart when read), so the file loads in every torch that reads either.
    w.begin_tuple(4);
    w.global("torch", "per_channel_affine");
    w.value(Value(q.scales));
    w.value(Value(q.zero_points));
    w.value(Value(q.axis));
    w.end_tuple(4);
  } else {
    w.begin_tuple(3);
    w.global("torch", scheme_name(q.scheme));
    w.value(Value(q.scale));
    w.value(Value(q.zero_point));
    w.end_tuple(3);
  }
  w.value(Value(requires_grad));
  empty_ordered_dict(w);
  w.tuple_from_mark();
  w.reduce();
}

// The rebuild function of a plain tensor and its argument tuple, written separately
// (_rebuild_from_type_v2 takes them as two arguments).
bool typed_storage(const Tensor& t, bool legacy) {
  const bool typed = !info(t.dtype).legacy_storage.empty();
  if (!typed && legacy)
    throw Error(torch::rules::kCannotWrite,
                "the legacy torch format cannot hold " + std::string(name(t.dtype)) + " tensors");
  return typed;
}

void tensor_function(pickle::Writer& w, const Tensor& t, bool legacy) {
  w.global("torch._utils", typed_storage(t, legacy) ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
}

void tensor_arguments(pickle::Writer& w, StoragePlan& plan, const Tensor& t, bool legacy, bool requires_grad) {
  const PlannedView& v = plan.view(t);
  const bool typed = typed_storage(t, legacy);
  w.mark();
  persistent_id(w, plan, *v.storage, legacy, typed);
  w.value(Value(v.offset));
  int_tuple(w, t.shape);
  stride_tuple(w, v, t);
  w.value(Value(requires_grad));
  empty_ordered_dict(w);
  if (!typed) w.global("torch", name(t.dtype));
  if (v.lazy) {
    // The metadata argument, keys in torch._C._get_tensor_metadata's order, written as
    // CPython writes a dict (EMPTY_DICT BINPUT, then SETITEM or MARK .. SETITEMS). Not
    // through value(): a temporary dict node would be memoized by its address.
    const bool both = t.lazy->neg && t.lazy->conj;
    w.raw(std::string(1, static_cast<char>(pickle::op::kEmptyDict)));
    w.put_anonymous();
    if (both) w.mark();
    const std::pair<const char*, bool> bits[] = {{"neg", t.lazy->neg}, {"conj", t.lazy->conj}};
    for (const auto& [key, on] : bits) {
      if (!on) continue;
      w.text(key);
      w.value(Value(true));
    }
    w.raw(std::string(1, static_cast<char>(both ? pickle::op::kSetItems : pickle::op::kSetItem)));
  }
  w.tuple_from_mark();
}

void base_tensor(pickle::Writer& w, StoragePlan& plan, const Tensor& t, bool legacy, bool requires_grad) {
  if (t.quantization) return quantized_tensor(w, plan, t, legacy, requires_grad);
  tensor_function(w, t, legacy);
  tensor_arguments(w, plan, t, legacy, requires_grad);
  w.reduce();
}

// A torch.Tensor with Python attributes, as Tensor.__reduce_ex__ writes it:
// _rebuild_from_type_v2(_rebuild_tensor_v2, torch.Tensor, (args), {attributes}).
void tensor_with_attributes(pickle::Writer& w, StoragePlan& plan, const Tensor& t, bool legacy) {
  w.global("torch._tensor", "_rebuild_from_type_v2");
  w.begin_tuple(4);
  tensor_function(w, t, legacy);
  w.global("torch", "Tensor");
  tensor_arguments(w, plan, t, legacy, t.requires_grad);
  w.value(*t.attributes);
  w.end_tuple(4);
  w.reduce();
}

void numpy_dtype(pickle::Writer& w, DType dt) {
  const DTypeInfo& di = info(dt);
  if (di.numpy.size() < 2)
    throw Error(torch::rules::kCannotWrite, "numpy has no dtype " + std::string(di.name) + " for a numpy object");
  if (!w.begin_node(&di)) return;
  w.global("numpy", "dtype");
  w.begin_tuple(3);
  w.value(Value::str(std::string(di.numpy.substr(1))));
  w.value(Value(false));
  w.value(Value(true));
  w.end_tuple(3);
  w.reduce();
  w.mark();
  for (const Value& x : {Value(std::int64_t{3}), Value::str(std::string(di.numpy.substr(0, 1))), Value(), Value(),
                         Value(), Value(std::int64_t{-1}), Value(std::int64_t{-1}), Value(std::int64_t{0})})
    w.value(x);
  w.tuple_from_mark();
  w.build();
  w.end_node(&di);
}

Value element_bytes(const Tensor& t) {
  std::vector<std::byte> scratch;
  const auto b = t.contiguous_bytes(scratch);
  return Value::bytes(std::string(reinterpret_cast<const char*>(b.data()), b.size()));
}

void numpy_object(pickle::Writer& w, const Tensor& t) {
  if (t.requires_grad || t.is_parameter)
    throw Error(torch::rules::kCannotWrite, "a numpy object cannot be a Parameter or require grad");
  const char* multiarray =
      t.numpy_module == NumpyModule::kUnderscoreCore ? "numpy._core.multiarray" : "numpy.core.multiarray";
  if (t.numpy == NumpyType::kScalar) {
    if (!t.shape.empty()) throw Error(torch::rules::kCannotWrite, "a numpy scalar must be 0-d");
    w.global(multiarray, "scalar");
    w.begin_tuple(2);
    numpy_dtype(w, t.dtype);
    w.value(element_bytes(t));
    w.end_tuple(2);
    w.reduce();
    return;
  }
  w.global(multiarray, "_reconstruct");
  w.begin_tuple(3);
  w.global("numpy", "ndarray");
  const std::int64_t zero[] = {0};
  int_tuple(w, zero);
  w.value(Value::bytes("b"));
  w.end_tuple(3);
  w.reduce();
  w.mark();
  w.value(Value(std::int64_t{1}));
  int_tuple(w, t.shape);
  numpy_dtype(w, t.dtype);
  w.value(Value(false));
  w.value(element_bytes(t));
  w.tuple_from_mark();
  w.build();
}

}  // namespace

pickle::Writer::Hooks make_hooks(StoragePlan& plan, bool legacy) {
  pickle::Writer::Hooks h;
  h.tensor = [&plan, legacy](pickle::Writer& w, const Tensor& t) {
    // One tensor object referenced twice in the tree stays one object (BINGET).
    if (!w.begin_node(&t)) return;
    if (t.attributes && (t.numpy != NumpyType::kNone || t.quantization))
      throw Error(torch::rules::kCannotWrite, "attributes on a numpy object or a quantized tensor cannot be written");
    if (t.numpy != NumpyType::kNone) {
      numpy_object(w, t);
    } else if (!t.is_parameter) {
      if (t.attributes)
        tensor_with_attributes(w, plan, t, legacy);
      else
        base_tensor(w, plan, t, legacy, t.requires_grad);
    } else {
      // Parameter.__reduce_ex__: _rebuild_parameter(data, requires_grad, OrderedDict())
      // or, with attributes, _rebuild_parameter_with_state(..., {attributes}).
      const std::size_t n = t.attributes ? 4 : 3;
      w.global("torch._utils", t.attributes ? "_rebuild_parameter_with_state" : "_rebuild_parameter");
      w.begin_tuple(n);
      base_tensor(w, plan, t, legacy, false);
      w.value(Value(t.requires_grad));
      empty_ordered_dict(w);
      if (t.attributes) w.value(*t.attributes);
      w.end_tuple(n);
      w.reduce();
    }
    w.end_node(&t);
  };
  h.storage = [&plan, legacy](pickle::Writer& w, const Storage& s) {
    PlannedStorage& ps = plan.bare(s);
    const bool typed = !info(ps.dtype).legacy_storage.empty();
    if (legacy && !typed)
      throw Error(torch::rules::kCannotWrite,
                  "the legacy torch format cannot hold a " + std::string(name(ps.dtype)) + " storage");
    persistent_id(w, plan, ps, legacy, typed);
  };
  return h;
}

std::string pickle_without_storages(const Value& root) {
  StoragePlan plan(root);
  pickle::Writer::Hooks h = make_hooks(plan, false);
  auto inline_only = h.tensor;
  h.tensor = [inline_only](pickle::Writer& w, const Tensor& t) {
    if (t.numpy == NumpyType::kNone)
      throw Error(torch::rules::kCannotWrite, "a torch tensor inside a numpy object array cannot be written");
    inline_only(w, t);
  };
  h.storage = [](pickle::Writer&, const Storage&) {
    throw Error(torch::rules::kCannotWrite, "a storage inside a numpy object array cannot be written");
  };
  pickle::Writer w(std::move(h));
  return w.finish(root);
}

}  // namespace tensorseal::detail::torch
