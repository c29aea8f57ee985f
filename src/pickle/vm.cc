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
// Limits::max_depth. CPython's pickler always finishes a value before placing it, so a
// change to a placed node (APPEND/SETITEM/ADDITEMS/BUILD: a "late" change) comes only
// from recursive structures, and may close a cycle of owning edges. Then the arguments
// of every later reduce hook, and at STOP the result, are untangled (untangle: back
// edges of a depth-first walk become Refs, and heights and weights, which may be stale
// above a changed node, are measured exactly against max_depth and max_alloc). Changed
// nodes that are garbage at STOP, or all of them when parsing fails, are emptied, so no
// cycle outlives the machine.
#include "pickle/vm.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include "pickle/compat.h"
#include "pickle/constants.h"
#include "pickle/keys.h"
#include "pickle/longs.h"
#include "pickle/opcodes.h"
#include "pickle/text.h"
#include "util/checked.h"
#include "util/endian.h"
#include "util/utf8.h"

namespace tensorseal::detail::pickle {

namespace {

// How a non-str STACK_GLOBAL operand shows in a "<computed>" GlobalRef.
std::string describe_operand(const Value& v) {
  if (v.is(Value::Kind::kStr)) return std::string(v.as_str());
  if (v.is(Value::Kind::kObject) && v.as_object().callable && v.as_object().callable->is(Value::Kind::kGlobal)) {
    const Global& g = v.as_object().callable->as_global();
    return "<result of " + g.module + "." + g.name + ">";
  }
  return "<" + std::string(kind_name(v.kind())) + ">";
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
  Vm(const Vm&) = delete;
  Vm& operator=(const Vm&) = delete;
  ~Vm() {
    for (Value& v : late_nodes_) clear_node(v);  // only left when parsing failed
  }

  Parsed run();

 private:
  // ---- errors ----
  [[noreturn]] void fail(const Rule& rule, const std::string& detail) const {
    throw Error(rule, fmt::format("{} (protocol {})", detail, proto_), name_, base_ + op_pos_);
  }
  std::string opname() const { return std::string(op_name(op_)); }
  // Runs a text codec, locating its errors at the current opcode.
  std::string located(std::string (*decode)(std::string_view), std::string_view arg) const {
    try {
      return decode(arg);
    } catch (const Error& e) {
      fail(Rule{e.rule(), e.kind()}, e.detail());
    }
  }

  // ---- input ----
  const std::uint8_t* need(std::uint64_t k) {
    if (k > full_ - pos_) {
      fail(rules::kTruncated,
           fmt::format("{} needs {} bytes at offset {}, only {} remain", opname(), k, base_ + pos_, full_ - pos_));
    }
    if (k > n_ - pos_)
      fail(rules::kMaxBytes,
           fmt::format("{} reads past the max_pickle_bytes limit of {} bytes", opname(), lim_.max_pickle_bytes));
    const std::uint8_t* r = p_ + pos_;
    pos_ += k;
    return r;
  }
  std::uint8_t u8() { return *need(1); }
  std::uint16_t u16() { return util::load_le<std::uint16_t>(reinterpret_cast<const std::byte*>(need(2))); }
  std::uint32_t u32() { return util::load_le<std::uint32_t>(reinterpret_cast<const std::byte*>(need(4))); }
  std::int32_t i32() { return util::load_le<std::int32_t>(reinterpret_cast<const std::byte*>(need(4))); }
  std::uint64_t u64() { return util::load_le<std::uint64_t>(reinterpret_cast<const std::byte*>(need(8))); }
  std::string_view bytes(std::uint64_t k) {
    return {reinterpret_cast<const char*>(need(k)), static_cast<std::size_t>(k)};
  }

  // A text argument: bytes up to '\n' (excluded); the newline is consumed.
  std::string_view line() {
    std::uint64_t avail = n_ - pos_;
    std::uint64_t scan = std::min<std::uint64_t>(avail, sat_add(lim_.max_string, 1));
    const void* nl = scan ? std::memchr(p_ + pos_, '\n', scan) : nullptr;
    if (!nl) {
      if (scan < avail || (scan == avail && lim_.max_string < avail))
        fail(rules::kMaxString,
             fmt::format("{} text argument is longer than max_string ({} bytes)", opname(), lim_.max_string));
      if (n_ < full_)
        fail(rules::kMaxBytes,
             fmt::format("{} reads past the max_pickle_bytes limit of {} bytes", opname(), lim_.max_pickle_bytes));
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
      fail(rules::kMaxAlloc,
           fmt::format("values built so far exceed max_alloc ({} bytes; repeated references count each time)",
                       lim_.max_alloc));
  }
  void check_string(std::uint64_t len) {
    if (len > lim_.max_string)
      fail(rules::kMaxString,
           fmt::format("{} value of {} bytes exceeds max_string ({})", opname(), len, lim_.max_string));
  }
  static std::uint64_t weight(const Slot& s) {
    if (s.info) return s.info->weight;
    switch (s.v.kind()) {
      case Value::Kind::kStr:
        return kSlotCost + s.v.as_str().size();
      case Value::Kind::kBytes:
        return kSlotCost + s.v.as_bytes().size();
      case Value::Kind::kBigInt:
        return kSlotCost + s.v.as_bigint().le_bytes.size();
      default:
        return kSlotCost;
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
        fail(rules::kMaxDepth,
             fmt::format("{} nests values {} deep, over max_depth ({})", opname(), h, lim_.max_depth));
      parent.height = h;
    }
  }
  // Before changing an existing node: when it is already inside another node, the
  // change may close a cycle (a recursive structure). Such nodes are remembered: the
  // result is untangled at STOP, and whatever of them is then garbage is cleared.
  bool late(const Slot& target) {
    if (!target.info) fail(tensorseal::rules::kInternal, "container without bookkeeping");
    if (!target.info->placed) return false;
    late_ = true;
    late_nodes_.push_back(target.v);
    return true;
  }

  // Makes the owning edges below `root` acyclic, depending only on the graph and the
  // root: a depth-first walk (edges in tree order) turns every edge back to a node on
  // the current path into a Ref, and every Ref to a node off the path into an owning
  // edge again. An edge that cannot become a Ref (a dict key, a set item, a tensor's
  // attributes) is pickle/late-mutation. Heights and weights are measured exactly on
  // the way (the ones recorded in slots may be stale after late changes) against
  // max_depth and max_alloc; each edge counts against max_pickle_ops. Returns the
  // nodes reached. Iterative: no recursion whatever the input.
  std::unordered_set<const void*> untangle(Value& root) {
    struct Edge {
      Value* slot;
      bool fixed;  // may not become a Ref
    };
    struct Frame {
      Value* v;
      std::vector<Edge> edges;
      std::size_t next = 0;
      std::uint32_t height = 1;
      std::uint64_t weight = kNodeCost;
    };
    using K = Value::Kind;
    auto is_node = [](const Value& v) {
      return v.is(K::kList) || v.is(K::kTuple) || v.is(K::kSet) || v.is(K::kDict) || v.is(K::kObject) ||
             (v.is(K::kTensor) && v.as_tensor()->attributes);
    };
    auto edges_of = [](Value& v) {
      std::vector<Edge> out;
      switch (v.kind()) {
        case K::kList:
        case K::kTuple:
          for (Value& x : v.items()) out.push_back({&x, false});
          break;
        case K::kSet:
          for (Value& x : v.as_set().items) out.push_back({&x, true});
          break;
        case K::kDict:
          for (auto& [k, x] : v.as_dict().items) {
            out.push_back({const_cast<Value*>(&k), true});  // keys are never edited in place
            out.push_back({&x, false});
          }
          if (v.as_dict().attrs)
            for (auto& [k, x] : v.as_dict().attrs->items) out.push_back({&x, false});
          break;
        case K::kObject: {
          Object& o = v.as_object();
          for (auto* p : {&o.callable, &o.args, &o.kwargs, &o.state})
            if (*p) out.push_back({p->get(), false});
          for (Value& x : o.list_items) out.push_back({&x, false});
          for (auto& [k, x] : o.dict_items) {
            out.push_back({&k, false});
            out.push_back({&x, false});
          }
          break;
        }
        case K::kTensor:
          out.push_back({const_cast<Value*>(v.as_tensor()->attributes.get()), true});
          break;
        default:
          break;
      }
      return out;
    };
    auto leaf_weight = [](const Value& v) -> std::uint64_t {
      switch (v.kind()) {
        case K::kStr:
          return kSlotCost + v.as_str().size();
        case K::kBytes:
          return kSlotCost + v.as_bytes().size();
        case K::kBigInt:
          return kSlotCost + v.as_bigint().le_bytes.size();
        default:
          return kSlotCost;
      }
    };
    auto count = [&] {
      if (++ops_ > lim_.max_pickle_ops)
        fail(rules::kMaxOps,
             fmt::format("more than max_pickle_ops ({}) opcodes and recursion checks", lim_.max_pickle_ops));
    };
    std::unordered_map<const void*, std::pair<std::uint32_t, std::uint64_t>> done;  // node -> height, weight
    std::unordered_set<const void*> on_path;
    std::vector<Frame> path;
    if (!is_node(root)) return {};
    path.push_back(Frame{&root, edges_of(root)});
    on_path.insert(root.node());
    while (!path.empty()) {
      Frame& f = path.back();
      if (f.next == f.edges.size()) {
        if (f.height > lim_.max_depth)
          fail(rules::kMaxDepth, fmt::format("values nest {} deep after a recursive change, over max_depth ({})",
                                             f.height, lim_.max_depth));
        if (f.weight > lim_.max_alloc)
          fail(rules::kMaxAlloc, fmt::format("the value expanded without sharing exceeds max_alloc ({} bytes) after "
                                             "a recursive change",
                                             lim_.max_alloc));
        const void* node = f.v->node();
        const auto hw = std::make_pair(f.height, f.weight);
        done.emplace(node, hw);
        on_path.erase(node);
        path.pop_back();
        if (!path.empty()) {
          path.back().height = std::max(path.back().height, hw.first + 1);
          path.back().weight = sat_add(path.back().weight, hw.second);
        }
        continue;
      }
      const Edge e = f.edges[f.next++];
      count();
      Value& x = *e.slot;
      Value target = x.is(K::kRef) ? x.ref_target() : x;
      if (x.is(K::kRef) && target.is_none())
        fail(rules::kLateMutation, fmt::format("{}: a recursive reference outlives the value it refers to "
                                               "(not representable)",
                                               opname()));
      if (!is_node(target)) {
        f.weight = sat_add(f.weight, leaf_weight(target));
        continue;
      }
      const void* node = target.node();
      if (on_path.count(node)) {  // an edge back up the path: a Ref
        if (e.fixed)
          fail(rules::kLateMutation, fmt::format("{} makes a recursive structure through a dict key, a set item or "
                                                 "a tensor's attributes (not representable)",
                                                 opname()));
        if (!x.is(K::kRef)) x = Value::ref_to(target);
        f.weight = sat_add(f.weight, kSlotCost);
        continue;
      }
      if (x.is(K::kRef)) x = target;  // off the path: an owning edge
      if (auto it = done.find(node); it != done.end()) {
        f.height = std::max(f.height, it->second.first + 1);
        f.weight = sat_add(f.weight, it->second.second);
        continue;
      }
      if (path.size() >= lim_.max_depth)
        fail(rules::kMaxDepth, fmt::format("values nest over max_depth ({}) after a recursive change", lim_.max_depth));
      on_path.insert(node);
      path.push_back(Frame{&x, edges_of(x)});  // `f` is not used after this
    }
    std::unordered_set<const void*> reached;
    for (const auto& [node, hw] : done) reached.insert(node);
    return reached;
  }

  // Empties a node (breaking any cycle through it): for late-changed nodes that are
  // garbage at STOP, or all of them when parsing fails.
  static void clear_node(Value& v) {
    switch (v.kind()) {
      case Value::Kind::kList:
        v.as_list().items.clear();
        break;
      case Value::Kind::kDict:
        v.as_dict().items.clear();
        v.as_dict().attrs.reset();
        break;
      case Value::Kind::kSet:
        v.as_set().items.clear();
        break;
      case Value::Kind::kObject: {
        Object& o = v.as_object();
        o.callable.reset();
        o.args.reset();
        o.kwargs.reset();
        o.state.reset();
        o.list_items.clear();
        o.dict_items.clear();
        break;
      }
      default:
        break;
    }
  }

  // ---- stack ----
  std::size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Slot s) {
    if (stack_.size() + marks_.size() >= lim_.max_stack)
      fail(rules::kMaxStack, fmt::format("stack holds {} entries, the max_stack limit", stack_.size() + marks_.size()));
    stack_.push_back(std::move(s));
  }
  void push_leaf(Value v) { push(Slot{std::move(v), nullptr}); }
  void need_stack(std::size_t k) {
    if (stack_.size() - fence() < k)
      fail(rules::kStackUnderflow, fmt::format("{} needs {} value{} above the mark, found {}", opname(), k,
                                               k == 1 ? "" : "s", stack_.size() - fence()));
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
        fail(rules::kSurrogate,
             fmt::format("{} str holds a UTF-16 surrogate at byte {} (CPython's surrogatepass; not representable)",
                         opname(), i));
      fail(rules::kBadUtf8, fmt::format("{} str is not valid UTF-8 at byte {}", opname(), i));
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
    switch (hooks_.py2_strings) {
      case Py2Strings::kUtf8:
        break;
      case Py2Strings::kBytes:
        return make_bytes(raw, false);
      case Py2Strings::kAscii:
        for (std::size_t i = 0; i < raw.size(); ++i)
          if (static_cast<unsigned char>(raw[i]) >= 0x80)
            fail(rules::kPy2StringEncoding,
                 fmt::format("{} Python 2 str is not ASCII at byte {} (encoding='ascii')", opname(), i));
        break;
      case Py2Strings::kLatin1: {  // each byte is the code point of one character
        std::string utf8;
        utf8.reserve(raw.size());
        for (char c : raw) {
          const auto b = static_cast<unsigned char>(c);
          if (b < 0x80) {
            utf8 += c;
          } else {
            utf8 += static_cast<char>(0xC0 | (b >> 6));
            utf8 += static_cast<char>(0x80 | (b & 0x3F));
          }
        }
        check_string(utf8.size());
        charge(kSlotCost + utf8.size());
        return Slot{Value::str(std::move(utf8)), nullptr};
      }
    }
    if (auto bad = util::first_invalid_utf8(raw))
      fail(rules::kPy2StringEncoding, fmt::format("{} Python 2 str is not UTF-8 at byte {} "
                                                  "(decoded as UTF-8 like torch.load's default encoding='utf-8')",
                                                  opname(), *bad));
    charge(kSlotCost + raw.size());
    return Slot{Value::str(std::string(raw)), nullptr};
  }
  Value make_global(std::string_view module, std::string_view name) {
    std::string m(module), n(name);
    if (proto_ < 3) std::tie(m, n) = py2_to_py3_name(module, name);
    out_.globals.push_back(GlobalRef{m, n, fmt::format("{} @ {}", name_, base_ + op_pos_)});
    if (hooks_.on_global) hooks_.on_global(out_.globals.back());
    return Value::global(std::move(m), std::move(n));
  }
  std::string_view check_utf8_name(std::string_view s, std::string_view what) {
    if (auto bad = util::first_invalid_utf8(s))
      fail(rules::kBadUtf8, fmt::format("{} {} is not valid UTF-8 at byte {}", opname(), what, *bad));
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
    if (late_) untangle(args.v);  // hooks walk their arguments: acyclic and exactly bounded first
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
      fail(rules::kPersistentId,
           fmt::format("{} references persistent id {} but no persistent_load is set", opname(), repr(pid.v, 80)));
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
    if (!d.empty() && d[0] == '-') {
      neg = true;
      d.remove_prefix(1);
    }
    bool ok = !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
              (d.size() == 1 || d[0] != '0');
    if (!ok)
      fail(rules::kBadNumberText, fmt::format("{} argument '{}' is not a decimal integer", opname(), s.substr(0, 40)));
    if (d.size() > kMaxIntDigits)
      fail(rules::kLongTooLarge, fmt::format("{} integer has {} digits, over {}", opname(), d.size(), kMaxIntDigits));
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
      while (carry) {
        mag.push_back(static_cast<std::uint8_t>(carry & 0xFF));
        carry >>= 8;
      }
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
      if (!m.empty() && m.size() < 8 && (static_cast<std::uint8_t>(m.back()) & 0x80))
        u |= ~std::uint64_t{0} << (8 * m.size());
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
      fail(rules::kBadNumberText, fmt::format("FLOAT argument '{}' is not a float", s.substr(0, 40)));
    }
    return d;
  }
  std::uint64_t parse_memo_index(std::string_view s) {
    std::uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || s[0] == '-' || s[0] == '+')
      fail(rules::kBadMemoIndex, fmt::format("{} index '{}' is not a non-negative integer", opname(), s.substr(0, 40)));
    return v;
  }

  // ---- container mutation ----
  // Hooks::on_mutate for the current opcode, before `target` changes.
  void mutating(const Slot& target, const std::vector<Slot>& operands) {
    if (!hooks_.on_mutate) return;
    std::vector<Value> ops;
    ops.reserve(operands.size());
    for (const Slot& s : operands) ops.push_back(s.v);
    hooks_.on_mutate(op_, target.v, ops, base_ + op_pos_);
  }
  void append_to(Slot& target, std::vector<Slot>& items) {
    if (items.empty()) return;  // CPython's C unpickler: nothing to do
    mutating(target, items);
    auto k = target.v.kind();
    if (k != Value::Kind::kList && k != Value::Kind::kObject)
      fail(rules::kBadAppendTarget, fmt::format("{} target is a {}, not a list or object", opname(), kind_name(k)));
    changing(target, items);
    for (auto& s : items)
      if (s.info) s.info->placed = true;
    auto& vec = k == Value::Kind::kList ? target.v.as_list().items : target.v.as_object().list_items;
    for (auto& s : items) {
      adopt(*target.info, s);
      vec.push_back(std::move(s.v));
    }
  }
  // Before `items` go into `target`: a late change when target is placed or is one of
  // them (a list appended to itself).
  void changing(const Slot& target, const std::vector<Slot>& items) {
    if (late(target)) return;
    for (const auto& s : items)
      if (s.info && s.info == target.info) {
        late_ = true;
        late_nodes_.push_back(target.v);
        return;
      }
  }

  void setitems_on(Slot& target, std::vector<Slot>& items) {
    if (items.size() % 2)
      fail(rules::kOddSetItems, fmt::format("{} has an odd number of items ({})", opname(), items.size()));
    if (items.empty()) return;
    if (op_ == op::kSetItem || op_ == op::kSetItems) mutating(target, items);
    auto k = target.v.kind();
    if (k != Value::Kind::kDict && k != Value::Kind::kObject)
      fail(rules::kBadSetItemTarget, fmt::format("{} target is a {}, not a dict or object", opname(), kind_name(k)));
    changing(target, items);
    for (auto& s : items)
      if (s.info) s.info->placed = true;
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
    if (!info.keys) info.keys = std::make_unique<KeyIndex>(index_of(d.items));
    for (std::size_t i = 0; i < items.size(); i += 2) {
      adopt(info, items[i]);
      adopt(info, items[i + 1]);
      if (!dict_set(d.items, *info.keys, std::move(items[i].v), std::move(items[i + 1].v)))
        fail(rules::kUnhashableKey, fmt::format("{} key is an unhashable {}", opname(), kind_name(items[i].v.kind())));
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
      if (!set_add(set->items, *info->keys, std::move(s.v)))
        fail(rules::kUnhashableKey, fmt::format("{} item is an unhashable {}", opname(), kind_name(kind)));
    }
    return Slot{Value(std::move(set)), std::move(info)};
  }
  Slot make_dict(std::vector<Slot>& items) {
    auto info = new_node();
    Slot d{Value::dict(), std::move(info)};
    if (items.size() % 2)
      fail(rules::kOddSetItems, fmt::format("{} has an odd number of items ({})", opname(), items.size()));
    setitems_on(d, items);
    return d;
  }

  // BUILD: state merge rules (docs/formats/pickle.md "BUILD").
  void build(Slot& target, Slot state) {
    auto k = target.v.kind();
    if (k != Value::Kind::kObject && k != Value::Kind::kDict)
      fail(rules::kBadBuildTarget, fmt::format("BUILD target is a {}, not an object or dict", kind_name(k)));
    if (!late(target) && state.info && state.info == target.info) {
      late_ = true;
      late_nodes_.push_back(target.v);
    }
    if (state.info) state.info->placed = true;
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
        if (x.is(Value::Kind::kDict))
          parts.push_back(&x.as_dict());
        else if (!x.is_none())
          fail(rules::kBadBuildState, fmt::format("BUILD on a dict: state tuple holds a {}", kind_name(x.kind())));
      }
    } else if (!state.v.is_none()) {
      fail(rules::kBadBuildState,
           fmt::format("BUILD on a dict needs a dict of attributes, got a {}", kind_name(state.v.kind())));
    }
    for (const Dict* part : parts) d.attrs = merged(d.attrs.get(), *part);
  }
  // A new plain dict: a's items (a may be null) updated with b's.
  std::shared_ptr<Dict> merged(const Dict* a, const Dict& b) {
    auto d = std::make_shared<Dict>();
    KeyIndex index;
    if (a)
      for (const auto& [key, val] : a->items) dict_set(d->items, index, key, val);
    for (const auto& [key, val] : b.items)
      if (!dict_set(d->items, index, key, val))
        fail(rules::kUnhashableKey, fmt::format("BUILD state key is an unhashable {}", kind_name(key.kind())));
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
        fail(rules::kMaxMemo,
             fmt::format("{} would hold more than max_memo ({}) memo entries", opname(), lim_.max_memo));
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
    if (index < dense_.size())
      s = &dense_[index];
    else if (auto it = sparse_.find(index); it != sparse_.end())
      s = &it->second;
    if (!s) fail(rules::kMemoMissing, fmt::format("{} of memo index {}, which was never stored", opname(), index));
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
  std::uint64_t alloc_ = 0, ops_ = 0, puts_ = 0, gets_ = 0, frames_ = 0;
  bool late_ = false;                            // a placed node was changed: recorded heights/weights may be stale
  std::vector<Value> late_nodes_;                // the nodes so changed (cleared on failure: no leaked cycles)
  std::size_t left_stack_ = 0, left_marks_ = 0;  // what STOP left behind
  std::array<std::uint64_t, 256> counts_{};
  Parsed out_;
};

Parsed Vm::run() {
  while (!stopped_) {
    if (pos_ >= n_) {
      op_pos_ = pos_;
      if (n_ < full_)
        fail(rules::kMaxBytes,
             fmt::format("no STOP within the max_pickle_bytes limit of {} bytes", lim_.max_pickle_bytes));
      fail(rules::kTruncated, fmt::format("stream ends without STOP after {} bytes", pos_));
    }
    op_pos_ = pos_;
    op_ = p_[pos_++];
    if (++ops_ > lim_.max_pickle_ops)
      fail(rules::kMaxOps, fmt::format("more than max_pickle_ops ({}) opcodes", lim_.max_pickle_ops));
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
      if (v > kHighestProtocol) fail(rules::kUnsupportedProtocol, fmt::format("PROTO {} is above protocol 5", v));
      proto_ = v;
      return;
    }
    case op::kFrame: {
      std::uint64_t len = u64();
      // CPython's C unpickler only requires the frame's bytes to be present.
      if (len > full_ - pos_)
        fail(rules::kTruncated, fmt::format("FRAME of {} bytes, only {} remain", len, full_ - pos_));
      ++frames_;
      return;
    }
    case op::kStop: {
      Slot s = pop();
      out_.value = std::move(s.v);
      stopped_ = true;
      left_stack_ = stack_.size();
      left_marks_ = marks_.size();
      if (late_) {  // untangle from the root, then drop what only the machine held
        const auto reached = untangle(out_.value);
        for (Value& v : late_nodes_)
          if (!reached.count(v.node())) clear_node(v);
        late_nodes_.clear();
        stack_.clear();
        dense_.clear();
        sparse_.clear();
      }
      return;
    }
    // ---- stack manipulation ----
    case op::kMark:
      if (marks_.size() >= lim_.max_depth)
        fail(rules::kMaxDepth, fmt::format("MARK nesting exceeds max_depth ({})", lim_.max_depth));
      if (stack_.size() + marks_.size() >= lim_.max_stack)
        fail(rules::kMaxStack,
             fmt::format("stack holds {} entries, the max_stack limit", stack_.size() + marks_.size()));
      marks_.push_back(stack_.size());
      return;
    case op::kPop:
      // C unpickler: POP right after MARK discards the mark.
      if (!marks_.empty() && marks_.back() == stack_.size()) {
        marks_.pop_back();
        return;
      }
      pop();
      return;
    case op::kPopMark:
      pop_mark();
      return;
    case op::kDup: {
      Slot s = top();
      push(std::move(s));
      return;
    }
    // ---- memo ----
    case op::kPut:
      memo_put(parse_memo_index(line()));
      return;
    case op::kBinPut:
      memo_put(u8());
      return;
    case op::kLongBinPut:
      memo_put(u32());
      return;
    case op::kMemoize:
      memo_put(memo_size());
      return;
    case op::kGet:
      memo_get(parse_memo_index(line()));
      return;
    case op::kBinGet:
      memo_get(u8());
      return;
    case op::kLongBinGet:
      memo_get(u32());
      return;
    // ---- scalars ----
    case op::kNone:
      push_leaf(Value());
      return;
    case op::kNewTrue:
      push_leaf(Value(true));
      return;
    case op::kNewFalse:
      push_leaf(Value(false));
      return;
    case op::kInt: {
      std::string_view s = line();
      if (s == "00")
        push_leaf(Value(false));
      else if (s == "01")
        push_leaf(Value(true));
      else
        push_leaf(parse_decimal(s));
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
    case op::kBinInt:
      push_leaf(Value(std::int64_t{i32()}));
      return;
    case op::kBinInt1:
      push_leaf(Value(std::int64_t{u8()}));
      return;
    case op::kBinInt2:
      push_leaf(Value(std::int64_t{u16()}));
      return;
    case op::kLong1: {
      std::uint8_t n = u8();
      push_leaf(long_from_le(bytes(n)));
      return;
    }
    case op::kLong4: {
      std::int32_t n = i32();
      if (n < 0) fail(rules::kNegativeLength, fmt::format("LONG4 byte count {} is negative", n));
      if (static_cast<std::uint64_t>(n) > kMaxLongBytes)
        fail(rules::kLongTooLarge, fmt::format("LONG4 of {} bytes is over {}", n, kMaxLongBytes));
      charge(static_cast<std::uint64_t>(n));
      push_leaf(long_from_le(bytes(static_cast<std::uint64_t>(n))));
      return;
    }
    case op::kFloat:
      push_leaf(Value(parse_float(line())));
      return;
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
      push(make_py2_str(located(escape_decode, s.substr(1, s.size() - 2))));
      return;
    }
    case op::kBinString: {
      std::int32_t n = i32();
      if (n < 0) fail(rules::kNegativeLength, fmt::format("BINSTRING byte count {} is negative", n));
      std::string_view d = bytes(static_cast<std::uint64_t>(n));
      push(make_py2_str(d));
      return;
    }
    case op::kShortBinString:
      push(make_py2_str(bytes(u8())));
      return;
    case op::kUnicode: {
      std::string s = located(raw_unicode_escape_decode, line());
      check_string(s.size());
      charge(kSlotCost + s.size());
      push_leaf(Value::str(std::move(s)));
      return;
    }
    case op::kShortBinUnicode:
      push(make_str(bytes(u8())));
      return;
    case op::kBinUnicode:
    case op::kBinUnicode8: {
      std::uint64_t n = op_ == op::kBinUnicode ? u32() : u64();
      std::string_view d = bytes(n);
      push(make_str(d));
      return;
    }
    case op::kShortBinBytes:
      push(make_bytes(bytes(u8()), false));
      return;
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
      fail(rules::kOutOfBandBuffer,
           fmt::format("{}: out-of-band buffers (pickle protocol 5 buffer_callback) are not supported", opname()));
    // ---- containers ----
    case op::kEmptyList:
      push(Slot{Value::list(), new_node()});
      return;
    case op::kEmptyDict:
      push(Slot{Value::dict(), new_node()});
      return;
    case op::kEmptyTuple:
      push(Slot{Value::tuple(), new_node()});
      return;
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
      for (auto& s : items) {
        adopt(*info, s);
        l->items.push_back(std::move(s.v));
      }
      push(Slot{Value(std::move(l)), std::move(info)});
      return;
    }
    case op::kTuple:
      push(make_tuple(pop_mark()));
      return;
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
        fail(rules::kBadAddItemsTarget,
             fmt::format("ADDITEMS target is a {}, not a set",
                         target.v.is(Value::Kind::kSet) ? "frozenset" : kind_name(target.v.kind())));
      changing(target, items);
      for (auto& s : items)
        if (s.info) s.info->placed = true;
      Set& set = target.v.as_set();
      if (!target.info->keys) target.info->keys = std::make_unique<KeyIndex>(index_of(set.items));
      for (auto& s : items) {
        adopt(*target.info, s);
        Value::Kind kind = s.v.kind();
        if (!set_add(set.items, *target.info->keys, std::move(s.v)))
          fail(rules::kUnhashableKey, fmt::format("ADDITEMS item is an unhashable {}", kind_name(kind)));
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
      if (!module.v.is(Value::Kind::kStr) || !name.v.is(Value::Kind::kStr)) {
        if (hooks_.on_global)
          hooks_.on_global(GlobalRef{std::string(kComputedModule),
                                     fmt::format("{}.{}", describe_operand(module.v), describe_operand(name.v)),
                                     fmt::format("{} @ {}", name_, base_ + op_pos_)});
        fail(rules::kStackGlobalOperands, fmt::format("STACK_GLOBAL needs two str operands, got {} and {}",
                                                      kind_name(module.v.kind()), kind_name(name.v.kind())));
      }
      push_leaf(make_global(module.v.as_str(), name.v.as_str()));
      return;
    }
    case op::kReduce: {
      need_stack(2);
      Slot args = pop();
      Slot callable = pop();
      if (!args.v.is(Value::Kind::kTuple))
        fail(rules::kArgsNotTuple, fmt::format("REDUCE arguments are a {}, not a tuple", kind_name(args.v.kind())));
      push_object(Construct::kReduce, std::move(callable), std::move(args), Slot{});
      return;
    }
    case op::kNewObj: {
      need_stack(2);
      Slot args = pop();
      Slot cls = pop();
      if (!args.v.is(Value::Kind::kTuple))
        fail(rules::kArgsNotTuple, fmt::format("NEWOBJ arguments are a {}, not a tuple", kind_name(args.v.kind())));
      push_object(Construct::kNewObj, std::move(cls), std::move(args), Slot{});
      return;
    }
    case op::kNewObjEx: {
      need_stack(3);
      Slot kwargs = pop();
      Slot args = pop();
      Slot cls = pop();
      if (!args.v.is(Value::Kind::kTuple))
        fail(rules::kArgsNotTuple, fmt::format("NEWOBJ_EX arguments are a {}, not a tuple", kind_name(args.v.kind())));
      if (!kwargs.v.is(Value::Kind::kDict))
        fail(rules::kKwargsNotDict,
             fmt::format("NEWOBJ_EX keyword arguments are a {}, not a dict", kind_name(kwargs.v.kind())));
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
      mutating(top(), {state});
      build(top(), std::move(state));
      return;
    }
    case op::kPersId: {
      // Without a persistent_load the stream fails here whatever the id, as in
      // pickle.load: do not scan for the newline (it may lie gigabytes away).
      if (!hooks_.persistent_load)
        fail(rules::kPersistentId, "PERSID references a persistent id but no persistent_load is set");
      std::string_view s = line();
      for (char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) fail(rules::kBadPersId, "PERSID argument is not ASCII");
      push(persistent(make_str(s)));
      return;
    }
    case op::kBinPersId:
      push(persistent(pop()));
      return;
    case op::kExt1:
    case op::kExt2:
    case op::kExt4: {
      std::int64_t code = op_ == op::kExt1 ? u8() : op_ == op::kExt2 ? u16() : i32();
      fail(rules::kExtensionCode,
           fmt::format("{} {}: extension codes (copyreg extension registry) are not supported", opname(), code));
    }
    default:
      fail(rules::kUnknownOpcode, fmt::format("unknown opcode 0x{:02x}", op_));
  }
}

void Vm::finish_facts() {
  out_.facts.push_back(core::fact(topics::kProtocol, name_, std::to_string(proto_)));
  out_.facts.push_back(core::fact(topics::kMemo, name_, fmt::format("puts={} gets={}", puts_, gets_)));
  std::vector<std::pair<std::string_view, std::uint64_t>> used;
  for (int c = 0; c < 256; ++c)
    if (counts_[c]) used.emplace_back(op_name(static_cast<std::uint8_t>(c)), counts_[c]);
  std::sort(used.begin(), used.end());
  std::string fp;
  for (const auto& [n, c] : used) {
    if (!fp.empty()) fp += ',';
    fmt::format_to(std::back_inserter(fp), "{}:{}", n, c);
  }
  out_.facts.push_back(core::fact(topics::kOpcodes, name_, std::move(fp)));
  if (frames_) out_.facts.push_back(core::fact(topics::kFrames, name_, fmt::format("count={}", frames_)));
  if (left_stack_ != 0 || left_marks_ != 0)
    out_.facts.push_back(
        core::fact(topics::kStopLeftover, name_, fmt::format("stack={} marks={}", left_stack_, left_marks_)));
}

}  // namespace

Parsed parse(std::span<const std::byte> data, const std::string& name, std::uint64_t base_offset, const Limits& limits,
             const Hooks& hooks) {
  Vm vm(data, name, base_offset, limits, hooks);
  return vm.run();
}

}  // namespace tensorseal::detail::pickle
