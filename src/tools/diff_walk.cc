#include "tools/diff_walk.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "tensorseal/hash.h"

namespace tensorseal::tools {
namespace {

std::string key_text(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kStr: return std::string(k.as_str());
    case Value::Kind::kInt: return std::to_string(k.as_int());
    default: return repr(k, 80);
  }
}

bool transparent_module_attr(std::string_view k) {
  return k == "_parameters" || k == "_buffers" || k == "_modules";
}

std::string join(const std::string& base, const std::string& part) {
  return base.empty() ? part : base + "." + part;
}

std::string float_key(double d) {
  std::uint64_t bits;
  std::memcpy(&bits, &d, 8);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(bits));
  return buf;
}

std::string float_display(double d) {
  if (std::isnan(d)) return "nan (0x" + float_key(d) + ")";
  return repr(Value(d));
}

struct Walker {
  Flat out;
  std::unordered_set<const void*> seen;

  void leaf(const std::string& path, std::string key, std::string display) {
    out.leaves.push_back({path, std::move(key), std::move(display)});
  }

  void items(const std::vector<std::pair<Value, Value>>& kv, const std::string& path, bool module_state) {
    for (const auto& [k, v] : kv) {
      std::string kt = key_text(k);
      visit(v, module_state && transparent_module_attr(kt) ? path : join(path, kt), false);
    }
  }

  void visit(const Value& v, const std::string& path, bool module_state) {
    using K = Value::Kind;
    switch (v.kind()) {
      case K::kTensor: out.tensors.push_back({path, v.as_tensor()}); return;
      case K::kNone: leaf(path, "N", "None"); return;
      case K::kBool: leaf(path, v.as_bool() ? "B1" : "B0", v.as_bool() ? "True" : "False"); return;
      case K::kInt: leaf(path, "I" + std::to_string(v.as_int()), std::to_string(v.as_int())); return;
      case K::kBigInt: leaf(path, "I" + v.as_bigint().to_decimal(), v.as_bigint().to_decimal()); return;
      case K::kFloat: leaf(path, "F" + float_key(v.as_float()), float_display(v.as_float())); return;
      case K::kStr: leaf(path, "S" + std::string(v.as_str()), repr(v)); return;
      case K::kBytes: leaf(path, "Y" + std::string(v.as_bytes()), repr(v)); return;
      case K::kGlobal: {
        const Global& g = v.as_global();
        leaf(path, "G" + g.module + "\n" + g.name, g.module + "." + g.name);
        return;
      }
      case K::kStorage: {
        const Storage& s = *v.as_storage();
        const std::string sha = sha256_hex(s.bytes());
        const std::string d = "storage(" + std::string(name(s.dtype)) + ", " + std::to_string(s.size()) + " bytes)";
        leaf(path, "R" + std::string(name(s.dtype)) + sha, d);
        return;
      }
      default: break;
    }
    // Containers: visited once each (shared nodes, cycles).
    if (!seen.insert(v.node()).second) return;
    switch (v.kind()) {
      case K::kList:
      case K::kTuple: {
        const bool list = v.kind() == K::kList;
        leaf(path, list ? "<list>" : "<tuple>", list ? "<list>" : "<tuple>");
        const auto& it = v.items();
        for (std::size_t i = 0; i < it.size(); ++i) visit(it[i], join(path, std::to_string(i)), false);
        return;
      }
      case K::kSet: {
        leaf(path, "<set>", "<set>");
        const auto& it = v.as_set().items;
        for (std::size_t i = 0; i < it.size(); ++i) visit(it[i], join(path, std::to_string(i)), false);
        return;
      }
      case K::kDict:
        // dict, OrderedDict and Counter alike, as the content hash treats them.
        leaf(path, "<dict>", "<dict>");
        items(v.as_dict().items, path, module_state);
        return;
      case K::kObject: {
        const Object& o = v.as_object();
        std::string callable = o.callable ? repr(*o.callable, 120) : "?";
        leaf(path, "<object " + callable + ">", "<object " + callable + ">");
        if (o.args && o.args->kind() == K::kTuple) {
          const auto& a = o.args->items();
          for (std::size_t i = 0; i < a.size(); ++i) visit(a[i], join(path, "args." + std::to_string(i)), false);
        }
        if (o.kwargs) visit(*o.kwargs, join(path, "kwargs"), false);
        if (o.state) {
          if (o.state->kind() == K::kDict) {
            if (seen.insert(o.state->node()).second) items(o.state->as_dict().items, path, true);
          } else {
            visit(*o.state, join(path, "state"), false);
          }
        }
        for (std::size_t i = 0; i < o.list_items.size(); ++i) visit(o.list_items[i], join(path, std::to_string(i)), false);
        items(o.dict_items, path, false);
        return;
      }
      default: return;
    }
  }
};

}  // namespace

Flat flatten(const Value& root) {
  Walker w;
  w.visit(root, "", false);
  return std::move(w.out);
}

}  // namespace tensorseal::tools
