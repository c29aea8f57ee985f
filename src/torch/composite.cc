// Grammar of the two rebuild calls (torch/_tensor.py, Tensor._reduce_ex_internal):
//   _rebuild_sparse_tensor(_get_layout('torch.sparse_coo'), (indices, values, Size, [is_coalesced]))
//   _rebuild_sparse_tensor(_get_layout('torch.sparse_csr'|..._bsc), (compressed, plain, values, Size))
//   _rebuild_nested_tensor(buffer, sizes, strides, offsets)
//   _rebuild_from_type_v2(_rebuild_njt, NestedTensor, ({'values': t, 'offsets': t,
//       'lengths': t | None, '_ragged_idx': int, '_metadata_cache': {'min_seqlen': t,
//       'max_seqlen': t}, 'requires_grad': bool},), {attributes})   (jagged, NJT)
//   _rebuild_from_type_v2(_rebuild_wrapper_subclass, DTensor, (DTensor, dtype, size,
//       stride, storage_offset, layout, device, requires_grad),
//       (None, {'_local_tensor': t, '_spec': DTensorSpec}))         (dtensor: __slots__)
//   _rebuild_meta_tensor_no_storage(torch.<dtype>, (size...), (stride...), requires_grad)
//       (meta: a tensor on the meta device, no data and no parts)
//   _rebuild_parameter(<one of the calls above>, requires_grad, OrderedDict())
//       (a Parameter of a sparse, nested or meta tensor: Parameter.__reduce_ex__;
//       Composite::parameter)
//   _rebuild_from_type_v2(<sparse, nested or meta rebuild function>, torch.Tensor,
//       (<its arguments>), {attributes})
//       (such a torch.Tensor with Python attributes: Tensor.__reduce_ex__;
//       Composite::attributes, str keys, values without tensors)
//   _rebuild_parameter_with_state(<sparse, nested or meta call>, requires_grad,
//       OrderedDict(), {attributes})
//       (a Parameter of one with Python attributes: Parameter.__reduce_ex__)
#include "torch/composite.h"

#include "tensorseal/error.h"
#include "torch/args.h"
#include "torch/constants.h"

namespace tensorseal::detail::torch {
namespace {

bool is_call(const Object& o, std::string_view module, std::string_view name) {
  return o.callable && o.callable->is(Value::Kind::kGlobal) && o.callable->as_global().module == module &&
         o.callable->as_global().name == name && o.args && o.args->is(Value::Kind::kTuple) && !o.kwargs && !o.state &&
         o.list_items.empty() && o.dict_items.empty();
}

// A tuple or list of integers.
std::optional<std::vector<std::int64_t>> int_items(const Value& v) {
  if (!v.is(Value::Kind::kTuple) && !v.is(Value::Kind::kList)) return std::nullopt;
  std::vector<std::int64_t> out;
  for (const auto& x : v.items()) {
    if (!x.is(Value::Kind::kInt)) return std::nullopt;
    out.push_back(x.as_int());
  }
  return out;
}

// torch.Size((d0, d1, ...)) as integers.
std::optional<std::vector<std::int64_t>> size_of(const Value& v) {
  if (!v.is(Value::Kind::kObject) || !is_call(v.as_object(), "torch", "Size")) return std::nullopt;
  const auto& a = v.as_object().args->items();
  return a.size() == 1 ? int_items(a[0]) : std::nullopt;
}

std::optional<std::string> layout_of(const Value& v) {
  if (!v.is(Value::Kind::kObject) || !is_call(v.as_object(), "torch.serialization", "_get_layout")) return std::nullopt;
  const auto& a = v.as_object().args->items();
  if (a.size() != 1 || !a[0].is(Value::Kind::kStr)) return std::nullopt;
  const std::string_view s = a[0].as_str();
  for (std::string_view l : kSparseLayouts)
    if (s.size() == l.size() + 6 && s.starts_with("torch.") && s.substr(6) == l) return std::string(l);
  return std::nullopt;
}

std::optional<Composite> sparse(const Object& o) {
  const auto& a = o.args->items();
  if (a.size() != 2 || !a[1].is(Value::Kind::kTuple)) return std::nullopt;
  auto layout = layout_of(a[0]);
  if (!layout) return std::nullopt;
  const auto& d = a[1].items();
  const bool coo = *layout == "sparse_coo";
  const bool rows = *layout == "sparse_csr" || *layout == "sparse_bsr";
  std::vector<const char*> roles;
  if (coo)
    roles = {"indices", "values"};
  else
    roles = {rows ? "crow_indices" : "ccol_indices", rows ? "col_indices" : "row_indices", "values"};
  const std::size_t size_at = roles.size();
  if (coo ? (d.size() != 3 && d.size() != 4) : d.size() != 4) return std::nullopt;
  if (coo && d.size() == 4 && !d[3].is(Value::Kind::kBool) && !d[3].is_none()) return std::nullopt;
  auto shape = size_of(d[size_at]);
  if (!shape) return std::nullopt;
  Composite c{*layout, DType::kFloat32, std::move(*shape), {}};
  if (coo && d.size() == 4) c.coalesced = d[3];
  c.layout_arg = a[0];
  for (std::size_t i = 0; i < roles.size(); ++i) {
    if (!d[i].is(Value::Kind::kTensor)) return std::nullopt;
    c.parts.emplace_back(roles[i], d[i].as_tensor());
  }
  c.dtype = c.parts.back().second->dtype;
  return c;
}

std::optional<Composite> nested(const Object& o) {
  const auto& a = o.args->items();
  if (a.size() != 4) return std::nullopt;
  Composite c{"nested", DType::kFloat32, {}, {}};
  const char* roles[] = {"buffer", "sizes", "strides", "offsets"};
  for (std::size_t i = 0; i < 4; ++i) {
    if (!a[i].is(Value::Kind::kTensor)) return std::nullopt;
    c.parts.emplace_back(roles[i], a[i].as_tensor());
  }
  c.dtype = c.parts[0].second->dtype;
  c.shape = {static_cast<std::int64_t>(c.parts[3].second->numel())};
  return c;
}

bool is_global(const Value& v, std::string_view module, std::string_view name) {
  return v.is(Value::Kind::kGlobal) && v.as_global().module == module && v.as_global().name == name;
}

// Checked by the reader (torch/rebuild.cc, check_jagged) before it gets here.
std::optional<Composite> jagged(const Object& o) {
  constexpr std::string_view kModule = "torch.nested._internal.nested_tensor";
  const auto& a = o.args->items();
  if (a.size() != 4 || !is_global(a[0], kModule, "_rebuild_njt") || !is_global(a[1], kModule, "NestedTensor") ||
      !a[2].is(Value::Kind::kTuple) || a[2].items().size() != 1 || !a[2].items()[0].is(Value::Kind::kDict))
    return std::nullopt;
  Composite c{"jagged", DType::kFloat32, {}, {}};
  const Dict& kwargs = a[2].items()[0].as_dict();
  for (const char* role : {"values", "offsets", "lengths"}) {
    const Value* v = kwargs.find(std::string_view(role));
    if (v && v->is(Value::Kind::kTensor))
      c.parts.emplace_back(role, v->as_tensor());
    else if (std::string_view(role) != "lengths" || (v && !v->is_none()))
      return std::nullopt;
  }
  if (const Value* cache = kwargs.find(std::string_view("_metadata_cache")); cache && cache->is(Value::Kind::kDict))
    for (const char* role : {"min_seqlen", "max_seqlen"})
      if (const Value* v = cache->as_dict().find(std::string_view(role)); v && v->is(Value::Kind::kTensor))
        c.parts.emplace_back(role, v->as_tensor());
  if (const Value* cache = kwargs.find(std::string_view("_metadata_cache"))) c.metadata_cache = *cache;
  if (const Value* v = kwargs.find(std::string_view("_ragged_idx")); v && v->is(Value::Kind::kInt))
    c.ragged_idx = v->as_int();
  if (const Value* v = kwargs.find(std::string_view("requires_grad")); v && v->is(Value::Kind::kBool))
    c.requires_grad = v->as_bool();
  c.state = a[3];
  c.dtype = c.parts[0].second->dtype;
  c.shape = {static_cast<std::int64_t>(c.parts[1].second->numel()) - 1};
  return c;
}

// A tuple, list or torch.Size of integers.
std::optional<std::vector<std::int64_t>> ints_of(const Value& v) {
  return v.is(Value::Kind::kObject) ? size_of(v) : int_items(v);
}

// Checked by the reader (torch/composite_check.cc, check_meta) before it gets here.
std::optional<Composite> meta(const Object& o) {
  const auto& a = o.args->items();
  if (a.size() != 4 || !a[3].is(Value::Kind::kBool)) return std::nullopt;
  const auto dtype = dtype_of_global(a[0]);
  auto shape = ints_of(a[1]), stride = ints_of(a[2]);
  if (!dtype || !shape || !stride || shape->size() != stride->size()) return std::nullopt;
  Composite c{"meta", *dtype, std::move(*shape)};
  c.stride = std::move(*stride);
  c.requires_grad = a[3].as_bool();
  return c;
}

// Checked by the reader (torch/rebuild.cc, check_dtensor) before it gets here.
std::optional<Composite> dtensor(const Object& o) {
  const auto& a = o.args->items();
  if (a.size() != 4 || !is_global(a[0], "torch._utils", "_rebuild_wrapper_subclass") ||
      !a[1].is(Value::Kind::kGlobal) || !is_dtensor_type(a[1].as_global()) || !a[2].is(Value::Kind::kTuple) ||
      a[2].items().size() != 8)
    return std::nullopt;
  const Value* local = state_entry(a[3], "_local_tensor");
  const Value& size = a[2].items()[2];
  if (!local || !local->is(Value::Kind::kTensor) || !(size.is(Value::Kind::kTuple) || size.is(Value::Kind::kList)))
    return std::nullopt;
  Composite c{"dtensor", local->as_tensor()->dtype, {}, {{"local_tensor", local->as_tensor()}}};
  for (const auto& x : size.items()) {
    if (!x.is(Value::Kind::kInt)) return std::nullopt;
    c.shape.push_back(x.as_int());
  }
  const auto& w = a[2].items();
  c.type = a[1].as_global();
  if (w[3].is(Value::Kind::kTuple) || w[3].is(Value::Kind::kList))
    for (const auto& x : w[3].items())
      if (x.is(Value::Kind::kInt)) c.stride.push_back(x.as_int());
  if (w[4].is(Value::Kind::kInt)) c.storage_offset = w[4].as_int();
  c.layout_arg = w[5];
  c.device = w[6];
  c.requires_grad = w[7].is(Value::Kind::kBool) && w[7].as_bool();
  c.state = a[3];
  return c;
}

}  // namespace

const Value* state_entry(const Value& state, std::string_view name) {
  if (state.is(Value::Kind::kDict)) return state.as_dict().find(name);
  if (!state.is(Value::Kind::kTuple) || state.items().size() != 2) return nullptr;
  for (const auto& part : state.items())
    if (part.is(Value::Kind::kDict))
      if (const Value* v = part.as_dict().find(name)) return v;
  return nullptr;
}

bool is_dtensor_type(const Global& g) {
  for (const auto& t : kDTensorTypes)
    if (g.module == t.module && g.name == t.name) return true;
  return false;
}

bool is_dtensor_spec_class(std::string_view module, std::string_view name) {
  for (const auto& t : kDTensorSpecClasses)
    if (module == t.module && name == t.name) return true;
  return false;
}

namespace {

// The attributes torch writes as the state of a plain tensor: a non-empty dict of str
// keys to values without tensors (what the reader also requires of Tensor::attributes).
bool is_attributes(const Value& v) {
  if (!v.is(Value::Kind::kDict) || v.as_dict().kind != DictKind::kDict || v.as_dict().items.empty() ||
      (v.as_dict().attrs && !v.as_dict().attrs->items.empty()))
    return false;
  for (const auto& [k, x] : v.as_dict().items)
    if (!k.is(Value::Kind::kStr) || reaches_data(x)) return false;
  return true;
}

// A sparse, nested or meta tensor's own call (no Parameter, no attributes), which the
// Parameter and attribute forms wrap.
std::optional<Composite> plain(std::optional<Composite> c) {
  if (!c || c->parameter || !c->attributes.is_none() || c->layout == "jagged" || c->layout == "dtensor")
    return std::nullopt;
  return c;
}

// Parameter.__reduce_ex__ around a sparse, nested or meta tensor's call, exactly as
// torch writes it: _rebuild_parameter(<call>, requires_grad, OrderedDict()), or
// _rebuild_parameter_with_state(..., {attributes}) when `with_state` (other forms stay
// ordinary objects; a Parameter of a tensor subclass is pickled by the subclass itself).
std::optional<Composite> parameter(const Object& o, bool with_state) {
  const auto& a = o.args->items();
  if (a.size() != (with_state ? 4u : 3u) || !a[0].is(Value::Kind::kObject) || !a[1].is(Value::Kind::kBool) ||
      !a[2].is(Value::Kind::kDict) || a[2].as_dict().kind != DictKind::kOrderedDict || !a[2].as_dict().items.empty() ||
      (a[2].as_dict().attrs && !a[2].as_dict().attrs->items.empty()) || (with_state && !is_attributes(a[3])))
    return std::nullopt;
  auto c = plain(composite_of(a[0].as_object()));
  if (!c) return std::nullopt;
  c->parameter = a[1].as_bool();
  if (with_state) c->attributes = a[3];
  return c;
}

// Tensor.__reduce_ex__ of a sparse, nested or meta torch.Tensor with Python attributes:
// the rebuild function and its arguments, wrapped with the attributes as the state.
std::optional<Composite> with_attributes(const Object& o) {
  const auto& a = o.args->items();
  if (a.size() != 4 || !a[0].is(Value::Kind::kGlobal) || !a[1].is(Value::Kind::kGlobal) ||
      a[1].as_global().module != "torch" || a[1].as_global().name != "Tensor" || !a[2].is(Value::Kind::kTuple) ||
      !is_attributes(a[3]))
    return std::nullopt;
  Object inner;
  inner.callable = std::make_shared<Value>(a[0]);
  inner.args = std::make_shared<Value>(a[2]);
  auto c = plain(composite_of(inner));
  if (c) c->attributes = a[3];
  return c;
}

}  // namespace

std::optional<Composite> composite_of(const Object& o) {
  if (is_call(o, "torch._utils", "_rebuild_parameter")) return parameter(o, false);
  if (is_call(o, "torch._utils", "_rebuild_parameter_with_state")) return parameter(o, true);
  if (is_call(o, "torch._utils", "_rebuild_sparse_tensor")) return sparse(o);
  if (is_call(o, "torch._utils", "_rebuild_nested_tensor")) return nested(o);
  if (is_call(o, "torch._utils", "_rebuild_meta_tensor_no_storage")) return meta(o);
  if (is_call(o, "torch._tensor", "_rebuild_from_type_v2")) {
    if (auto c = jagged(o)) return c;
    if (auto c = dtensor(o)) return c;
    return with_attributes(o);
  }
  return std::nullopt;
}

// ---- encode -----------------------------------------------------------------------

namespace {

Value call(Value callable, std::vector<Value> args) {
  auto o = std::make_shared<Object>();
  o->callable = std::make_shared<Value>(std::move(callable));
  o->args = std::make_shared<Value>(Value::tuple(std::move(args)));
  return Value(std::move(o));
}

Value int_tuple_value(const std::vector<std::int64_t>& xs) {
  std::vector<Value> items(xs.begin(), xs.end());
  return Value::tuple(std::move(items));
}

void set(Value& dict, std::string_view key, Value v) {
  dict.as_dict().items.emplace_back(Value::str(std::string(key)), std::move(v));
}

[[noreturn]] void cannot_encode(const Composite& c, std::string_view why) {
  throw Error(rules::kCannotWrite, "a " + c.layout + " tensor: " + std::string(why));
}

Value required(const Composite& c, std::string_view role) {
  auto t = c.part(role);
  if (!t) cannot_encode(c, "has no part '" + std::string(role) + "'");
  return Value(t);
}

Value encode_sparse(const Composite& c) {
  const bool coo = c.layout == "sparse_coo";
  const bool rows = c.layout == "sparse_csr" || c.layout == "sparse_bsr";
  std::vector<Value> data;
  if (coo) {
    data = {required(c, "indices"), required(c, "values")};
  } else {
    data = {required(c, rows ? "crow_indices" : "ccol_indices"), required(c, rows ? "col_indices" : "row_indices"),
            required(c, "values")};
  }
  data.push_back(call(Value::global("torch", "Size"), {int_tuple_value(c.shape)}));
  if (coo && c.coalesced) data.push_back(*c.coalesced);
  // The layout object as kept (one object a file may share among its sparse tensors), or a new one.
  if (!c.layout_arg.is_none() && layout_of(c.layout_arg) != c.layout) cannot_encode(c, "its layout argument differs");
  const Value layout = c.layout_arg.is_none() ? call(Value::global("torch.serialization", "_get_layout"),
                                                     {Value::str("torch." + c.layout)})
                                              : c.layout_arg;
  return call(Value::global("torch._utils", "_rebuild_sparse_tensor"), {layout, Value::tuple(std::move(data))});
}

Value encode_nested(const Composite& c) {
  return call(Value::global("torch._utils", "_rebuild_nested_tensor"),
              {required(c, "buffer"), required(c, "sizes"), required(c, "strides"), required(c, "offsets")});
}

// NestedTensor.__reduce_ex__'s keyword arguments, in its order.
Value encode_jagged(const Composite& c) {
  constexpr std::string_view kModule = "torch.nested._internal.nested_tensor";
  Value kwargs = Value::dict();
  set(kwargs, "values", required(c, "values"));
  set(kwargs, "offsets", required(c, "offsets"));
  set(kwargs, "lengths", c.part("lengths") ? Value(c.part("lengths")) : Value());
  set(kwargs, "_ragged_idx", Value(c.ragged_idx));
  Value cache = c.metadata_cache;
  if (cache.is_none()) {
    cache = Value::dict();
    for (std::string_view role : {"min_seqlen", "max_seqlen"})
      if (auto t = c.part(role)) set(cache, role, Value(t));
  }
  if (!cache.is(Value::Kind::kDict)) cannot_encode(c, "its metadata cache is not a dict");
  for (const auto& [k, v] : cache.as_dict().items)
    if (!k.is(Value::Kind::kStr) || !v.is(Value::Kind::kTensor) || v.as_tensor() != c.part(k.as_str()))
      cannot_encode(c, "its metadata cache holds other than its min_seqlen / max_seqlen parts");
  set(kwargs, "_metadata_cache", cache);
  set(kwargs, "requires_grad", Value(c.requires_grad));
  return call(Value::global("torch._tensor", "_rebuild_from_type_v2"),
              {Value::global(std::string(kModule), "_rebuild_njt"), Value::global(std::string(kModule), "NestedTensor"),
               Value::tuple({kwargs}), c.state});
}

// Tensor.__reduce_ex__ of a wrapper subclass. The state (a DTensor's attributes are
// __slots__: (None, {_local_tensor, _spec})) is written as kept; it must hold the part.
Value encode_dtensor(const Composite& c) {
  if (!is_dtensor_type(c.type)) cannot_encode(c, "its class is not DTensor");
  const Value* local = state_entry(c.state, "_local_tensor");
  if (!local || !local->is(Value::Kind::kTensor) || local->as_tensor() != c.part("local_tensor"))
    cannot_encode(c, "its state does not hold its local tensor");
  const Value type = Value::global(c.type.module, c.type.name);
  return call(Value::global("torch._tensor", "_rebuild_from_type_v2"),
              {Value::global("torch._utils", "_rebuild_wrapper_subclass"), type,
               Value::tuple({type, Value::global("torch", std::string(name(c.dtype))), int_tuple_value(c.shape),
                             int_tuple_value(c.stride), Value(c.storage_offset), c.layout_arg, c.device,
                             Value(c.requires_grad)}),
               c.state});
}

// Tensor.__reduce_ex__ of a tensor on the meta device: tuples, as torch writes them.
Value encode_meta(const Composite& c) {
  if (!c.parts.empty()) cannot_encode(c, "has parts (a meta tensor has no data)");
  if (c.stride.size() != c.shape.size()) cannot_encode(c, "its size and stride differ in length");
  return call(Value::global("torch._utils", "_rebuild_meta_tensor_no_storage"),
              {Value::global("torch", std::string(name(c.dtype))), int_tuple_value(c.shape), int_tuple_value(c.stride),
               Value(c.requires_grad)});
}

}  // namespace

namespace {

Value encode_tensor(const Composite& c) {
  for (std::string_view l : kSparseLayouts)
    if (c.layout == l) return encode_sparse(c);
  if (c.layout == "nested") return encode_nested(c);
  if (c.layout == "jagged") return encode_jagged(c);
  if (c.layout == "dtensor") return encode_dtensor(c);
  if (c.layout == "meta") return encode_meta(c);
  cannot_encode(c, "not a layout tensorseal writes");
}

}  // namespace

Value encode(const Composite& c) {
  Value t = encode_tensor(c);
  if (!c.attributes.is_none()) {
    // Tensor.__reduce_ex__ / Parameter.__reduce_ex__ of an object with attributes.
    if (c.layout == "jagged" || c.layout == "dtensor") cannot_encode(c, "its attributes are in its state");
    if (!is_attributes(c.attributes))
      cannot_encode(c, "its attributes are not a dict of str keys to values without tensors");
    if (c.parameter)
      return call(Value::global("torch._utils", "_rebuild_parameter_with_state"),
                  {std::move(t), Value(*c.parameter), Value::dict(DictKind::kOrderedDict), c.attributes});
    const Object& inner = t.as_object();
    return call(Value::global("torch._tensor", "_rebuild_from_type_v2"),
                {*inner.callable, Value::global("torch", "Tensor"), *inner.args, c.attributes});
  }
  if (!c.parameter) return t;
  // A Parameter of a tensor subclass is pickled by the subclass itself, never through
  // _rebuild_parameter.
  if (c.layout == "jagged" || c.layout == "dtensor") cannot_encode(c, "a Parameter of it is not written as one");
  return call(Value::global("torch._utils", "_rebuild_parameter"),
              {std::move(t), Value(*c.parameter), Value::dict(DictKind::kOrderedDict)});
}

}  // namespace tensorseal::detail::torch
