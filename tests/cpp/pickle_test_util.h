// Helpers shared by pickle_vm_test.cc and pickle_writer_test.cc.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "pickle/constants.h"
#include "pickle/stdlib.h"
#include "pickle/vm.h"
#include "pickle/writer.h"
#include "test_util.h"

namespace tensorseal::testing {

inline std::string hex(std::string_view s) { return hex_of(s); }

// The canonical text form tests/fixtures/gen_pickle.py's describe() writes for the
// same Python value (plus G/R forms for globals and objects, which Python never writes).
inline std::string describe(const Value& v) {
  using K = Value::Kind;
  auto seq = [](const std::vector<Value>& items) {
    std::string s;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) s += ',';
      s += describe(items[i]);
    }
    return s;
  };
  auto pairs = [](const std::vector<std::pair<Value, Value>>& items) {
    std::string s;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) s += ',';
      s += describe(items[i].first) + ":" + describe(items[i].second);
    }
    return s;
  };
  switch (v.kind()) {
    case K::kNone:
      return "N";
    case K::kBool:
      return v.as_bool() ? "T" : "F";
    case K::kInt:
      return "i" + std::to_string(v.as_int());
    case K::kBigInt:
      return "i" + v.as_bigint().to_decimal();
    case K::kFloat: {
      double d = v.as_float();
      std::uint64_t u;
      std::memcpy(&u, &d, 8);
      std::string be;
      for (int i = 7; i >= 0; --i) be += static_cast<char>((u >> (8 * i)) & 0xFF);
      return "f" + hex(be);
    }
    case K::kComplex:
      return "c" + describe(Value(v.as_complex().real)) + describe(Value(v.as_complex().imag));
    case K::kStr:
      return "u" + hex(v.as_str());
    case K::kBytes:
      return (v.is_bytearray() ? "y" : "b") + hex(v.as_bytes());
    case K::kList:
      return "[" + seq(v.items()) + "]";
    case K::kTuple:
      return "(" + seq(v.items()) + ")";
    case K::kSet: {
      std::vector<std::string> parts;
      for (const Value& x : v.as_set().items) parts.push_back(describe(x));
      std::sort(parts.begin(), parts.end());
      std::string s = v.as_set().frozen ? "Z{" : "S{";
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i) s += ',';
        s += parts[i];
      }
      return s + "}";
    }
    case K::kDict: {
      const Dict& d = v.as_dict();
      std::string s = d.kind == DictKind::kCounter ? "C" : d.kind == DictKind::kOrderedDict ? "O" : "";
      s += "{" + pairs(d.items) + "}";
      if (d.attrs && !d.attrs->items.empty()) s += "@{" + pairs(d.attrs->items) + "}";
      return s;
    }
    case K::kGlobal:
      return "G" + v.as_global().module + "." + v.as_global().name;
    case K::kRef:
      return "^" + std::string(kind_name(v.ref_target().kind()));  // a back reference
    case K::kObject: {
      const Object& o = v.as_object();
      std::string s =
          "R" + std::to_string(static_cast<int>(o.how)) + "<" + (o.callable ? describe(*o.callable) : "") + ">";
      s += o.args ? describe(*o.args) : "()";
      if (o.kwargs) s += "kw" + describe(*o.kwargs);
      if (!o.list_items.empty()) s += "+[" + seq(o.list_items) + "]";
      if (!o.dict_items.empty()) s += "+{" + pairs(o.dict_items) + "}";
      if (o.state) s += "~" + describe(*o.state);
      return s;
    }
    case K::kTensor:
      return "tensor";
    case K::kStorage:
      return "storage";
  }
  return "?";
}

inline detail::pickle::Hooks stdlib_hooks() {
  detail::pickle::Hooks h;
  h.reduce = [](const Object& o, std::uint64_t) { return detail::pickle::stdlib_reduce(o); };
  return h;
}

inline detail::pickle::Parsed parse_bytes(const std::string& bytes, const Limits& limits = {},
                                          const detail::pickle::Hooks& hooks = {}, const std::string& name = "t.pkl",
                                          std::uint64_t base = 0) {
  return detail::pickle::parse(bytes_of(bytes), name, base, limits, hooks);
}

// Rule id of the error parsing `bytes` throws, "" when it parses.
inline std::string parse_rule(const std::string& bytes, const Limits& limits = {},
                              const detail::pickle::Hooks& hooks = {}) {
  return rule_of([&] { (void)parse_bytes(bytes, limits, hooks); });
}

inline std::string fact(const detail::pickle::Parsed& p, std::string_view topic) {
  for (const auto& f : p.facts)
    if (f.topic == topic) return f.value;
  return "<absent>";
}

}  // namespace tensorseal::testing
