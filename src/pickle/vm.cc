// The restricted pickle VM. Grammar (docs/formats/pickle.md):
//
//   stream  = [PROTO u8] op* STOP
//   op      = one opcode byte + inline argument (opcodes.h: kOpTable[byte].arg)
//   machine = stack of values, metastack of MARK positions (the "fence": opcodes see
//             only the values above the innermost MARK), memo: index -> value
//
// Nothing is executed: GLOBAL/STACK_GLOBAL/INST name a Global, REDUCE/NEWOBJ/
// NEWOBJ_EX/INST/OBJ build Objects, BUILD records state, APPEND(S)/SETITEM(S) on an
// Object are recorded in it. Every opcode of protocols 0-5 is parsed.
//
// Safety of the result. Each stack/memo slot carries, for containers, a shared Info:
// height (1 + the tallest child), weight (bytes of the tree expanded without sharing)
// and `placed` (the node is inside another node). Building a container adopts its
// children: their weight is charged to Limits::max_alloc (so a memo bomb that places
// one big value many times is bounded) and the height is checked against
// Limits::max_depth. A placed node is frozen: any later APPEND/SETITEM/ADDITEMS/BUILD
// on it is refused (pickle/late-mutation). CPython's pickler always finishes a value
// before placing it, so only recursive structures hit this rule; in exchange the
// recorded heights and weights stay exact, and cycles cannot form.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "pickle/compat.h"
#include "pickle/constants.h"
#include "pickle/longs.h"
#include "pickle/opcodes.h"
#include "pickle/vm.h"
#include "util/checked.h"
#include "util/endian.h"
#include "util/utf8.h"

namespace tensorseal::detail::pickle {

namespace {

// ---- hashing keys as Python would --------------------------------------------------

// Appends an encoding of `v` such that two hashable values get the same encoding iff
// Python's dict would treat them as the same key (True == 1 == 1.0, -0.0 == 0, tuples
// elementwise, frozensets as sets, objects and tensors by identity, NaN never equal).
// Returns false for unhashable values (list, dict, set, bytearray).
bool key_encoding(const Value& v, std::string& out, std::uint64_t& nan_counter) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::kNone: out += 'N'; return true;
    case K::kBool: out += v.as_bool() ? "i1" : "i0"; return true;
    case K::kInt: out += 'i'; out += std::to_string(v.as_int()); return true;
    case K::kBigInt: out += 'I'; out += v.as_bigint().le_bytes; return true;
    case K::kFloat: {
      double d = v.as_float();
      if (d != d) { out += 'n'; out += std::to_string(nan_counter++); return true; }
      if (d >= -9.2e18 && d <= 9.2e18 && d == static_cast<double>(static_cast<std::int64_t>(d))) {
        out += 'i';
        out += std::to_string(static_cast<std::int64_t>(d));
        return true;
      }
      std::uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      out += 'f';
      out += std::to_string(bits);
      return true;
    }
    case K::kStr: out += 's'; out += v.as_str(); return true;
    case K::kBytes:
      if (v.is_bytearray()) return false;
      out += 'b';
      out += v.as_bytes();
      return true;
    case K::kTuple: {
      out += 't';
      out += std::to_string(v.items().size());
      std::string item;
      for (const Value& x : v.items()) {
        item.clear();
        if (!key_encoding(x, item, nan_counter)) return false;
        out += ':';
        out += std::to_string(item.size());
        out += ':';
        out += item;
      }
      return true;
    }
    case K::kSet: {
      if (!v.as_set().frozen) return false;
      std::vector<std::string> parts;
      for (const Value& x : v.as_set().items) {
        parts.emplace_back();
        if (!key_encoding(x, parts.back(), nan_counter)) return false;
      }
      std::sort(parts.begin(), parts.end());
      out += 'z';
      out += std::to_string(parts.size());
      for (const auto& p : parts) { out += ':'; out += std::to_string(p.size()); out += ':'; out += p; }
      return true;
    }
    case K::kGlobal:
      out += 'g';
      out += v.as_global().module;
      out += '\0';
      out += v.as_global().name;
      return true;
    case K::kObject: case K::kTensor: case K::kStorage: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "o%p", v.node());
      out += buf;
      return true;
    }
    case K::kList: case K::kDict: return false;
  }
  return false;
}

using KeyIndex = std::unordered_map<std::string, std::size_t>;

// Inserts into a (key, value) vector with Python dict semantics using `index`.
// Returns false when the key is unhashable.
bool dict_set(std::vector<std::pair<Value, Value>>& items, KeyIndex& index, Value key, Value value,
              std::uint64_t& nan_counter) {
  std::string enc;
  if (!key_encoding(key, enc, nan_counter)) return false;
  auto [it, inserted] = index.try_emplace(std::move(enc), items.size());
  if (inserted) items.emplace_back(std::move(key), std::move(value));
  else items[it->second].second = std::move(value);  // Python keeps the first key object
  return true;
}

bool set_add(std::vector<Value>& items, KeyIndex& index, Value item, std::uint64_t& nan_counter) {
  std::string enc;
  if (!key_encoding(item, enc, nan_counter)) return false;
  if (index.try_emplace(std::move(enc), items.size()).second) items.push_back(std::move(item));
  return true;
}

KeyIndex index_of(const std::vector<std::pair<Value, Value>>& items, std::uint64_t& nan_counter) {
  KeyIndex index;
  std::string enc;
  for (std::size_t i = 0; i < items.size(); ++i) {
    enc.clear();
    if (key_encoding(items[i].first, enc, nan_counter)) index.emplace(enc, i);
  }
  return index;
}

KeyIndex index_of(const std::vector<Value>& items, std::uint64_t& nan_counter) {
  KeyIndex index;
  std::string enc;
  for (std::size_t i = 0; i < items.size(); ++i) {
    enc.clear();
    if (key_encoding(items[i], enc, nan_counter)) index.emplace(enc, i);
  }
  return index;
}

// ---- text arguments ---------------------------------------------------------------

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) out += static_cast<char>(cp);
  else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes a UTF-8 string into code points (input already validated).
std::vector<std::uint32_t> code_points(std::string_view s) {
  std::vector<std::uint32_t> cps;
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    std::uint32_t cp;
    int len;
    if (c < 0x80) { cp = c; len = 1; }
    else if (c < 0xE0) { cp = c & 0x1F; len = 2; }
    else if (c < 0xF0) { cp = c & 0x0F; len = 3; }
    else { cp = c & 0x07; len = 4; }
    for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    cps.push_back(cp);
    i += len;
  }
  return cps;
}

// str -> bytes with the latin-1 codec; nullopt when a code point is above U+00FF.
std::optional<std::string> latin1_encode(std::string_view utf8) {
  std::string out;
  for (std::uint32_t cp : code_points(utf8)) {
    if (cp > 0xFF) return std::nullopt;
    out += static_cast<char>(cp);
  }
  return out;
}

// Holds a container slot's bookkeeping (see the file comment).
struct Info {
  std::uint32_t height = 1;
  bool placed = false;
  std::uint64_t weight = kNodeCost;
  std::unique_ptr<KeyIndex> keys;  // dict keys / set items, built on first insert
};

struct Slot {
  Value v;
  std::shared_ptr<Info> info;  // null for leaves (height 0)
};

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) {
  auto r = util::add(a, b);
  return r ? *r : ~std::uint64_t{0};
}

class Vm {
 public:
  Vm(std::span<const std::byte> data, const std::string& name, std::uint64_t base, const Limits& limits,
     const Hooks& hooks)
      : p_(reinterpret_cast<const std::uint8_t*>(data.data())),
        full_(data.size()),
        n_(std::min<std::uint64_t>(data.size(), limits.max_pickle_bytes)),
        name_(name),
        base_(base),
        lim_(limits),
        hooks_(hooks) {}

  Parsed run();

 private:
  // ---- errors ----
  [[noreturn]] void fail(const Rule& rule, const std::string& detail) const {
    throw Error(rule, detail + " (protocol " + std::to_string(proto_) + ")", name_, base_ + op_pos_);
  }
  std::string opname() const { return std::string(op_name(op_)); }

  // ---- input ----
  const std::uint8_t* need(std::uint64_t k) {
    if (k > full_ - pos_) {
      fail(rules::kTruncated, opname() + " needs " + std::to_string(k) + " bytes at offset " +
                                  std::to_string(base_ + pos_) + ", only " + std::to_string(full_ - pos_) +
                                  " remain");
    }
    if (k > n_ - pos_)
      fail(rules::kMaxBytes, opname() + " reads past the max_pickle_bytes limit of " +
                                 std::to_string(lim_.max_pickle_bytes) + " bytes");
    const std::uint8_t* r = p_ + pos_;
    pos_ += k;
    return r;
  }
  std::uint8_t u8() { return *need(1); }
  std::uint16_t u16() { return util::load_le<std::uint16_t>(reinterpret_cast<const std::byte*>(need(2))); }
  std::uint32_t u32() { return util::load_le<std::uint32_t>(reinterpret_cast<const std::byte*>(need(4))); }
  std::int32_t i32() { return util::load_le<std::int32_t>(reinterpret_cast<const std::byte*>(need(4))); }
  std::uint64_t u64() { return util::load_le<std::uint64_t>(reinterpret_cast<const std::byte*>(need(8))); }
  std::string_view bytes(std::uint64_t k) { return {reinterpret_cast<const char*>(need(k)), static_cast<std::size_t>(k)}; }

  // A text argument: bytes up to '\n' (excluded); the newline is consumed.
  std::string_view line() {
    std::uint64_t avail = n_ - pos_;
    std::uint64_t scan = std::min<std::uint64_t>(avail, sat_add(lim_.max_string, 1));
    const void* nl = scan ? std::memchr(p_ + pos_, '\n', scan) : nullptr;
    if (!nl) {
      if (scan < avail || (scan == avail && lim_.max_string < avail))
        fail(rules::kMaxString, opname() + " text argument is longer than max_string (" +
                                    std::to_string(lim_.max_string) + " bytes)");
      if (n_ < full_)
        fail(rules::kMaxBytes, opname() + " reads past the max_pickle_bytes limit of " +
                                   std::to_string(lim_.max_pickle_bytes) + " bytes");
      fail(rules::kTruncated, opname() + " text argument has no terminating newline");
    }
    auto len = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nl) - (p_ + pos_));
    std::string_view r(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len + 1;
    return r;
  }

  // ---- accounting ----
  void charge(std::uint64_t bytes) {
    alloc_ = sat_add(alloc_, bytes);
    if (alloc_ > lim_.max_alloc)
      fail(rules::kMaxAlloc, "values built so far exceed max_alloc (" + std::to_string(lim_.max_alloc) +
                                 " bytes; repeated references count each time)");
  }
  void check_string(std::uint64_t len) {
    if (len > lim_.max_string)
      fail(rules::kMaxString, opname() + " value of " + std::to_string(len) + " bytes exceeds max_string (" +
                                  std::to_string(lim_.max_string) + ")");
  }
  static std::uint64_t weight(const Slot& s) {
    if (s.info) return s.info->weight;
    switch (s.v.kind()) {
      case Value::Kind::kStr: return kSlotCost + s.v.as_str().size();
      case Value::Kind::kBytes: return kSlotCost + s.v.as_bytes().size();
      case Value::Kind::kBigInt: return kSlotCost + s.v.as_bigint().le_bytes.size();
      default: return kSlotCost;
    }
  }
  static std::uint32_t height(const Slot& s) { return s.info ? s.info->height : 0; }

  std::shared_ptr<Info> new_node() {
    charge(kNodeCost);
    return std::make_shared<Info>();
  }
  // `child` becomes part of the node described by `parent`.
  void adopt(Info& parent, const Slot& child) {
    if (child.info) child.info->placed = true;
    std::uint64_t w = weight(child);
    charge(w);
    parent.weight = sat_add(parent.weight, w);
    std::uint32_t h = height(child) + 1;
    if (h > parent.height) {
      if (h > lim_.max_depth)
        fail(rules::kMaxDepth, opname() + " nests values " + std::to_string(h) + " deep, over max_depth (" +
                                   std::to_string(lim_.max_depth) + ")");
      parent.height = h;
    }
  }
  // Before mutating an existing node: refuse when it is already inside another node.
  void check_mutable(const Slot& target, std::string_view what) {
    if (!target.info) fail(tensorseal::rules::kInternal, "container without bookkeeping");
    if (target.info->placed)
      fail(rules::kLateMutation, opname() + " changes a " + std::string(what) +
                                     " that is already inside another value (recursive structure or "
                                     "out-of-order mutation; not supported)");
  }

  // ---- stack ----
  std::size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Slot s) {
    if (stack_.size() + marks_.size() >= lim_.max_stack)
      fail(rules::kMaxStack, "stack holds " + std::to_string(stack_.size() + marks_.size()) +
                                 " entries, the max_stack limit");
    stack_.push_back(std::move(s));
  }
  void push_leaf(Value v) { push(Slot{std::move(v), nullptr}); }
  void need_stack(std::size_t k) {
    if (stack_.size() - fence() < k)
      fail(rules::kStackUnderflow, opname() + " needs " + std::to_string(k) + " value" + (k == 1 ? "" : "s") +
                                       " above the mark, found " + std::to_string(stack_.size() - fence()));
  }
  Slot pop() {
    need_stack(1);
    Slot s = std::move(stack_.back());
    stack_.pop_back();
    return s;
  }
  Slot& top() {
    need_stack(1);
    return stack_.back();
  }
  std::vector<Slot> pop_mark() {
    if (marks_.empty()) fail(rules::kMarkMissing, opname() + " needs a MARK, none is open");
    std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Slot> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(m)),
                            std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }

  // ---- value builders ----
  Slot make_tuple(std::vector<Slot> items) {
    auto info = new_node();
    auto t = std::make_shared<Tuple>();
    t->items.reserve(items.size());
    for (auto& s : items) {
      adopt(*info, s);
      t->items.push_back(std::move(s.v));
    }
    return Slot{Value(std::move(t)), std::move(info)};
  }
  Slot make_str(std::string_view utf8) {
    check_string(utf8.size());
    if (auto bad = util::first_invalid_utf8(utf8)) {
      std::size_t i = *bad;
      if (i + 1 < utf8.size() && static_cast<unsigned char>(utf8[i]) == 0xED &&
          static_cast<unsigned char>(utf8[i + 1]) >= 0xA0)
        fail(rules::kSurrogate, opname() + " str holds a UTF-16 surrogate at byte " + std::to_string(i) +
                                    " (CPython's surrogatepass; not representable)");
      fail(rules::kBadUtf8, opname() + " str is not valid UTF-8 at byte " + std::to_string(i));
    }
    charge(kSlotCost + utf8.size());
    return Slot{Value::str(std::string(utf8)), nullptr};
  }
  Slot make_bytes(std::string_view data, bool bytearray) {
    check_string(data.size());
    charge(kSlotCost + data.size());
    return Slot{Value::bytes(std::string(data), bytearray), nullptr};
  }
  // Python 2 str (STRING/BINSTRING/SHORT_BINSTRING) -> str, decoded as UTF-8 the way
  // torch.load(encoding='utf-8') does.
  Slot make_py2_str(std::string_view raw) {
    check_string(raw.size());
    if (auto bad = util::first_invalid_utf8(raw))
      fail(rules::kPy2StringEncoding,
           opname() + " Python 2 str is not UTF-8 at byte " + std::to_string(*bad) +
               " (decoded as UTF-8 like torch.load's default encoding='utf-8')");
    charge(kSlotCost + raw.size());
    return Slot{Value::str(std::string(raw)), nullptr};
  }
  Value make_global(std::string_view module, std::string_view name) {
    std::string m(module), n(name);
    if (proto_ < 3) std::tie(m, n) = py2_to_py3_name(module, name);
    out_.globals.push_back(GlobalRef{m, n, name_ + " @ " + std::to_string(base_ + op_pos_)});
    return Value::global(std::move(m), std::move(n));
  }
  std::string_view check_utf8_name(std::string_view s, std::string_view what) {
    if (auto bad = util::first_invalid_utf8(s))
      fail(rules::kBadUtf8, opname() + " " + std::string(what) + " is not valid UTF-8 at byte " + std::to_string(*bad));
    return s;
  }

  // Builds the Object for REDUCE & co, then lets the reduce hook replace it.
  void push_object(Construct how, Slot callable, Slot args, Slot kwargs) {
    auto info = new_node();
    auto obj = std::make_shared<Object>();
    obj->how = how;
    adopt(*info, callable);
    adopt(*info, args);
    obj->callable = std::make_shared<Value>(callable.v);
    obj->args = std::make_shared<Value>(args.v);
    if (kwargs.info) {
      adopt(*info, kwargs);
      obj->kwargs = std::make_shared<Value>(kwargs.v);
    }
    if (hooks_.reduce) {
      if (auto replaced = hooks_.reduce(*obj, base_ + op_pos_)) {
        // The replacement's height and weight are bounded by the Object's. When it is
        // one of the arguments themselves, that node is already inside the args tuple:
        // keep it frozen. (Hooks return new nodes, leaves, or top-level arguments.)
        const void* node = replaced->node();
        bool alias = node != nullptr && node == callable.v.node();
        if (node != nullptr)
          for (const Value& a : args.v.items()) alias = alias || a.node() == node;
        if (alias) {
          auto shared = std::make_shared<Info>();
          shared->height = info->height;
          shared->weight = info->weight;
          shared->placed = true;
          info = std::move(shared);
        }
        push(Slot{std::move(*replaced), std::move(info)});
        return;
      }
    }
    push(Slot{Value(std::move(obj)), std::move(info)});
  }

  Slot persistent(Slot pid) {
    if (!hooks_.persistent_load)
      fail(rules::kPersistentId, opname() + " references persistent id " + repr(pid.v, 80) +
                                     " but no persistent_load is set");
    auto info = new_node();
    adopt(*info, pid);  // the result may contain the id: bound height and weight by it
    Value v = hooks_.persistent_load(pid.v, base_ + op_pos_);
    return Slot{std::move(v), std::move(info)};
  }

  // ---- numbers ----
  // Decimal integer text: -?(0|[1-9][0-9]*). Leading zeros are refused because
  // CPython's two unpicklers disagree on them (C: octal via strtol; Python: error).
  Value parse_decimal(std::string_view s) {
    bool neg = false;
    std::string_view d = s;
    if (!d.empty() && d[0] == '-') { neg = true; d.remove_prefix(1); }
    bool ok = !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
              (d.size() == 1 || d[0] != '0');
    if (!ok) fail(rules::kBadNumberText, opname() + " argument '" + std::string(s.substr(0, 40)) + "' is not a decimal integer");
    if (d.size() > kMaxIntDigits)
      fail(rules::kLongTooLarge, opname() + " integer has " + std::to_string(d.size()) + " digits, over " +
                                     std::to_string(kMaxIntDigits));
    if (d.size() <= 18) {
      std::int64_t v = 0;
      for (char c : d) v = v * 10 + (c - '0');
      return Value(neg ? -v : v);
    }
    // Magnitude in base 256, little-endian, then two's complement.
    std::vector<std::uint8_t> mag;
    for (char c : d) {
      unsigned carry = static_cast<unsigned>(c - '0');
      for (auto& b : mag) {
        unsigned x = b * 10u + carry;
        b = static_cast<std::uint8_t>(x & 0xFF);
        carry = x >> 8;
      }
      while (carry) { mag.push_back(static_cast<std::uint8_t>(carry & 0xFF)); carry >>= 8; }
    }
    mag.push_back(0);  // sign byte
    if (neg) {
      unsigned carry = 1;
      for (auto& b : mag) {
        unsigned x = static_cast<std::uint8_t>(~b) + carry;
        b = static_cast<std::uint8_t>(x & 0xFF);
        carry = x >> 8;
      }
    }
    return Value(BigInt{minimal_le(std::string(mag.begin(), mag.end()))});
  }
  Value long_from_le(std::string_view le) {
    std::string m = minimal_le(le);
    if (m.size() <= 8) {  // fits int64: sign-extend
      std::uint64_t u = 0;
      for (std::size_t i = 0; i < m.size(); ++i) u |= std::uint64_t{static_cast<std::uint8_t>(m[i])} << (8 * i);
      if (!m.empty() && m.size() < 8 && (static_cast<std::uint8_t>(m.back()) & 0x80)) u |= ~std::uint64_t{0} << (8 * m.size());
      return Value(static_cast<std::int64_t>(u));
    }
    return Value(BigInt{std::move(m)});
  }
  double parse_float(std::string_view s) {
    std::string_view t = s;
    if (!t.empty() && t[0] == '+') t.remove_prefix(1);
    double d = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) {
      // from_chars reports out-of-range (1e999, 1e-999) without a value; Python gives
      // inf / 0.0 with the sign, which strtod returns.
      if (ec == std::errc::result_out_of_range && ptr == t.data() + t.size())
        return std::strtod(std::string(s).c_str(), nullptr);
      fail(rules::kBadNumberText, "FLOAT argument '" + std::string(s.substr(0, 40)) + "' is not a float");
    }
    return d;
  }
  std::uint64_t parse_memo_index(std::string_view s) {
    std::uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || s[0] == '-' || s[0] == '+')
      fail(rules::kBadMemoIndex, opname() + " index '" + std::string(s.substr(0, 40)) + "' is not a non-negative integer");
    return v;
  }

  // ---- strings ----
  // Python's codecs.escape_decode of a protocol-0 STRING body (repr of a Python 2 str).
  std::string escape_decode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (c != '\\') { out += c; continue; }
      if (++i >= s.size()) fail(rules::kBadStringLiteral, "STRING ends with a lone backslash");
      char e = s[i];
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': {
          int h1 = i + 1 < s.size() ? hex_digit(s[i + 1]) : -1;
          int h2 = i + 2 < s.size() ? hex_digit(s[i + 2]) : -1;
          if (h1 < 0 || h2 < 0) fail(rules::kBadStringLiteral, "STRING has an invalid \\x escape");
          out += static_cast<char>(h1 * 16 + h2);
          i += 2;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0';
            for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) v = v * 8 + (s[++i] - '0');
            out += static_cast<char>(v & 0xFF);
          } else {
            out += '\\';  // unknown escapes stay as they are (Python: DeprecationWarning)
            out += e;
          }
      }
    }
    return out;
  }
  // Python's raw-unicode-escape decoding (UNICODE opcode): bytes are latin-1 code
  // points except \uXXXX and \UXXXXXXXX after an odd run of backslashes.
  std::string raw_unicode_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
      auto c = static_cast<unsigned char>(s[i]);
      if (c != '\\') { append_utf8(out, c); ++i; continue; }
      std::size_t run = 0;
      while (i + run < s.size() && s[i + run] == '\\') ++run;
      std::size_t after = i + run;
      if (run % 2 == 0 || after >= s.size() || (s[after] != 'u' && s[after] != 'U')) {
        out.append(run, '\\');
        i = after;
        continue;
      }
      out.append(run - 1, '\\');
      std::size_t count = s[after] == 'u' ? 4 : 8;
      std::uint32_t cp = 0;
      for (std::size_t k = 0; k < count; ++k) {
        int h = after + 1 + k < s.size() ? hex_digit(s[after + 1 + k]) : -1;
        if (h < 0) fail(rules::kBadStringLiteral, std::string("UNICODE has a truncated \\") + s[after] + " escape");
        cp = cp * 16 + static_cast<std::uint32_t>(h);
      }
      if (cp > 0x10FFFF) fail(rules::kBadStringLiteral, "UNICODE escape is beyond U+10FFFF");
      if (cp >= 0xD800 && cp <= 0xDFFF)
        fail(rules::kSurrogate, "UNICODE holds the surrogate code point " + std::to_string(cp) + " (not representable)");
      append_utf8(out, cp);
      i = after + 1 + count;
    }
    return out;
  }

  // ---- container mutation ----
  void append_to(Slot& target, std::vector<Slot>& items) {
    if (items.empty()) return;  // CPython's C unpickler: nothing to do
    auto k = target.v.kind();
    if (k != Value::Kind::kList && k != Value::Kind::kObject)
      fail(rules::kBadAppendTarget, opname() + " target is a " + std::string(kind_name(k)) + ", not a list or object");
    for (auto& s : items)
      if (s.info) s.info->placed = true;
    check_mutable(target, kind_name(k));
    auto& vec = k == Value::Kind::kList ? target.v.as_list().items : target.v.as_object().list_items;
    for (auto& s : items) {
      adopt(*target.info, s);
      vec.push_back(std::move(s.v));
    }
  }
  void setitems_on(Slot& target, std::vector<Slot>& items) {
    if (items.size() % 2) fail(rules::kOddSetItems, opname() + " has an odd number of items (" + std::to_string(items.size()) + ")");
    if (items.empty()) return;
    auto k = target.v.kind();
    if (k != Value::Kind::kDict && k != Value::Kind::kObject)
      fail(rules::kBadSetItemTarget, opname() + " target is a " + std::string(kind_name(k)) + ", not a dict or object");
    for (auto& s : items)
      if (s.info) s.info->placed = true;
    check_mutable(target, kind_name(k));
    Info& info = *target.info;
    if (k == Value::Kind::kObject) {
      auto& vec = target.v.as_object().dict_items;
      for (std::size_t i = 0; i < items.size(); i += 2) {
        adopt(info, items[i]);
        adopt(info, items[i + 1]);
        vec.emplace_back(std::move(items[i].v), std::move(items[i + 1].v));
      }
      return;
    }
    Dict& d = target.v.as_dict();
    if (!info.keys) info.keys = std::make_unique<KeyIndex>(index_of(d.items, nan_counter_));
    for (std::size_t i = 0; i < items.size(); i += 2) {
      adopt(info, items[i]);
      adopt(info, items[i + 1]);
      if (!dict_set(d.items, *info.keys, std::move(items[i].v), std::move(items[i + 1].v), nan_counter_))
        fail(rules::kUnhashableKey, opname() + " key is an unhashable " + std::string(kind_name(items[i].v.kind())));
    }
  }
  Slot make_set(std::vector<Slot>& items, bool frozen) {
    auto info = new_node();
    auto set = std::make_shared<Set>();
    set->frozen = frozen;
    info->keys = std::make_unique<KeyIndex>();
    for (auto& s : items) {
      adopt(*info, s);
      Value::Kind kind = s.v.kind();
      if (!set_add(set->items, *info->keys, std::move(s.v), nan_counter_))
        fail(rules::kUnhashableKey, opname() + " item is an unhashable " + std::string(kind_name(kind)));
    }
    return Slot{Value(std::move(set)), std::move(info)};
  }
  Slot make_dict(std::vector<Slot>& items) {
    auto info = new_node();
    Slot d{Value::dict(), std::move(info)};
    if (items.size() % 2) fail(rules::kOddSetItems, opname() + " has an odd number of items (" + std::to_string(items.size()) + ")");
    setitems_on(d, items);
    return d;
  }

  // BUILD: state merge rules (docs/formats/pickle.md "BUILD").
  void build(Slot& target, Slot state) {
    auto k = target.v.kind();
    if (k != Value::Kind::kObject && k != Value::Kind::kDict)
      fail(rules::kBadBuildTarget, "BUILD target is a " + std::string(kind_name(k)) + ", not an object or dict");
    if (state.info) state.info->placed = true;
    check_mutable(target, kind_name(k));
    adopt(*target.info, state);
    if (k == Value::Kind::kObject) {
      Object& o = target.v.as_object();
      if (o.state && o.state->is(Value::Kind::kDict) && state.v.is(Value::Kind::kDict)) {
        o.state = std::make_shared<Value>(Value(merged(&o.state->as_dict(), state.v.as_dict())));
      } else {
        o.state = std::make_shared<Value>(std::move(state.v));
      }
      return;
    }
    // A dict: the state must be a dict of attributes, or CPython's (dict|None, slots dict|None).
    Dict& d = target.v.as_dict();
    std::vector<const Dict*> parts;
    if (state.v.is(Value::Kind::kDict)) {
      parts.push_back(&state.v.as_dict());
    } else if (state.v.is(Value::Kind::kTuple) && state.v.items().size() == 2) {
      for (const Value& x : state.v.items()) {
        if (x.is(Value::Kind::kDict)) parts.push_back(&x.as_dict());
        else if (!x.is_none()) fail(rules::kBadBuildState, "BUILD on a dict: state tuple holds a " + std::string(kind_name(x.kind())));
      }
    } else if (!state.v.is_none()) {
      fail(rules::kBadBuildState, "BUILD on a dict needs a dict of attributes, got a " + std::string(kind_name(state.v.kind())));
    }
    for (const Dict* part : parts) d.attrs = merged(d.attrs.get(), *part);
  }
  // A new plain dict: a's items (a may be null) updated with b's.
  std::shared_ptr<Dict> merged(const Dict* a, const Dict& b) {
    auto d = std::make_shared<Dict>();
    KeyIndex index;
    if (a)
      for (const auto& [key, val] : a->items) dict_set(d->items, index, key, val, nan_counter_);
    for (const auto& [key, val] : b.items)
      if (!dict_set(d->items, index, key, val, nan_counter_))
        fail(rules::kUnhashableKey, "BUILD state key is an unhashable " + std::string(kind_name(key.kind())));
    charge(kSlotCost * (d->items.size() + 1));
    return d;
  }

  // The memo: dense indices (what picklers write, 0, 1, 2, ...) in a vector, any other
  // index in a hash map, so a BINPUT of 0xFFFFFFFF allocates one entry, not 4 G.
  std::size_t memo_size() const { return dense_.size() + sparse_.size(); }
  void memo_put(std::uint64_t index) {
    const Slot& t = top();
    if (index < dense_.size()) {
      dense_[index] = t;
    } else if (auto it = sparse_.find(index); it != sparse_.end()) {
      it->second = t;
    } else {
      if (memo_size() >= lim_.max_memo)
        fail(rules::kMaxMemo, opname() + " would hold more than max_memo (" + std::to_string(lim_.max_memo) + ") memo entries");
      if (index == dense_.size()) {
        dense_.push_back(t);
        // Keep indices unique across both: pull in sparse entries that became dense.
        while (!sparse_.empty()) {
          auto next = sparse_.find(dense_.size());
          if (next == sparse_.end()) break;
          dense_.push_back(std::move(next->second));
          sparse_.erase(next);
        }
      } else {
        sparse_.emplace(index, t);
      }
    }
    ++puts_;
  }
  void memo_get(std::uint64_t index) {
    const Slot* s = nullptr;
    if (index < dense_.size()) s = &dense_[index];
    else if (auto it = sparse_.find(index); it != sparse_.end()) s = &it->second;
    if (!s) fail(rules::kMemoMissing, opname() + " of memo index " + std::to_string(index) + ", which was never stored");
    ++gets_;
    push(*s);
  }

  void step();
  void finish_facts();

  const std::uint8_t* p_;
  std::uint64_t full_, n_;
  const std::string& name_;
  std::uint64_t base_;
  const Limits& lim_;
  const Hooks& hooks_;

  std::uint64_t pos_ = 0, op_pos_ = 0;
  std::uint8_t op_ = 0;
  int proto_ = 0;
  bool stopped_ = false;
  std::vector<Slot> stack_;
  std::vector<std::size_t> marks_;
  std::vector<Slot> dense_;
  std::unordered_map<std::uint64_t, Slot> sparse_;
  std::uint64_t alloc_ = 0, ops_ = 0, puts_ = 0, gets_ = 0, frames_ = 0, nan_counter_ = 0;
  std::array<std::uint64_t, 256> counts_{};
  Parsed out_;
};

Parsed Vm::run() {
  while (!stopped_) {
    if (pos_ >= n_) {
      op_pos_ = pos_;
      if (n_ < full_)
        fail(rules::kMaxBytes, "no STOP within the max_pickle_bytes limit of " + std::to_string(lim_.max_pickle_bytes) + " bytes");
      fail(rules::kTruncated, "stream ends without STOP after " + std::to_string(pos_) + " bytes");
    }
    op_pos_ = pos_;
    op_ = p_[pos_++];
    if (++ops_ > lim_.max_pickle_ops)
      fail(rules::kMaxOps, "more than max_pickle_ops (" + std::to_string(lim_.max_pickle_ops) + ") opcodes");
    ++counts_[op_];
    step();
  }
  out_.protocol = proto_;
  out_.end = pos_;
  finish_facts();
  return std::move(out_);
}

void Vm::step() {
  switch (op_) {
    // ---- framing and protocol ----
    case op::kProto: {
      std::uint8_t v = u8();
      if (v > kHighestProtocol) fail(rules::kUnsupportedProtocol, "PROTO " + std::to_string(v) + " is above protocol 5");
      proto_ = v;
      return;
    }
    case op::kFrame: {
      std::uint64_t len = u64();
      // CPython's C unpickler only requires the frame's bytes to be present.
      if (len > full_ - pos_)
        fail(rules::kTruncated, "FRAME of " + std::to_string(len) + " bytes, only " + std::to_string(full_ - pos_) + " remain");
      ++frames_;
      return;
    }
    case op::kStop: {
      Slot s = pop();
      out_.value = std::move(s.v);
      stopped_ = true;
      return;
    }
    // ---- stack manipulation ----
    case op::kMark:
      if (marks_.size() >= lim_.max_depth)
        fail(rules::kMaxDepth, "MARK nesting exceeds max_depth (" + std::to_string(lim_.max_depth) + ")");
      if (stack_.size() + marks_.size() >= lim_.max_stack)
        fail(rules::kMaxStack, "stack holds " + std::to_string(stack_.size() + marks_.size()) + " entries, the max_stack limit");
      marks_.push_back(stack_.size());
      return;
    case op::kPop:
      // C unpickler: POP right after MARK discards the mark.
      if (!marks_.empty() && marks_.back() == stack_.size()) { marks_.pop_back(); return; }
      pop();
      return;
    case op::kPopMark: pop_mark(); return;
    case op::kDup: { Slot s = top(); push(std::move(s)); return; }
    // ---- memo ----
    case op::kPut: memo_put(parse_memo_index(line())); return;
    case op::kBinPut: memo_put(u8()); return;
    case op::kLongBinPut: memo_put(u32()); return;
    case op::kMemoize: memo_put(memo_size()); return;
    case op::kGet: memo_get(parse_memo_index(line())); return;
    case op::kBinGet: memo_get(u8()); return;
    case op::kLongBinGet: memo_get(u32()); return;
    // ---- scalars ----
    case op::kNone: push_leaf(Value()); return;
    case op::kNewTrue: push_leaf(Value(true)); return;
    case op::kNewFalse: push_leaf(Value(false)); return;
    case op::kInt: {
      std::string_view s = line();
      if (s == "00") push_leaf(Value(false));
      else if (s == "01") push_leaf(Value(true));
      else push_leaf(parse_decimal(s));
      return;
    }
    case op::kLong: {
      std::string_view s = line();
      if (!s.empty() && s.back() == 'L') s.remove_suffix(1);
      Value v = parse_decimal(s);
      if (v.is(Value::Kind::kBigInt)) charge(v.as_bigint().le_bytes.size());
      push_leaf(std::move(v));
      return;
    }
    case op::kBinInt: push_leaf(Value(std::int64_t{i32()})); return;
    case op::kBinInt1: push_leaf(Value(std::int64_t{u8()})); return;
    case op::kBinInt2: push_leaf(Value(std::int64_t{u16()})); return;
    case op::kLong1: {
      std::uint8_t n = u8();
      push_leaf(long_from_le(bytes(n)));
      return;
    }
    case op::kLong4: {
      std::int32_t n = i32();
      if (n < 0) fail(rules::kNegativeLength, "LONG4 byte count " + std::to_string(n) + " is negative");
      if (static_cast<std::uint64_t>(n) > kMaxLongBytes)
        fail(rules::kLongTooLarge, "LONG4 of " + std::to_string(n) + " bytes is over " + std::to_string(kMaxLongBytes));
      charge(static_cast<std::uint64_t>(n));
      push_leaf(long_from_le(bytes(static_cast<std::uint64_t>(n))));
      return;
    }
    case op::kFloat: push_leaf(Value(parse_float(line()))); return;
    case op::kBinFloat: {
      const std::uint8_t* b = need(8);
      std::uint64_t u = 0;
      for (int i = 0; i < 8; ++i) u = (u << 8) | b[i];
      double d;
      std::memcpy(&d, &u, sizeof d);
      push_leaf(Value(d));
      return;
    }
    // ---- strings and bytes ----
    case op::kString: {
      std::string_view s = line();
      if (s.size() < 2 || s.front() != s.back() || (s.front() != '\'' && s.front() != '"'))
        fail(rules::kBadStringLiteral, "the STRING opcode argument must be quoted");
      push(make_py2_str(escape_decode(s.substr(1, s.size() - 2))));
      return;
    }
    case op::kBinString: {
      std::int32_t n = i32();
      if (n < 0) fail(rules::kNegativeLength, "BINSTRING byte count " + std::to_string(n) + " is negative");
      std::string_view d = bytes(static_cast<std::uint64_t>(n));
      push(make_py2_str(d));
      return;
    }
    case op::kShortBinString: push(make_py2_str(bytes(u8()))); return;
    case op::kUnicode: {
      std::string s = raw_unicode_escape(line());
      check_string(s.size());
      charge(kSlotCost + s.size());
      push_leaf(Value::str(std::move(s)));
      return;
    }
    case op::kShortBinUnicode: push(make_str(bytes(u8()))); return;
    case op::kBinUnicode:
    case op::kBinUnicode8: {
      std::uint64_t n = op_ == op::kBinUnicode ? u32() : u64();
      std::string_view d = bytes(n);
      push(make_str(d));
      return;
    }
    case op::kShortBinBytes: push(make_bytes(bytes(u8()), false)); return;
    case op::kBinBytes:
    case op::kBinBytes8:
    case op::kByteArray8: {
      std::uint64_t n = op_ == op::kBinBytes ? u32() : u64();
      std::string_view d = bytes(n);
      push(make_bytes(d, op_ == op::kByteArray8));
      return;
    }
    case op::kNextBuffer:
    case op::kReadonlyBuffer:
      fail(rules::kOutOfBandBuffer, opname() + ": out-of-band buffers (pickle protocol 5 buffer_callback) are not supported");
    // ---- containers ----
    case op::kEmptyList: push(Slot{Value::list(), new_node()}); return;
    case op::kEmptyDict: push(Slot{Value::dict(), new_node()}); return;
    case op::kEmptyTuple: push(Slot{Value::tuple(), new_node()}); return;
    case op::kEmptySet: {
      auto info = new_node();
      info->keys = std::make_unique<KeyIndex>();
      push(Slot{Value(std::make_shared<Set>()), std::move(info)});
      return;
    }
    case op::kList: {
      auto items = pop_mark();
      auto info = new_node();
      auto l = std::make_shared<List>();
      l->items.reserve(items.size());
      for (auto& s : items) { adopt(*info, s); l->items.push_back(std::move(s.v)); }
      push(Slot{Value(std::move(l)), std::move(info)});
      return;
    }
    case op::kTuple: push(make_tuple(pop_mark())); return;
    case op::kTuple1:
    case op::kTuple2:
    case op::kTuple3: {
      std::size_t n = op_ - op::kTuple1 + 1;
      need_stack(n);
      std::vector<Slot> items(std::make_move_iterator(stack_.end() - static_cast<std::ptrdiff_t>(n)),
                              std::make_move_iterator(stack_.end()));
      stack_.resize(stack_.size() - n);
      push(make_tuple(std::move(items)));
      return;
    }
    case op::kDict: {
      auto items = pop_mark();
      push(make_dict(items));
      return;
    }
    case op::kFrozenSet: {
      auto items = pop_mark();
      push(make_set(items, true));
      return;
    }
    case op::kAppend: {
      need_stack(2);
      std::vector<Slot> items;
      items.push_back(pop());
      append_to(top(), items);
      return;
    }
    case op::kAppends: {
      auto items = pop_mark();
      append_to(top(), items);
      return;
    }
    case op::kSetItem: {
      need_stack(3);
      std::vector<Slot> items(2);
      items[1] = pop();
      items[0] = pop();
      setitems_on(top(), items);
      return;
    }
    case op::kSetItems: {
      auto items = pop_mark();
      setitems_on(top(), items);
      return;
    }
    case op::kAddItems: {
      auto items = pop_mark();
      Slot& target = top();
      if (items.empty()) return;
      if (!target.v.is(Value::Kind::kSet) || target.v.as_set().frozen)
        fail(rules::kBadAddItemsTarget, "ADDITEMS target is a " +
                                            std::string(target.v.is(Value::Kind::kSet) ? "frozenset" : kind_name(target.v.kind())) +
                                            ", not a set");
      for (auto& s : items)
        if (s.info) s.info->placed = true;
      check_mutable(target, "set");
      Set& set = target.v.as_set();
      if (!target.info->keys) target.info->keys = std::make_unique<KeyIndex>(index_of(set.items, nan_counter_));
      for (auto& s : items) {
        adopt(*target.info, s);
        Value::Kind kind = s.v.kind();
        if (!set_add(set.items, *target.info->keys, std::move(s.v), nan_counter_))
          fail(rules::kUnhashableKey, "ADDITEMS item is an unhashable " + std::string(kind_name(kind)));
      }
      return;
    }
    // ---- globals and objects ----
    case op::kGlobal: {
      std::string_view module = check_utf8_name(line(), "module name");
      std::string_view name = check_utf8_name(line(), "global name");
      push_leaf(make_global(module, name));
      return;
    }
    case op::kStackGlobal: {
      need_stack(2);
      Slot name = pop();
      Slot module = pop();
      if (!module.v.is(Value::Kind::kStr) || !name.v.is(Value::Kind::kStr))
        fail(rules::kStackGlobalOperands, "STACK_GLOBAL needs two str operands, got " + std::string(kind_name(module.v.kind())) +
                                              " and " + std::string(kind_name(name.v.kind())));
      push_leaf(make_global(module.v.as_str(), name.v.as_str()));
      return;
    }
    case op::kReduce: {
      need_stack(2);
      Slot args = pop();
      Slot callable = pop();
      if (!args.v.is(Value::Kind::kTuple))
        fail(rules::kArgsNotTuple, "REDUCE arguments are a " + std::string(kind_name(args.v.kind())) + ", not a tuple");
      push_object(Construct::kReduce, std::move(callable), std::move(args), Slot{});
      return;
    }
    case op::kNewObj: {
      need_stack(2);
      Slot args = pop();
      Slot cls = pop();
      if (!args.v.is(Value::Kind::kTuple))
        fail(rules::kArgsNotTuple, "NEWOBJ arguments are a " + std::string(kind_name(args.v.kind())) + ", not a tuple");
      push_object(Construct::kNewObj, std::move(cls), std::move(args), Slot{});
      return;
    }
    case op::kNewObjEx: {
      need_stack(3);
      Slot kwargs = pop();
      Slot args = pop();
      Slot cls = pop();
      if (!args.v.is(Value::Kind::kTuple))
        fail(rules::kArgsNotTuple, "NEWOBJ_EX arguments are a " + std::string(kind_name(args.v.kind())) + ", not a tuple");
      if (!kwargs.v.is(Value::Kind::kDict))
        fail(rules::kKwargsNotDict, "NEWOBJ_EX keyword arguments are a " + std::string(kind_name(kwargs.v.kind())) + ", not a dict");
      push_object(Construct::kNewObjEx, std::move(cls), std::move(args), std::move(kwargs));
      return;
    }
    case op::kInst: {
      std::string_view module = check_utf8_name(line(), "module name");
      std::string_view name = check_utf8_name(line(), "class name");
      Value g = make_global(module, name);
      auto items = pop_mark();
      Slot args = make_tuple(std::move(items));
      push_object(Construct::kInst, Slot{std::move(g), nullptr}, std::move(args), Slot{});
      return;
    }
    case op::kObj: {
      auto items = pop_mark();
      if (items.empty()) fail(rules::kObjMissingClass, "OBJ needs a class after the MARK, found nothing");
      Slot cls = std::move(items.front());
      items.erase(items.begin());
      Slot args = make_tuple(std::move(items));
      push_object(Construct::kObj, std::move(cls), std::move(args), Slot{});
      return;
    }
    case op::kBuild: {
      need_stack(2);
      Slot state = pop();
      build(top(), std::move(state));
      return;
    }
    case op::kPersId: {
      std::string_view s = line();
      for (char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) fail(rules::kBadPersId, "PERSID argument is not ASCII");
      push(persistent(make_str(s)));
      return;
    }
    case op::kBinPersId: push(persistent(pop())); return;
    case op::kExt1:
    case op::kExt2:
    case op::kExt4: {
      std::int64_t code = op_ == op::kExt1 ? u8() : op_ == op::kExt2 ? u16() : i32();
      fail(rules::kExtensionCode, opname() + " " + std::to_string(code) +
                                      ": extension codes (copyreg extension registry) are not supported");
    }
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", op_);
      fail(rules::kUnknownOpcode, std::string("unknown opcode ") + buf);
    }
  }
}

void Vm::finish_facts() {
  out_.facts.push_back(Fact{"pickle.protocol", name_, std::to_string(proto_)});
  out_.facts.push_back(Fact{"pickle.memo", name_, "puts=" + std::to_string(puts_) + " gets=" + std::to_string(gets_)});
  std::vector<std::pair<std::string_view, std::uint64_t>> used;
  for (int c = 0; c < 256; ++c)
    if (counts_[c]) used.emplace_back(op_name(static_cast<std::uint8_t>(c)), counts_[c]);
  std::sort(used.begin(), used.end());
  std::string fp;
  for (const auto& [n, c] : used) {
    if (!fp.empty()) fp += ',';
    fp += n;
    fp += ':';
    fp += std::to_string(c);
  }
  out_.facts.push_back(Fact{"pickle.opcodes", name_, std::move(fp)});
  if (frames_) out_.facts.push_back(Fact{"pickle.frames", name_, "count=" + std::to_string(frames_)});
  if (!stack_.empty() || !marks_.empty())
    out_.facts.push_back(Fact{"pickle.stop-leftover", name_,
                              "stack=" + std::to_string(stack_.size()) + " marks=" + std::to_string(marks_.size())});
}

}  // namespace

Parsed parse(std::span<const std::byte> data, const std::string& name, std::uint64_t base_offset,
             const Limits& limits, const Hooks& hooks) {
  Vm vm(data, name, base_offset, limits, hooks);
  return vm.run();
}

std::optional<Value> stdlib_reduce(const Object& obj) {
  if (obj.how != Construct::kReduce || !obj.callable || !obj.args) return std::nullopt;
  const Value& c = *obj.callable;
  const Value& a = *obj.args;
  if (!c.is(Value::Kind::kGlobal) || !a.is(Value::Kind::kTuple)) return std::nullopt;
  const Global& g = c.as_global();
  const std::vector<Value>& args = a.items();
  std::uint64_t nan_counter = 0;
  auto is = [&](std::string_view m, std::string_view n) { return g.module == m && g.name == n; };
  auto is_latin1 = [](const Value& v) {
    return v.is(Value::Kind::kStr) && (v.as_str() == "latin1" || v.as_str() == "latin-1");
  };

  if (is("collections", "OrderedDict") || is("collections", "Counter")) {
    auto d = std::make_shared<Dict>();
    d->kind = g.name == "OrderedDict" ? DictKind::kOrderedDict : DictKind::kCounter;
    if (args.empty()) return Value(std::move(d));
    if (args.size() != 1) return std::nullopt;
    KeyIndex index;
    if (args[0].is(Value::Kind::kDict)) {  // Counter(dict), OrderedDict(dict)
      for (const auto& [k, v] : args[0].as_dict().items)
        if (!dict_set(d->items, index, k, v, nan_counter)) return std::nullopt;
      return Value(std::move(d));
    }
    if (args[0].is(Value::Kind::kList)) {  // Python 2 OrderedDict: ([[k, v], ...],)
      for (const Value& pair : args[0].items()) {
        if (!(pair.is(Value::Kind::kList) || pair.is(Value::Kind::kTuple)) || pair.items().size() != 2) return std::nullopt;
        if (!dict_set(d->items, index, pair.items()[0], pair.items()[1], nan_counter)) return std::nullopt;
      }
      return Value(std::move(d));
    }
    return std::nullopt;
  }
  if (is("builtins", "set") || is("builtins", "frozenset")) {
    auto s = std::make_shared<Set>();
    s->frozen = g.name == "frozenset";
    if (args.empty()) return Value(std::move(s));
    if (args.size() != 1 || !(args[0].is(Value::Kind::kList) || args[0].is(Value::Kind::kTuple))) return std::nullopt;
    KeyIndex index;
    for (const Value& x : args[0].items())
      if (!set_add(s->items, index, x, nan_counter)) return std::nullopt;
    return Value(std::move(s));
  }
  if (is("_codecs", "encode")) {
    if (args.size() != 2 || !args[0].is(Value::Kind::kStr) || !is_latin1(args[1])) return std::nullopt;
    auto b = latin1_encode(args[0].as_str());
    if (!b) return std::nullopt;
    return Value::bytes(std::move(*b));
  }
  if (is("builtins", "bytes")) {
    if (args.empty()) return Value::bytes("");
    return std::nullopt;
  }
  if (is("builtins", "bytearray")) {
    if (args.empty()) return Value::bytes("", true);
    if (args.size() == 1 && args[0].is(Value::Kind::kBytes) && !args[0].is_bytearray())
      return Value::bytes(std::string(args[0].as_bytes()), true);
    if (args.size() == 2 && args[0].is(Value::Kind::kStr) && is_latin1(args[1])) {
      auto b = latin1_encode(args[0].as_str());
      if (!b) return std::nullopt;
      return Value::bytes(std::move(*b), true);
    }
    return std::nullopt;
  }
  if (is("builtins", "getattr")) {
    if (args.size() != 2 || !args[0].is(Value::Kind::kGlobal) || !args[1].is(Value::Kind::kStr)) return std::nullopt;
    std::string_view attr = args[1].as_str();
    if (attr.empty() || attr.find('.') != std::string_view::npos) return std::nullopt;
    const Global& parent = args[0].as_global();
    return Value::global(parent.module, parent.name + "." + std::string(attr));
  }
  return std::nullopt;
}

}  // namespace tensorseal::detail::pickle
