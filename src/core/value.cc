#include "tensorseal/value.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/python_key.h"
#include "core/walk.h"
#include "tensorseal/error.h"
#include "util/hex.h"

namespace tensorseal {

// ---- BigInt ---------------------------------------------------------------------

std::string BigInt::to_decimal() const {
  // Magnitude as little-endian base-256 digits, then repeated division by 10.
  std::vector<std::uint8_t> mag(le_bytes.begin(), le_bytes.end());
  bool negative = !mag.empty() && (mag.back() & 0x80);
  if (negative) {  // two's complement negate
    unsigned carry = 1;
    for (auto& b : mag) {
      unsigned v = static_cast<std::uint8_t>(~b) + carry;
      b = static_cast<std::uint8_t>(v);
      carry = v >> 8;
    }
  }
  std::string digits;
  while (!mag.empty()) {
    unsigned rem = 0;
    for (std::size_t i = mag.size(); i-- > 0;) {
      unsigned cur = (rem << 8) | mag[i];
      mag[i] = static_cast<std::uint8_t>(cur / 10);
      rem = cur % 10;
    }
    digits.push_back(static_cast<char>('0' + rem));
    while (!mag.empty() && mag.back() == 0) mag.pop_back();
  }
  if (digits.empty()) digits = "0";
  if (negative) digits.push_back('-');
  return {digits.rbegin(), digits.rend()};
}

// ---- Value construction and access ----------------------------------------------

Value::Value(BigInt b) {
  // Normalise: anything that fits in int64 is a plain int.
  const std::string& s = b.le_bytes;
  if (s.size() <= 8) {
    std::uint64_t u = 0;
    for (std::size_t i = 0; i < s.size(); ++i) u |= std::uint64_t{static_cast<std::uint8_t>(s[i])} << (8 * i);
    if (!s.empty() && (static_cast<std::uint8_t>(s.back()) & 0x80) && s.size() < 8)
      u |= ~std::uint64_t{0} << (8 * s.size());  // sign-extend
    v_ = static_cast<std::int64_t>(u);
    return;
  }
  v_ = std::move(b);
}

Value Value::str(std::string s) {
  Value v;
  v.v_ = Str{std::make_shared<const std::string>(std::move(s))};
  return v;
}
Value Value::bytes(std::string b, bool bytearray) {
  Value v;
  v.v_ = Bytes{std::make_shared<const std::string>(std::move(b)), bytearray};
  return v;
}
Value Value::list(std::vector<Value> items) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  return l;
}
Value Value::tuple(std::vector<Value> items) {
  auto t = std::make_shared<Tuple>();
  t->items = std::move(items);
  return t;
}
Value Value::dict(DictKind kind) {
  auto d = std::make_shared<Dict>();
  d->kind = kind;
  return d;
}
Value Value::global(std::string module, std::string name) {
  return std::make_shared<Global>(Global{std::move(module), std::move(name)});
}

namespace {
[[noreturn]] void wrong_kind(Value::Kind have, std::string_view want) {
  throw Error(rules::kInternal, "value is " + std::string(kind_name(have)) + ", expected " + std::string(want));
}
template <typename T>
const T& get(const auto& v, Value::Kind have, std::string_view want) {
  if (auto p = std::get_if<T>(&v)) return *p;
  wrong_kind(have, want);
}
}  // namespace

bool Value::as_bool() const { return get<bool>(v_, kind(), "bool"); }
std::int64_t Value::as_int() const { return get<std::int64_t>(v_, kind(), "int"); }
const BigInt& Value::as_bigint() const { return get<BigInt>(v_, kind(), "bigint"); }
double Value::as_float() const { return get<double>(v_, kind(), "float"); }
Complex Value::as_complex() const { return get<Complex>(v_, kind(), "complex"); }
std::string_view Value::as_str() const { return *get<Str>(v_, kind(), "str").utf8; }
std::string_view Value::as_bytes() const { return *get<Bytes>(v_, kind(), "bytes").data; }
bool Value::is_bytearray() const { return get<Bytes>(v_, kind(), "bytes").bytearray; }
const List& Value::as_list() const { return *get<std::shared_ptr<List>>(v_, kind(), "list"); }
List& Value::as_list() { return *get<std::shared_ptr<List>>(v_, kind(), "list"); }
const Tuple& Value::as_tuple() const { return *get<std::shared_ptr<Tuple>>(v_, kind(), "tuple"); }
Tuple& Value::as_tuple() { return *get<std::shared_ptr<Tuple>>(v_, kind(), "tuple"); }
const Dict& Value::as_dict() const { return *get<std::shared_ptr<Dict>>(v_, kind(), "dict"); }
Dict& Value::as_dict() { return *get<std::shared_ptr<Dict>>(v_, kind(), "dict"); }
const Set& Value::as_set() const { return *get<std::shared_ptr<Set>>(v_, kind(), "set"); }
Set& Value::as_set() { return *get<std::shared_ptr<Set>>(v_, kind(), "set"); }
const std::shared_ptr<const Tensor>& Value::as_tensor() const {
  return get<std::shared_ptr<const Tensor>>(v_, kind(), "tensor");
}
const std::shared_ptr<const Storage>& Value::as_storage() const {
  return get<std::shared_ptr<const Storage>>(v_, kind(), "storage");
}
const Global& Value::as_global() const { return *get<std::shared_ptr<Global>>(v_, kind(), "global"); }
Global& Value::as_global() { return *get<std::shared_ptr<Global>>(v_, kind(), "global"); }
const Object& Value::as_object() const { return *get<std::shared_ptr<Object>>(v_, kind(), "object"); }
Object& Value::as_object() { return *get<std::shared_ptr<Object>>(v_, kind(), "object"); }
const Ref& Value::as_ref() const { return get<Ref>(v_, kind(), "ref"); }

Value Value::ref_to(const Value& target) {
  Ref r;
  r.node = target.node();
  switch (target.kind()) {
    case Kind::kList:
      r.target = std::weak_ptr<List>(std::get<std::shared_ptr<List>>(target.v_));
      break;
    case Kind::kTuple:
      r.target = std::weak_ptr<Tuple>(std::get<std::shared_ptr<Tuple>>(target.v_));
      break;
    case Kind::kDict:
      r.target = std::weak_ptr<Dict>(std::get<std::shared_ptr<Dict>>(target.v_));
      break;
    case Kind::kSet:
      r.target = std::weak_ptr<Set>(std::get<std::shared_ptr<Set>>(target.v_));
      break;
    case Kind::kObject:
      r.target = std::weak_ptr<Object>(std::get<std::shared_ptr<Object>>(target.v_));
      break;
    case Kind::kRef:
      return target;
    default:
      wrong_kind(target.kind(), "list, tuple, dict, set or object");
  }
  return Value(std::move(r));
}

Value Value::ref_target() const {
  return std::visit(
      [](const auto& w) -> Value {
        auto p = w.lock();
        if (!p) return Value();
        return Value(std::move(p));
      },
      as_ref().target);
}
const std::vector<Value>& Value::items() const {
  if (kind() == Kind::kList) return as_list().items;
  if (kind() == Kind::kTuple) return as_tuple().items;
  wrong_kind(kind(), "list or tuple");
}
std::vector<Value>& Value::items() {
  if (kind() == Kind::kList) return as_list().items;
  if (kind() == Kind::kTuple) return as_tuple().items;
  wrong_kind(kind(), "list or tuple");
}

const void* Value::node() const noexcept {
  return std::visit(
      [](const auto& x) -> const void* {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Str>)
          return x.utf8.get();
        else if constexpr (std::is_same_v<T, Bytes>)
          return x.data.get();
        else if constexpr (std::is_same_v<T, Ref>)
          return x.node;
        else if constexpr (requires { x.get(); })
          return x.get();
        else
          return nullptr;
      },
      v_);
}

bool Value::is_global(std::string_view module, std::string_view name) const noexcept {
  if (kind() != Kind::kGlobal) return false;
  const auto& g = *std::get<std::shared_ptr<Global>>(v_);
  return g.module == module && g.name == name;
}

std::string_view kind_name(Value::Kind k) noexcept {
  static constexpr std::string_view kNames[] = {"None",    "bool",   "int",    "int",     "float", "str",
                                                "bytes",   "list",   "tuple",  "dict",    "set",   "tensor",
                                                "storage", "global", "object", "complex", "ref"};
  return kNames[static_cast<std::size_t>(k)];
}

// ---- Dict -----------------------------------------------------------------------

// Index from python_key encodings to item positions. It covers items[0, covered)
// and grows on lookup, so items appended directly to `items` are found too.
struct Dict::Index {
  std::unordered_map<std::string, std::size_t> pos;
  std::size_t covered = 0;
};

Dict::Dict() = default;
Dict::Dict(const Dict& other) : kind(other.kind), items(other.items), attrs(other.attrs) {}
Dict::Dict(Dict&& other) noexcept : kind(other.kind), items(std::move(other.items)), attrs(std::move(other.attrs)) {}
Dict& Dict::operator=(const Dict& other) {
  if (this != &other) *this = Dict(other);
  return *this;
}
Dict& Dict::operator=(Dict&& other) noexcept {
  kind = other.kind;
  items = std::move(other.items);
  attrs = std::move(other.attrs);
  index_.reset();
  return *this;
}
Dict::~Dict() = default;

void Dict::set(Value key, Value value) {
  if (const Value* existing = find(key)) {
    *const_cast<Value*>(existing) = std::move(value);
    return;
  }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* Dict::find(const Value& key) const {
  std::string enc;
  if (detail::core::python_key(key, enc)) return find_hashable(enc);
  for (const auto& [k, v] : items)
    if (equal(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view str_key) const { return find(Value::str(std::string(str_key))); }

const Value* Dict::find_hashable(const std::string& enc) const {
  std::lock_guard<std::mutex> lock(index_mutex_);
  if (!index_ || index_->covered > items.size()) index_ = std::make_unique<Index>();
  std::string e;
  for (; index_->covered < items.size(); ++index_->covered) {
    e.clear();
    if (detail::core::python_key(items[index_->covered].first, e)) index_->pos.emplace(std::move(e), index_->covered);
  }
  auto it = index_->pos.find(enc);
  if (it == index_->pos.end() || it->second >= items.size()) return nullptr;
  return &items[it->second].second;
}

// ---- equality -------------------------------------------------------------------

namespace {

// Structural equality over graphs that may hold Refs. A pair of nodes reached through
// a Ref while the same pair is already being compared is taken as equal: the
// comparison of the enclosing pair decides (coinduction), so recursion always ends.
class Equal {
 public:
  bool operator()(const Value& a0, const Value& b0) {
    using K = Value::Kind;
    const bool ref = a0.is(K::kRef) || b0.is(K::kRef);
    const Value a = a0.is(K::kRef) ? a0.ref_target() : a0;
    const Value b = b0.is(K::kRef) ? b0.ref_target() : b0;
    if (a.kind() != b.kind()) return false;
    if (a.node() != nullptr && a.node() == b.node()) return true;
    if (!ref) return compare(a, b);
    const std::pair<const void*, const void*> key{a.node(), b.node()};
    if (!active_.insert(key).second) return true;
    const bool r = compare(a, b);
    active_.erase(key);
    return r;
  }

 private:
  bool seq(const std::vector<Value>& a, const std::vector<Value>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!(*this)(a[i], b[i])) return false;
    return true;
  }
  bool ptr(const std::shared_ptr<Value>& a, const std::shared_ptr<Value>& b) {
    if (!a || !b) return !a && !b;
    return (*this)(*a, *b);
  }
  bool items(const std::vector<std::pair<Value, Value>>& a, const std::vector<std::pair<Value, Value>>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!(*this)(a[i].first, b[i].first) || !(*this)(a[i].second, b[i].second)) return false;
    return true;
  }
  bool compare(const Value& a, const Value& b) {
    using K = Value::Kind;
    switch (a.kind()) {
      case K::kNone:
        return true;
      case K::kBool:
        return a.as_bool() == b.as_bool();
      case K::kInt:
        return a.as_int() == b.as_int();
      case K::kBigInt:
        return a.as_bigint().le_bytes == b.as_bigint().le_bytes;
      case K::kFloat: {
        double x = a.as_float(), y = b.as_float();
        return std::memcmp(&x, &y, sizeof x) == 0;
      }
      case K::kStr:
        return a.as_str() == b.as_str();
      case K::kBytes:
        return a.as_bytes() == b.as_bytes() && a.is_bytearray() == b.is_bytearray();
      case K::kList:
      case K::kTuple:
        return seq(a.items(), b.items());
      case K::kDict: {
        const Dict& x = a.as_dict();
        const Dict& y = b.as_dict();
        if (x.kind != y.kind || !items(x.items, y.items)) return false;
        if (!x.attrs || !y.attrs) return !x.attrs && !y.attrs;
        return items(x.attrs->items, y.attrs->items);
      }
      case K::kSet:
        return a.as_set().frozen == b.as_set().frozen && seq(a.as_set().items, b.as_set().items);
      case K::kComplex: {
        const Complex x = a.as_complex(), y = b.as_complex();
        return std::memcmp(&x.real, &y.real, sizeof x.real) == 0 && std::memcmp(&x.imag, &y.imag, sizeof x.imag) == 0;
      }
      case K::kTensor:
      case K::kStorage:
        return false;  // same node handled above
      case K::kGlobal:
        return a.as_global().module == b.as_global().module && a.as_global().name == b.as_global().name;
      case K::kObject: {
        const Object& x = a.as_object();
        const Object& y = b.as_object();
        return x.how == y.how && ptr(x.callable, y.callable) && ptr(x.args, y.args) && ptr(x.kwargs, y.kwargs) &&
               ptr(x.state, y.state) && seq(x.list_items, y.list_items) && items(x.dict_items, y.dict_items);
      }
      case K::kRef:
        return false;  // resolved by operator(); an expired target equals nothing
    }
    return false;
  }
  std::set<std::pair<const void*, const void*>> active_;
};

}  // namespace

bool equal(const Value& a, const Value& b) { return Equal()(a, b); }

// ---- tensor collection ----------------------------------------------------------

namespace {

// Each node once (the first path wins), so tied tensors are listed once.
class TensorCollector : public detail::core::Visitor {
 public:
  bool enter(const Value& v, const std::string& path) override {
    const void* node = v.node();
    if (node != nullptr && !v.is(Value::Kind::kStr) && !v.is(Value::Kind::kBytes) && !seen_.insert(node).second)
      return false;
    if (v.is(Value::Kind::kTensor)) out.push_back({path, v.as_tensor()});
    return true;
  }
  std::vector<TensorRef> out;

 private:
  std::unordered_set<const void*> seen_;
};

}  // namespace

std::vector<TensorRef> collect_tensors(const Value& root) {
  TensorCollector c;
  detail::core::walk(root, c);
  return std::move(c.out);
}

// ---- repr -----------------------------------------------------------------------

namespace {

void repr_into(const Value& v, std::string& out, std::size_t max_len, int depth);

void repr_double(double d, std::string& out) {
  if (std::isnan(d))
    out += "nan";
  else if (std::isinf(d))
    out += d > 0 ? "inf" : "-inf";
  else {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    out += buf;
  }
}

void repr_seq(const std::vector<Value>& items, std::string& out, std::size_t max_len, int depth, char open,
              char close) {
  out += open;
  for (std::size_t i = 0; i < items.size() && out.size() < max_len; ++i) {
    if (i) out += ", ";
    repr_into(items[i], out, max_len, depth + 1);
  }
  out += close;
}

void repr_quoted(std::string_view s, std::string& out, std::size_t max_len) {
  out += '\'';
  for (char c : s) {
    if (out.size() >= max_len) break;
    auto u = static_cast<unsigned char>(c);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      detail::util::append_hex(out, u);
    } else
      out += c;
  }
  out += '\'';
}

void repr_into(const Value& v, std::string& out, std::size_t max_len, int depth) {
  using K = Value::Kind;
  if (out.size() >= max_len) return;
  if (depth > 20) {
    out += "...";
    return;
  }
  switch (v.kind()) {
    case K::kNone:
      out += "None";
      return;
    case K::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case K::kInt:
      out += std::to_string(v.as_int());
      return;
    case K::kBigInt:
      out += v.as_bigint().to_decimal();
      return;
    case K::kFloat:
      repr_double(v.as_float(), out);
      return;
    case K::kComplex: {
      // Python's repr: (1+2j), (1-0j), (nan+infj); a zero real part with a +0.0 sign: 2j.
      const Complex c = v.as_complex();
      const bool bare = c.real == 0.0 && !std::signbit(c.real);
      if (!bare) {
        out += '(';
        repr_double(c.real, out);
        out += std::signbit(c.imag) && !std::isnan(c.imag) ? '-' : '+';
        repr_double(std::fabs(c.imag), out);
      } else {
        repr_double(c.imag, out);
      }
      out += 'j';
      if (!bare) out += ')';
      return;
    }
    case K::kStr:
      repr_quoted(v.as_str(), out, max_len);
      return;
    case K::kBytes:
      out += v.is_bytearray() ? "bytearray(b" : "b";
      repr_quoted(v.as_bytes(), out, max_len);
      if (v.is_bytearray()) out += ")";
      return;
    case K::kList:
      repr_seq(v.items(), out, max_len, depth, '[', ']');
      return;
    case K::kTuple:
      repr_seq(v.items(), out, max_len, depth, '(', ')');
      return;
    case K::kRef: {  // Python's reprlib spelling of a recursive reference
      const Value t = v.ref_target();
      out += t.is(K::kList) ? "[...]" : t.is(K::kDict) ? "{...}" : t.is(K::kTuple) ? "(...)" : "<...>";
      return;
    }
    case K::kSet:
      out += v.as_set().frozen ? "frozenset(" : "set(";
      repr_seq(v.as_set().items, out, max_len, depth, '{', '}');
      out += ")";
      return;
    case K::kDict: {
      const Dict& d = v.as_dict();
      if (d.kind == DictKind::kOrderedDict) out += "OrderedDict(";
      if (d.kind == DictKind::kCounter) out += "Counter(";
      out += '{';
      for (std::size_t i = 0; i < d.items.size() && out.size() < max_len; ++i) {
        if (i) out += ", ";
        repr_into(d.items[i].first, out, max_len, depth + 1);
        out += ": ";
        repr_into(d.items[i].second, out, max_len, depth + 1);
      }
      out += '}';
      if (d.kind != DictKind::kDict) out += ')';
      return;
    }
    case K::kTensor: {
      const auto& t = *v.as_tensor();
      out += "tensor(";
      out += name(t.dtype);
      out += ", ";
      out += shape_text(t.shape);
      out += ")";
      return;
    }
    case K::kStorage:
      out += fmt::format("storage({} bytes)", v.as_storage()->size());
      return;
    case K::kGlobal:
      out += v.as_global().module + "." + v.as_global().name;
      return;
    case K::kObject: {
      const Object& o = v.as_object();
      if (o.callable) repr_into(*o.callable, out, max_len, depth + 1);
      if (o.args && (o.args->kind() == K::kTuple))
        repr_seq(o.args->items(), out, max_len, depth, '(', ')');
      else
        out += "(...)";
      return;
    }
  }
}

}  // namespace

bool reaches_data(const Value& v) {
  struct Finder : detail::core::Visitor {
    bool found = false;
    std::unordered_set<const void*> seen;  // shared nodes once; a cycle ends
    bool enter(const Value& x, const std::string&) override {
      if (x.is(Value::Kind::kTensor) || x.is(Value::Kind::kStorage)) found = true;
      if (const void* n = x.node(); n != nullptr && !seen.insert(n).second) return false;
      return !found;
    }
  } f;
  detail::core::walk(v, f, detail::core::Reach::kEverything);
  return f.found;
}

std::string repr(const Value& v, std::size_t max_len) {
  std::string out;
  repr_into(v, out, max_len, 0);
  if (out.size() > max_len) {
    out.resize(max_len);
    out += "...";
  }
  return out;
}

}  // namespace tensorseal
