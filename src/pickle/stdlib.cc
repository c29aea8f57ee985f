// pickle: the standard-library call table (stdlib.h). Each builder mirrors what the
// CPython 3.11 callable returns for the arguments CPython's picklers write, and gives
// nullopt wherever Python would raise or build something the tree has no kind for.
#include "pickle/stdlib.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>

#include "pickle/keys.h"
#include "util/text.h"

namespace tensorseal::detail::pickle {
namespace {

bool is_sequence(const Value& v) { return v.is(Value::Kind::kList) || v.is(Value::Kind::kTuple); }

bool is_latin1_name(const Value& v) {
  return v.is(Value::Kind::kStr) && (v.as_str() == "latin1" || v.as_str() == "latin-1");
}

bool is_utf8_name(const Value& v) {
  return v.is(Value::Kind::kStr) && (v.as_str() == "utf-8" || v.as_str() == "utf8" || v.as_str() == "UTF-8");
}

// dict(x) / OrderedDict(x) / Counter(x) for a dict or a sequence of 2-item pairs.
std::optional<Value> mapping(DictKind kind, const std::vector<Value>& args) {
  auto d = std::make_shared<Dict>();
  d->kind = kind;
  if (args.empty()) return Value(std::move(d));
  if (args.size() != 1) return std::nullopt;
  KeyIndex index;
  if (args[0].is(Value::Kind::kDict)) {
    for (const auto& [k, v] : args[0].as_dict().items)
      if (!dict_set(d->items, index, k, v)) return std::nullopt;
    return Value(std::move(d));
  }
  if (!is_sequence(args[0])) return std::nullopt;
  for (const Value& pair : args[0].items()) {
    if (!is_sequence(pair) || pair.items().size() != 2) return std::nullopt;
    if (!dict_set(d->items, index, pair.items()[0], pair.items()[1])) return std::nullopt;
  }
  return Value(std::move(d));
}

std::optional<Value> set_of(bool frozen, const std::vector<Value>& args) {
  auto s = std::make_shared<Set>();
  s->frozen = frozen;
  if (args.empty()) return Value(std::move(s));
  if (args.size() != 1 || !is_sequence(args[0])) return std::nullopt;
  KeyIndex index;
  for (const Value& x : args[0].items())
    if (!set_add(s->items, index, x)) return std::nullopt;
  return Value(std::move(s));
}

std::optional<Value> build_bytes(const std::vector<Value>& args) {
  if (args.empty()) return Value::bytes("");
  if (args.size() != 1 || !is_sequence(args[0])) return std::nullopt;
  std::string out;
  out.reserve(args[0].items().size());
  for (const Value& x : args[0].items()) {
    if (!x.is(Value::Kind::kInt) || x.as_int() < 0 || x.as_int() > 255) return std::nullopt;
    out += static_cast<char>(x.as_int());
  }
  return Value::bytes(std::move(out));
}

std::optional<Value> build_bytearray(const std::vector<Value>& args) {
  if (args.empty()) return Value::bytes("", true);
  if (args.size() == 1 && args[0].is(Value::Kind::kBytes) && !args[0].is_bytearray())
    return Value::bytes(std::string(args[0].as_bytes()), true);
  if (args.size() == 2 && args[0].is(Value::Kind::kStr) && is_latin1_name(args[1])) {
    auto b = util::latin1_encode(args[0].as_str());
    if (!b) return std::nullopt;
    return Value::bytes(std::move(*b), true);
  }
  return std::nullopt;
}

std::optional<Value> build_complex(const std::vector<Value>& args) {
  auto c = complex_from_args(args);
  if (!c) return std::nullopt;
  return Value(*c);
}

std::optional<Value> build_dict(const std::vector<Value>& args) { return mapping(DictKind::kDict, args); }
std::optional<Value> build_frozenset(const std::vector<Value>& args) { return set_of(true, args); }
std::optional<Value> build_set(const std::vector<Value>& args) { return set_of(false, args); }
std::optional<Value> build_ordered_dict(const std::vector<Value>& args) {
  return mapping(DictKind::kOrderedDict, args);
}
std::optional<Value> build_counter(const std::vector<Value>& args) { return mapping(DictKind::kCounter, args); }

// getattr(m.a, 'b') is how protocol < 4 pickles (and the canonical writer) spell the
// nested name m.'a.b' that protocol 4 writes as one global. Exactly the inverse of the
// writer's split at the last dot, so "a." <-> (a, '').
std::optional<Value> build_getattr(const std::vector<Value>& args) {
  if (args.size() != 2 || !args[0].is(Value::Kind::kGlobal) || !args[1].is(Value::Kind::kStr)) return std::nullopt;
  const std::string_view attr = args[1].as_str();
  if (attr.find('.') != std::string_view::npos) return std::nullopt;
  const Global& parent = args[0].as_global();
  return Value::global(parent.module, parent.name + "." + std::string(attr));
}

// _codecs.encode(obj, encoding='utf-8'): strings hold UTF-8, and a lone surrogate
// (ED A0..BF ..) would make Python raise.
std::optional<Value> build_encode(const std::vector<Value>& args) {
  if (args.empty() || args.size() > 2 || !args[0].is(Value::Kind::kStr)) return std::nullopt;
  const std::string_view text = args[0].as_str();
  if (args.size() == 1 || is_utf8_name(args[1])) {
    for (std::size_t i = 0; i + 1 < text.size(); ++i)
      if (static_cast<unsigned char>(text[i]) == 0xED && static_cast<unsigned char>(text[i + 1]) >= 0xA0)
        return std::nullopt;
    return Value::bytes(std::string(text));
  }
  if (!is_latin1_name(args[1])) return std::nullopt;
  auto b = util::latin1_encode(text);
  if (!b) return std::nullopt;
  return Value::bytes(std::move(*b));
}

constexpr StdlibCall kCalls[] = {
    {"_codecs", "encode", build_encode},       {"builtins", "bytearray", build_bytearray},
    {"builtins", "bytes", build_bytes},        {"builtins", "complex", build_complex, true},
    {"builtins", "dict", build_dict},          {"builtins", "frozenset", build_frozenset},
    {"builtins", "getattr", build_getattr},    {"builtins", "set", build_set},
    {"collections", "Counter", build_counter}, {"collections", "OrderedDict", build_ordered_dict},
};

constexpr bool sorted_rows() {
  for (std::size_t i = 1; i < std::size(kCalls); ++i)
    if (!(std::pair{kCalls[i - 1].module, kCalls[i - 1].name} < std::pair{kCalls[i].module, kCalls[i].name}))
      return false;
  return true;
}
static_assert(sorted_rows(), "kCalls must stay sorted by (module, name)");

}  // namespace

std::span<const StdlibCall> stdlib_calls() { return kCalls; }

const StdlibCall* find_stdlib_call(std::string_view module, std::string_view name) {
  const auto key = std::pair{module, name};
  auto it = std::lower_bound(std::begin(kCalls), std::end(kCalls), key,
                             [](const StdlibCall& c, const std::pair<std::string_view, std::string_view>& k) {
                               return std::pair{c.module, c.name} < k;
                             });
  return it != std::end(kCalls) && it->module == module && it->name == name ? &*it : nullptr;
}

std::optional<Value> stdlib_reduce(const Object& obj) {
  if (!obj.callable || !obj.args || !obj.callable->is(Value::Kind::kGlobal) || !obj.args->is(Value::Kind::kTuple))
    return std::nullopt;
  if (obj.kwargs || obj.state || !obj.list_items.empty() || !obj.dict_items.empty()) return std::nullopt;
  const Global& g = obj.callable->as_global();
  const StdlibCall* call = find_stdlib_call(g.module, g.name);
  if (!call) return std::nullopt;
  if (obj.how != Construct::kReduce && !(obj.how == Construct::kNewObj && call->newobj)) return std::nullopt;
  return call->build(obj.args->items());
}

std::optional<Complex> complex_from_args(const std::vector<Value>& args) {
  if (args.size() > 2) return std::nullopt;
  double parts[2] = {0.0, 0.0};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Value& a = args[i];
    if (a.is(Value::Kind::kFloat))
      parts[i] = a.as_float();
    else if (a.is(Value::Kind::kInt))
      parts[i] = static_cast<double>(a.as_int());  // round-to-nearest, as float(int)
    else if (a.is(Value::Kind::kBool))
      parts[i] = a.as_bool() ? 1.0 : 0.0;
    else
      return std::nullopt;
  }
  return Complex{parts[0], parts[1]};
}

}  // namespace tensorseal::detail::pickle
