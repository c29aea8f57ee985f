// Tensor forms written (protocol 2):
//   tensor     _rebuild_tensor_v2(<storage pid>, offset, (sizes), (strides), requires_grad, OrderedDict())
//              or, for dtypes without a legacy storage class (uint16, float8, ...):
//              _rebuild_tensor_v3(<untyped pid>, offset, sizes, strides, requires_grad, OrderedDict(), dtype)
//   Parameter  _rebuild_parameter(<tensor>, requires_grad, OrderedDict())
//   storage    BINPERSID ('storage', torch.<Type>Storage, key, 'cpu', numel[, None])
// Location is always 'cpu': the device is not content, and a canonical file must load
// on any machine.
#include "torch/emit.h"

#include "tensorseal/error.h"
#include "torch/constants.h"

namespace tensorseal::detail::torch {
namespace {

void persistent_id(pickle::Writer& w, StoragePlan& plan, PlannedStorage& s, bool legacy, bool typed) {
  const std::string& key = plan.use(s);
  w.mark();
  w.value(Value::str("storage"));
  if (typed) w.global("torch", info(s.dtype).legacy_storage);
  else w.global("torch.storage", "UntypedStorage");
  w.value(Value::str(key));
  w.value(Value::str("cpu"));
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
void int_tuple(pickle::Writer& w, const std::vector<std::int64_t>& xs) {
  std::vector<Value> items;
  for (auto x : xs) items.emplace_back(x);
  w.tuple(std::span<const Value>(items));
}

void base_tensor(pickle::Writer& w, StoragePlan& plan, const Tensor& t, bool legacy, bool requires_grad) {
  const PlannedView& v = plan.view(t);
  const bool typed = !info(t.dtype).legacy_storage.empty();
  if (!typed && legacy)
    throw Error(torchfmt::rules::kCannotWrite, "the legacy torch format cannot hold " + std::string(name(t.dtype)) + " tensors");
  w.global("torch._utils", typed ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
  w.mark();
  persistent_id(w, plan, *v.storage, legacy, typed);
  w.value(Value(v.offset));
  int_tuple(w, t.shape);
  int_tuple(w, v.strides);
  w.value(Value(requires_grad));
  empty_ordered_dict(w);
  if (!typed) w.global("torch", name(t.dtype));
  w.tuple_from_mark();
  w.reduce();
}

}  // namespace

pickle::Writer::Hooks make_hooks(StoragePlan& plan, bool legacy) {
  pickle::Writer::Hooks h;
  h.tensor = [&plan, legacy](pickle::Writer& w, const Tensor& t) {
    // One tensor object referenced twice in the tree stays one object (BINGET).
    if (!w.begin_node(&t)) return;
    if (!t.is_parameter) {
      base_tensor(w, plan, t, legacy, t.requires_grad);
    } else {
      w.global("torch._utils", "_rebuild_parameter");
      w.begin_tuple(3);
      base_tensor(w, plan, t, legacy, false);
      w.value(Value(t.requires_grad));
      empty_ordered_dict(w);
      w.end_tuple(3);
      w.reduce();
    }
    w.end_node(&t);
  };
  h.storage = [&plan, legacy](pickle::Writer& w, const Storage& s) {
    PlannedStorage& ps = plan.bare(s);
    const bool typed = !info(ps.dtype).legacy_storage.empty();
    if (legacy && !typed)
      throw Error(torchfmt::rules::kCannotWrite,
                  "the legacy torch format cannot hold a " + std::string(name(ps.dtype)) + " storage");
    persistent_id(w, plan, ps, legacy, typed);
  };
  return h;
}

}  // namespace tensorseal::detail::torch
