// JSON encoding of the value tree (version 1). Every node is one JSON value:
//   null / true / false / "str"            None, bool, str
//   {"i": "123"}                           int (decimal string: exact for any size)
//   {"f": "0x3ff0000000000000"}            float as its IEEE-754 bits (NaN payloads, -0.0)
//   {"c": ["0x..", "0x.."]}                complex: real and imaginary parts' bits
//   {"b": "<hex>", "ba": true?}            bytes / bytearray
//   {"l": [...]} / {"u": [...]}            list / tuple
//   {"s": [...], "frozen": true?}          set / frozenset
//   {"d": [[k, v], ...], "kind": "OrderedDict"|"Counter"?, "attrs": [[k, v], ...]?}
//   {"t": "name", "rg": true?, "param": true?}   tensor: its flat name + flags
//   {"g": ["module", "name"]}              global
//   {"o": {"call": .., "args": .., "kwargs": .., "how": n, "state": .., "li": [..], "di": [..]}}
// Storages outside tensors are not representable in safetensors (error).
#include "safetensors/structure.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/expansion.h"
#include "core/walk.h"
#include "safetensors/constants.h"
#include "tensorseal/error.h"
#include "util/hex.h"

namespace tensorseal::detail::safetensors {
using ojson = nlohmann::ordered_json;

bool is_flat(const Value& root) {
  if (!root.is(Value::Kind::kDict)) return false;
  const Dict& d = root.as_dict();
  if (d.kind != DictKind::kDict || (d.attrs && !d.attrs->items.empty())) return false;
  std::vector<const Storage*> storages;  // of the non-empty tensors: flat when no two share one
  storages.reserve(d.items.size());
  for (const auto& [k, v] : d.items) {
    if (!k.is(Value::Kind::kStr) || !v.is(Value::Kind::kTensor)) return false;
    const Tensor& t = *v.as_tensor();
    if (t.requires_grad || t.is_parameter || t.numpy != NumpyType::kNone || t.attributes) return false;
    if (t.nbytes() > 0) storages.push_back(t.storage.get());
  }
  std::sort(storages.begin(), storages.end());
  return std::adjacent_find(storages.begin(), storages.end()) == storages.end();
}

namespace {

// "0x" and the 16 hex digits of a double's IEEE-754 bits.
std::string float_bits(double d) {
  std::uint64_t bits;
  std::memcpy(&bits, &d, 8);
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(bits));
  return buf;
}

double float_from_bits(const std::string& s) {
  std::uint64_t bits = std::strtoull(s.c_str(), nullptr, 16);
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

// Identity of a view: the same storage, dtype, offset, shape and strides.
using ViewKey = std::tuple<const Storage*, DType, std::int64_t, std::vector<std::int64_t>, std::vector<std::int64_t>>;
ViewKey view_key(const Tensor& t) { return {t.storage.get(), t.dtype, t.storage_offset, t.shape, t.strides}; }

// A tensor's flat name is its path by the rules of core/walk.h, with the differences
// that written files pin: keys that are neither str nor int are repr'd to 40
// characters, an object's state (of any kind) sits at the object's own path with no
// transparent nn.Module attributes, dict attrs sit under "<path>#attrs", and a name
// already taken gets "#1", "#2", ...
struct Encoder {
  Dict flat;                                      // name -> tensor, first occurrence
  std::map<ViewKey, std::string> names;           // a view -> its flat name (tied = one entry)
  std::map<const Storage*, const Tensor*> bases;  // storage -> contiguous tensor covering its views
  std::map<const Tensor*, std::string> base_names;
  std::set<std::string> used;

  // Views of one storage: safetensors stores each view's own elements (stock readers
  // see every name); the structure additionally records each view as a window of a
  // contiguous "base" view covering it, so tensorseal restores the sharing.
  void plan_bases(const Value& root) {
    std::map<const Storage*, std::vector<const Tensor*>> groups;
    for (const auto& ref : collect_tensors(root)) groups[ref.tensor->storage.get()].push_back(ref.tensor.get());
    for (const auto& [s, g] : groups) {
      const Tensor* best = nullptr;
      std::uint64_t best_len = 0;
      for (const Tensor* t : g) {
        auto [b, e] = t->storage_extent();
        if (t->is_contiguous() && e - b >= best_len && info(t->dtype).bits % 8 == 0) {
          best = t;
          best_len = e - b;
        }
      }
      if (!best) continue;
      auto [bb, be] = best->storage_extent();
      bool covers = true;
      for (const Tensor* t : g) {
        auto [b, e] = t->storage_extent();
        covers &= t->dtype == best->dtype && (b == e || (b >= bb && e <= be));
      }
      if (covers && g.size() > 1) bases[s] = best;
    }
  }

  std::string unique(std::string base) {
    if (base.empty()) base = "tensor";
    if (base == safetensors::kMetadataKey) base += "_";
    std::string n = base;
    for (int i = 1; used.count(n); ++i) n = base + "#" + std::to_string(i);
    used.insert(n);
    return n;
  }

  ojson items(const std::vector<std::pair<Value, Value>>& its, const std::string& path) {
    ojson a = ojson::array();
    for (const auto& [k, v] : its) {
      a.push_back(ojson::array({enc(k, path), enc(v, core::path_join(path, core::key_text(k, 40)))}));
    }
    return a;
  }

  ojson seq(const std::vector<Value>& xs, const std::string& path) {
    ojson a = ojson::array();
    for (std::size_t i = 0; i < xs.size(); ++i) a.push_back(enc(xs[i], core::path_join(path, std::to_string(i))));
    return a;
  }

  ojson enc(const Value& v, const std::string& path) {
    using K = Value::Kind;
    switch (v.kind()) {
      case K::kNone:
        return nullptr;
      case K::kBool:
        return v.as_bool();
      case K::kInt:
        return ojson{{"i", std::to_string(v.as_int())}};
      case K::kBigInt:
        return ojson{{"i", v.as_bigint().to_decimal()}};
      case K::kFloat:
        return ojson{{"f", float_bits(v.as_float())}};
      case K::kComplex: {
        const Complex c = v.as_complex();
        return ojson{{"c", ojson::array({float_bits(c.real), float_bits(c.imag)})}};
      }
      case K::kStr:
        return std::string(v.as_str());
      case K::kBytes: {
        ojson j{{"b", util::to_hex(v.as_bytes())}};
        if (v.is_bytearray()) j["ba"] = true;
        return j;
      }
      case K::kList:
        return ojson{{"l", seq(v.items(), path)}};
      case K::kTuple:
        return ojson{{"u", seq(v.items(), path)}};
      case K::kSet: {
        ojson j{{"s", seq(v.as_set().items, path)}};
        if (v.as_set().frozen) j["frozen"] = true;
        return j;
      }
      case K::kDict: {
        const Dict& d = v.as_dict();
        ojson j{{"d", items(d.items, path)}};
        if (d.kind == DictKind::kOrderedDict) j["kind"] = "OrderedDict";
        if (d.kind == DictKind::kCounter) j["kind"] = "Counter";
        if (d.attrs) j["attrs"] = items(d.attrs->items, path + "#attrs");
        return j;
      }
      case K::kTensor: {
        const auto& t = v.as_tensor();
        auto it = names.find(view_key(*t));
        std::string name;
        const bool first = it == names.end();
        if (!first)
          name = it->second;
        else {
          name = unique(path);
          names.emplace(view_key(*t), name);
          // The stored tensor carries no flags: they live in the structure.
          auto plain = std::make_shared<Tensor>(*t);
          plain->requires_grad = false;
          plain->is_parameter = false;
          plain->numpy = NumpyType::kNone;
          plain->attributes.reset();
          flat.items.emplace_back(Value::str(name), Value(std::shared_ptr<const Tensor>(plain)));
        }
        ojson j{{"t", name}};
        if (t->requires_grad) j["rg"] = true;
        if (t->is_parameter) j["param"] = true;
        if (t->numpy != NumpyType::kNone) j["np"] = t->numpy == NumpyType::kArray ? "array" : "scalar";
        if (t->attributes) j["a"] = enc(*t->attributes, path + "#attributes");
        auto b = bases.find(t->storage.get());
        if (b != bases.end() && !(view_key(*b->second) == view_key(*t))) {
          // A window of the base view: element offset from the base's first element.
          const Tensor& base = *b->second;
          auto bn = names.find(view_key(base));
          std::string base_name;
          if (bn == names.end()) {  // make sure the base itself is stored
            base_name = unique(path + "#base");
            names.emplace(view_key(base), base_name);
            flat.items.emplace_back(
                Value::str(base_name),
                Value(make_contiguous(base.dtype, base.shape,
                                      Storage::slice(base.storage, base.storage_extent().first, base.nbytes()))));
          } else
            base_name = bn->second;
          j["base"] = base_name;
          j["off"] = t->storage_offset - base.storage_offset;
          j["strides"] = t->strides;
        }
        (void)first;
        return j;
      }
      case K::kStorage:
        throw Error(rules::kNotFlat, "a bare storage at '" + path + "' cannot be stored in safetensors");
      case K::kRef:
        throw Error(rules::kNotFlat, "a recursive value at '" + path + "' cannot be stored in safetensors");
      case K::kGlobal:
        return ojson{{"g", ojson::array({v.as_global().module, v.as_global().name})}};
      case K::kObject: {
        const Object& o = v.as_object();
        ojson j = ojson::object();
        auto opt = [&](const char* key, const std::shared_ptr<Value>& p, const std::string& sub) {
          if (p) j[key] = enc(*p, sub);
        };
        opt("call", o.callable, path);
        opt("args", o.args, core::path_join(path, "args"));
        opt("kwargs", o.kwargs, core::path_join(path, "kwargs"));
        j["how"] = static_cast<int>(o.how);
        opt("state", o.state, path);
        if (!o.list_items.empty()) j["li"] = seq(o.list_items, path);
        if (!o.dict_items.empty()) j["di"] = items(o.dict_items, path);
        return ojson{{"o", j}};
      }
    }
    return nullptr;
  }
};

struct Decoder {
  const Dict& flat;
  const std::string& file;
  const Limits& limits;
  std::map<std::tuple<std::string, std::int64_t, std::vector<std::int64_t>, std::vector<std::int64_t>, bool, bool,
                      NumpyType>,
           Value>
      views;

  [[noreturn]] void bad(const std::string& why) const {
    throw Error(rules::kBadStructure, "tensorseal.structure: " + why, file);
  }

  std::vector<std::pair<Value, Value>> items(const ojson& a, int depth) {
    if (!a.is_array()) bad("items are not an array");
    std::vector<std::pair<Value, Value>> out;
    for (const auto& kv : a) {
      if (!kv.is_array() || kv.size() != 2) bad("an item is not [key, value]");
      out.emplace_back(dec(kv[0], depth + 1), dec(kv[1], depth + 1));
    }
    return out;
  }
  std::vector<Value> seq(const ojson& a, int depth) {
    if (!a.is_array()) bad("sequence is not an array");
    std::vector<Value> out;
    for (const auto& x : a) out.push_back(dec(x, depth + 1));
    return out;
  }

  Value dec(const ojson& j, int depth) {
    if (depth > 1000) bad("nested deeper than 1000");
    if (j.is_null()) return Value();
    if (j.is_boolean()) return Value(j.get<bool>());
    if (j.is_string()) return Value::str(j.get<std::string>());
    if (!j.is_object() || j.empty()) bad("unexpected JSON " + j.dump().substr(0, 60));
    if (auto it = j.find("i"); it != j.end()) {
      const std::string s = it->get<std::string>();
      try {
        std::size_t used = 0;
        long long x = std::stoll(s, &used);
        if (used == s.size()) return Value(static_cast<std::int64_t>(x));
      } catch (...) {
      }
      return Value(big_from_decimal(s));
    }
    if (auto it = j.find("f"); it != j.end()) return Value(float_from_bits(it->get<std::string>()));
    if (auto it = j.find("c"); it != j.end()) {
      if (!it->is_array() || it->size() != 2 || !(*it)[0].is_string() || !(*it)[1].is_string())
        bad("complex is not [real bits, imag bits]");
      return Value(Complex{float_from_bits((*it)[0].get<std::string>()), float_from_bits((*it)[1].get<std::string>())});
    }
    if (auto it = j.find("b"); it != j.end()) {
      const std::string h = it->get<std::string>();
      if (h.size() % 2) bad("odd hex length");
      std::string out;
      for (std::size_t i = 0; i < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
      return Value::bytes(std::move(out), j.value("ba", false));
    }
    if (auto it = j.find("l"); it != j.end()) return Value::list(seq(*it, depth));
    if (auto it = j.find("u"); it != j.end()) return Value::tuple(seq(*it, depth));
    if (auto it = j.find("s"); it != j.end()) {
      auto s = std::make_shared<Set>();
      s->items = seq(*it, depth);
      s->frozen = j.value("frozen", false);
      return Value(s);
    }
    if (auto it = j.find("d"); it != j.end()) {
      auto d = std::make_shared<Dict>();
      const std::string kind = j.value("kind", "");
      d->kind = kind == "OrderedDict" ? DictKind::kOrderedDict
                : kind == "Counter"   ? DictKind::kCounter
                                      : DictKind::kDict;
      for (auto& [k, v] : items(*it, depth)) d->set(k, v);
      if (auto a = j.find("attrs"); a != j.end()) {
        d->attrs = std::make_shared<Dict>();
        for (auto& [k, v] : items(*a, depth)) d->attrs->set(k, v);
      }
      return Value(d);
    }
    if (auto it = j.find("t"); it != j.end()) {
      const Value* t = flat.find(it->get<std::string>());
      if (!t || !t->is(Value::Kind::kTensor)) bad("names tensor '" + it->get<std::string>() + "' that the file lacks");
      const bool rg = j.value("rg", false), param = j.value("param", false);
      NumpyType np = NumpyType::kNone;
      if (auto n = j.find("np"); n != j.end()) {
        if (!n->is_string() || (*n != "array" && *n != "scalar")) bad("\"np\" is not \"array\" or \"scalar\"");
        np = *n == "array" ? NumpyType::kArray : NumpyType::kScalar;
        if (np == NumpyType::kScalar && !t->as_tensor()->shape.empty()) bad("a numpy scalar is not 0-d");
      }
      std::shared_ptr<const Value> attributes;
      if (auto a = j.find("a"); a != j.end()) {
        Value d = dec(*a, depth + 1);
        if (!d.is(Value::Kind::kDict) || d.as_dict().items.empty()) bad("tensor attributes are not a non-empty dict");
        for (const auto& [k, x] : d.as_dict().items)
          if (!k.is(Value::Kind::kStr)) bad("a tensor attribute's name is not a str");
        attributes = std::make_shared<const Value>(std::move(d));
      }
      if (auto b = j.find("base"); b != j.end()) {
        // A view sharing the base tensor's storage (see Encoder::plan_bases).
        const Value* base = flat.find(b->get<std::string>());
        if (!base || !base->is(Value::Kind::kTensor))
          bad("names base tensor '" + b->get<std::string>() + "' that the file lacks");
        const Tensor& bt = *base->as_tensor();
        auto view = std::make_shared<Tensor>(*t->as_tensor());
        view->storage = bt.storage;
        view->storage_offset = bt.storage_offset + j.value("off", std::int64_t{0});
        view->strides = j.value("strides", std::vector<std::int64_t>{});
        view->requires_grad = rg;
        view->is_parameter = param;
        view->numpy = np;
        view->attributes = attributes;
        if (view->dtype != bt.dtype) bad("view and base dtypes differ");
        try {
          view->validate();
        } catch (const Error& e) {
          bad(std::string("view does not fit its base: ") + e.detail());
        }
        try {
          core::check_expansion(*view, limits);
        } catch (const Error& e) {
          throw e.located(file);
        }
        // Views of one base must stay one object per distinct view.
        auto key =
            std::make_tuple(b->get<std::string>(), view->storage_offset, view->shape, view->strides, rg, param, np);
        Value out{std::shared_ptr<const Tensor>(view)};
        if (attributes) return out;  // its own object: attributes are not part of the key
        auto known = views.find(key);
        if (known != views.end()) return known->second;
        views.emplace(key, out);
        return out;
      }
      if (!rg && !param && np == NumpyType::kNone && !attributes) return *t;
      auto copy = std::make_shared<Tensor>(*t->as_tensor());
      copy->requires_grad = rg;
      copy->is_parameter = param;
      copy->numpy = np;
      copy->attributes = attributes;
      return Value(std::shared_ptr<const Tensor>(copy));
    }
    if (auto it = j.find("g"); it != j.end()) {
      if (!it->is_array() || it->size() != 2) bad("global is not [module, name]");
      return Value::global((*it)[0].get<std::string>(), (*it)[1].get<std::string>());
    }
    if (auto it = j.find("o"); it != j.end()) {
      const ojson& o = *it;
      auto obj = std::make_shared<Object>();
      auto opt = [&](const char* key) -> std::shared_ptr<Value> {
        auto f = o.find(key);
        return f == o.end() ? nullptr : std::make_shared<Value>(dec(*f, depth + 1));
      };
      obj->callable = opt("call");
      obj->args = opt("args");
      obj->kwargs = opt("kwargs");
      obj->state = opt("state");
      obj->how = static_cast<Construct>(o.value("how", 0));
      if (auto f = o.find("li"); f != o.end()) obj->list_items = seq(*f, depth);
      if (auto f = o.find("di"); f != o.end()) obj->dict_items = items(*f, depth);
      return Value(obj);
    }
    bad("unknown node " + j.dump().substr(0, 60));
  }

  // Decimal -> minimal two's complement little-endian.
  static BigInt big_from_decimal(const std::string& s) {
    bool neg = !s.empty() && s[0] == '-';
    std::vector<std::uint8_t> mag;  // little-endian base 256
    for (std::size_t i = neg ? 1 : 0; i < s.size(); ++i) {
      unsigned carry = static_cast<unsigned>(s[i] - '0');
      for (auto& b : mag) {
        unsigned v = b * 10u + carry;
        b = static_cast<std::uint8_t>(v);
        carry = v >> 8;
      }
      while (carry) {
        mag.push_back(static_cast<std::uint8_t>(carry));
        carry >>= 8;
      }
    }
    mag.push_back(0);  // room for the sign bit
    if (neg) {
      unsigned carry = 1;
      for (auto& b : mag) {
        unsigned v = static_cast<std::uint8_t>(~b) + carry;
        b = static_cast<std::uint8_t>(v);
        carry = v >> 8;
      }
    }
    while (mag.size() > 1) {
      const bool below = mag[mag.size() - 2] & 0x80;
      if ((mag.back() == 0 && !below) || (mag.back() == 0xff && below))
        mag.pop_back();
      else
        break;
    }
    return BigInt{std::string(mag.begin(), mag.end())};
  }
};

}  // namespace

Flattened flatten(const Value& root) {
  Encoder e;
  e.plan_bases(root);
  ojson j{{"version", kVersion}, {"root", e.enc(root, "")}};
  Flattened f;
  auto d = std::make_shared<Dict>(std::move(e.flat));
  f.flat = Value(d);
  f.structure = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  return f;
}

Value unflatten(std::string_view structure, const Value& flat, const std::string& file, const Limits& limits) {
  ojson j;
  try {
    j = ojson::parse(structure);
  } catch (const ojson::parse_error& e) {
    throw Error(rules::kBadStructure, std::string("tensorseal.structure is not JSON: ") + e.what(), file);
  }
  if (!j.is_object() || j.value("version", 0) != kVersion || !j.contains("root"))
    throw Error(rules::kBadStructure, "tensorseal.structure has an unknown version", file);
  Decoder d{flat.as_dict(), file, limits, {}};
  return d.dec(j["root"], 0);
}

}  // namespace tensorseal::detail::safetensors
