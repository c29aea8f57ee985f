// Canonical pickle writer, protocol 2. Grammar of what it emits per value kind
// (docs/formats/pickle.md "Canonical writer"; CPython 3.11 pickle.py for each form):
//
//   None       NONE                      bool   NEWTRUE | NEWFALSE
//   int        BININT1 (0..255) | BININT2 (..65535) | BININT (int32) | LONG1 | LONG4
//   float      BINFLOAT (big-endian)     str    BINUNICODE u32 len, UTF-8; BINPUT
//   complex    GLOBAL '__builtin__ complex' BINFLOAT real BINFLOAT imag TUPLE2 BINPUT
//              REDUCE BINPUT (complex.__reduce__; never shared: a value, like float)
//   bytes      GLOBAL '_codecs encode' (str latin-1, 'latin1') TUPLE2 REDUCE; BINPUT
//              b'' -> GLOBAL '__builtin__ bytes' EMPTY_TUPLE REDUCE; BINPUT
//   bytearray  GLOBAL '__builtin__ bytearray' (bytes,) TUPLE1 REDUCE | EMPTY_TUPLE REDUCE
//   list       EMPTY_LIST BINPUT appends          appends = batches of 1000:
//   tuple      EMPTY_TUPLE | items TUPLE1..3 BINPUT | MARK items TUPLE BINPUT
//   dict       EMPTY_DICT BINPUT setitems [attrs BUILD]     (MARK .. APPENDS | x APPEND)
//   OrderedDict GLOBAL 'collections OrderedDict' EMPTY_TUPLE REDUCE BINPUT setitems [attrs BUILD]
//   Counter    GLOBAL 'collections Counter' EMPTY_DICT BINPUT setitems TUPLE1 BINPUT REDUCE BINPUT
//   set        GLOBAL '__builtin__ set|frozenset' EMPTY_LIST BINPUT appends TUPLE1 BINPUT REDUCE BINPUT
//   global     GLOBAL 'module name' BINPUT (fix_imports names; dotted names via getattr)
//   object     callable args REDUCE|NEWOBJ|NEWOBJ_EX BINPUT, or MARK args INST/OBJ BINPUT,
//              then appends(list_items) setitems(dict_items) [state BUILD]
//   repeated node/str/bytes/global: BINGET | LONG_BINGET
#include "pickle/writer.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "pickle/compat.h"
#include "pickle/constants.h"
#include "pickle/longs.h"
#include "pickle/opcodes.h"
#include "util/endian.h"
#include "util/text.h"
#include "util/utf8.h"

namespace tensorseal::detail::pickle {

namespace {

[[noreturn]] void fail(const Rule& rule, std::string detail) {
  throw Error(rule, std::move(detail), "<pickle writer>");
}

template <typename Out>
void emit(Out& out, std::uint8_t code) {
  out.put(static_cast<char>(code));
}

// The opcode closing a tuple of `n` items whose items are on the stack: TUPLE1-3 for
// 1-3 (no MARK), else TUPLE (after a MARK), as CPython's save_tuple writes them.
std::uint8_t tuple_op(std::size_t n) {
  constexpr std::uint8_t kSmall[] = {op::kTuple, op::kTuple1, op::kTuple2, op::kTuple3};
  return n <= 3 ? kSmall[n] : op::kTuple;
}

struct DepthGuard {
  std::uint32_t& d;
  explicit DepthGuard(std::uint32_t& depth) : d(depth) {
    if (++d > kMaxWriteDepth)
      fail(rules::kWriteTooDeep,
           fmt::format("value tree is nested deeper than {} levels (or is recursive)", kMaxWriteDepth));
  }
  ~DepthGuard() { --d; }
};

}  // namespace

Writer::Writer(Hooks hooks) : hooks_(std::move(hooks)) {}

std::string Writer::Out::take() {
  buf_.resize(at_ == nullptr ? 0 : static_cast<std::size_t>(at_ - buf_.data()));
  at_ = end_ = nullptr;
  return std::move(buf_);
}

void Writer::Out::grow(std::size_t n) {
  const std::size_t used = at_ == nullptr ? 0 : static_cast<std::size_t>(at_ - buf_.data());
  buf_.resize(std::max({buf_.size() * 2, used + n, std::size_t{4096}}));
  at_ = buf_.data() + used;
  end_ = buf_.data() + buf_.size();
}

std::string Writer::finish(const Value& root) {
  const std::string before = out_.take();  // (nothing, unless a caller wrote blocks first)
  emit(out_, op::kProto);
  out_.put(static_cast<char>(kWriterProtocol));
  out_.put(before);
  value(root);
  emit(out_, op::kStop);
  return out_.take();
}

// ---- memo ---------------------------------------------------------------------------

std::uint32_t Writer::put_memo() {
  std::uint32_t i = next_memo_++;
  if (i < 256) {
    emit(out_, op::kBinPut);
    out_.put(static_cast<char>(i));
  } else {
    emit(out_, op::kLongBinPut);
    out_.le<std::uint32_t>(i);
  }
  return i;
}

void Writer::get_memo(std::uint32_t i) {
  if (i < 256) {
    emit(out_, op::kBinGet);
    out_.put(static_cast<char>(i));
  } else {
    emit(out_, op::kLongBinGet);
    out_.le<std::uint32_t>(i);
  }
}

bool Writer::begin_node(const void* node) {
  const std::uint32_t* known = node_memo_.find(node);
  if (known == nullptr) return true;
  get_memo(*known);
  return false;
}

void Writer::end_node(const void* node) { node_memo_.assign(node, put_memo()); }

std::size_t Writer::ValueMemo::probe(std::string_view key, std::uint64_t hash) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = static_cast<std::size_t>(hash) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.memo == kEmpty) return i;
    if (s.hash == hash && s.size == key.size() && key_of(s) == key) return i;
  }
}

std::optional<std::uint32_t> Writer::ValueMemo::lookup(std::string_view key, std::uint64_t& hash) {
  for (const Slot& r : recent_)
    if (r.size == key.size() && r.memo != kEmpty && key_of(r) == key) return r.memo;
  hash = XXH3_64bits(key.data(), key.size());
  if (slots_.empty()) return std::nullopt;
  const Slot& s = slots_[probe(key, hash)];
  if (s.memo == kEmpty) return std::nullopt;
  recent_[next_recent_] = s;
  next_recent_ = (next_recent_ + 1) % kRecent;
  return s.memo;
}

void Writer::ValueMemo::insert(std::string_view key, std::uint64_t hash, std::uint32_t memo) {
  if ((size_ + 1) * 4 > slots_.size() * 3) {
    std::vector<Slot> old(std::max<std::size_t>(64, slots_.size() * 2));
    old.swap(slots_);
    const std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.memo == kEmpty) continue;
      std::size_t i = static_cast<std::size_t>(s.hash) & mask;
      while (slots_[i].memo != kEmpty) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  Slot& s = slots_[probe(key, hash)];
  s = Slot{hash, keys_.size(), key.size(), memo};
  keys_ += key;
  ++size_;
}

std::string_view Writer::global_key(std::string_view module, std::string_view name) {
  key_.clear();
  key_ += module;
  key_ += '\n';
  key_ += name;
  return key_;
}

// ---- building blocks ------------------------------------------------------------------

void Writer::mark() { emit(out_, op::kMark); }
void Writer::tuple_from_mark() {
  emit(out_, op::kTuple);
  put_memo();
}
void Writer::begin_tuple(std::size_t n) {
  if (n > 3) mark();
}
void Writer::end_tuple(std::size_t n) {
  if (n == 0) {
    emit(out_, op::kEmptyTuple);
    return;  // CPython does not memoize ()
  }
  emit(out_, tuple_op(n));
  put_memo();
}
void Writer::tuple(std::span<const Value> items) {
  begin_tuple(items.size());
  for (const Value& v : items) value(v);
  end_tuple(items.size());
}
void Writer::tuple(std::size_t n) {
  if (n > 3) fail(rules::kWriteBadValue, "tuple(n) after the items needs n <= 3; use begin_tuple/end_tuple");
  end_tuple(n);
}
void Writer::reduce() { emit(out_, op::kReduce); }
void Writer::binfloat(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  emit(out_, op::kBinFloat);
  for (int i = 7; i >= 0; --i) out_.put(static_cast<char>((u >> (8 * i)) & 0xFF));
}
void Writer::build() { emit(out_, op::kBuild); }
void Writer::binpersid() { emit(out_, op::kBinPersId); }
void Writer::newobj() { emit(out_, op::kNewObj); }
void Writer::raw(std::string_view bytes) { out_.put(bytes); }

void Writer::global(std::string_view module, std::string_view name) {
  std::uint64_t hash = 0;
  if (const auto known = globals_.lookup(global_key(module, name), hash)) {
    get_memo(*known);
    return;
  }
  if (auto dot = name.rfind('.'); dot != std::string_view::npos) {
    // Protocol < 4 cannot name nested attributes: CPython writes getattr(parent, last).
    global("builtins", "getattr");
    global(module, name.substr(0, dot));
    str(name.substr(dot + 1));
    end_tuple(2);
    reduce();
  } else {
    auto [m, n] = py3_to_py2_name(module, name);
    for (std::string_view part : {std::string_view(m), std::string_view(n)})
      if (part.empty() || std::any_of(part.begin(), part.end(),
                                      [](char c) { return static_cast<unsigned char>(c) >= 0x80 || c == '\n'; }))
        fail(rules::kWriteGlobalName, "global '" + std::string(module) + "." + std::string(name) +
                                          "' cannot be written at protocol 2 (needs non-empty ASCII names "
                                          "without newlines)");
    emit(out_, op::kGlobal);
    out_.put(m);
    out_.put('\n');
    out_.put(n);
    out_.put('\n');
  }
  const std::uint32_t memo = put_memo();
  globals_.insert(global_key(module, name), hash, memo);  // (the parts above reused key_)
}

void Writer::str(std::string_view utf8) {
  std::uint64_t hash = 0;
  if (const auto known = strs_.lookup(utf8, hash)) {
    get_memo(*known);
    return;
  }
  if (util::first_invalid_utf8(utf8)) fail(rules::kWriteBadValue, "str value is not valid UTF-8");
  if (utf8.size() > 0xFFFFFFFFull)
    fail(rules::kWriteTooLarge, fmt::format("str of {} bytes does not fit BINUNICODE", utf8.size()));
  emit(out_, op::kBinUnicode);
  out_.le<std::uint32_t>(static_cast<std::uint32_t>(utf8.size()));
  out_.put(utf8);
  const std::uint32_t memo = put_memo();
  strs_.insert(utf8, hash, memo);
}

void Writer::bytes(std::string_view data) {
  std::uint64_t hash = 0;
  if (const auto known = bytes_.lookup(data, hash)) {
    get_memo(*known);
    return;
  }
  if (data.empty()) {
    global("builtins", "bytes");
    end_tuple(0);
  } else {
    global("_codecs", "encode");
    str(util::latin1_decode(data));
    str("latin1");
    end_tuple(2);
  }
  reduce();
  const std::uint32_t memo = put_memo();
  bytes_.insert(data, hash, memo);
}

void Writer::appends(const std::vector<Value>& items) {
  for (std::size_t i = 0; i < items.size(); i += kBatchSize) {
    std::size_t n = std::min(kBatchSize, items.size() - i);
    if (n > 1) {
      mark();
      for (std::size_t k = 0; k < n; ++k) value(items[i + k]);
      emit(out_, op::kAppends);
    } else {
      value(items[i]);
      emit(out_, op::kAppend);
    }
  }
}

void Writer::setitems(const std::vector<std::pair<Value, Value>>& items) {
  for (std::size_t i = 0; i < items.size(); i += kBatchSize) {
    std::size_t n = std::min(kBatchSize, items.size() - i);
    if (n > 1) {
      mark();
      for (std::size_t k = 0; k < n; ++k) {
        value(items[i + k].first);
        value(items[i + k].second);
      }
      emit(out_, op::kSetItems);
    } else {
      value(items[i].first);
      value(items[i].second);
      emit(out_, op::kSetItem);
    }
  }
}

void Writer::dict(const Value& v) {
  const Dict& d = v.as_dict();
  if (!begin_node(v.node())) return;
  switch (d.kind) {
    case DictKind::kDict:
      emit(out_, op::kEmptyDict);
      end_node(v.node());
      setitems(d.items);
      break;
    case DictKind::kOrderedDict:
      // OrderedDict.__reduce__: (OrderedDict, (), state or None, None, iter(items)).
      global("collections", "OrderedDict");
      end_tuple(0);
      reduce();
      end_node(v.node());
      setitems(d.items);
      break;
    case DictKind::kCounter:
      // Counter.__reduce__: (Counter, (dict(self),)).
      global("collections", "Counter");
      emit(out_, op::kEmptyDict);
      put_memo();
      setitems(d.items);
      end_tuple(1);
      reduce();
      end_node(v.node());
      break;
  }
  // Attributes (OrderedDict's _metadata): BUILD with the instance dict, as
  // save_reduce does with `state`. CPython's Counter drops them; tensorseal keeps them.
  if (d.attrs && !d.attrs->items.empty()) {
    value(Value(d.attrs));
    build();
  }
}

void Writer::object(const Value& v) {
  const Object& o = v.as_object();
  if (!begin_node(v.node())) return;
  in_progress_.insert(v.node());
  if (!o.callable) fail(rules::kWriteBadValue, "object without a callable");
  static const Value kEmptyArgs = Value::tuple();
  const Value& args = o.args ? *o.args : kEmptyArgs;
  if (!args.is(Value::Kind::kTuple)) fail(rules::kWriteBadValue, "object arguments are not a tuple");
  const Value& callable = *o.callable;
  Construct how = o.how;
  if (how == Construct::kInst && !callable.is(Value::Kind::kGlobal)) how = Construct::kReduce;
  switch (how) {
    case Construct::kReduce:
      value(callable);
      value(args);
      reduce();
      break;
    case Construct::kNewObj:
      value(callable);
      value(args);
      newobj();
      break;
    case Construct::kNewObjEx:
      // Protocol 2 has no NEWOBJ_EX; CPython would go through functools.partial. The
      // opcode is written as is (every unpickler accepts any opcode at any protocol).
      value(callable);
      value(args);
      if (o.kwargs) {
        value(*o.kwargs);
      } else {  // no node to memoize under: a temporary's address could be reused
        emit(out_, op::kEmptyDict);
        put_memo();
      }
      emit(out_, op::kNewObjEx);
      break;
    case Construct::kInst: {
      mark();
      for (const Value& a : args.items()) value(a);
      const Global& g = callable.as_global();
      auto [m, n] = py3_to_py2_name(g.module, g.name);
      emit(out_, op::kInst);
      out_.put(m);
      out_.put('\n');
      out_.put(n);
      out_.put('\n');
      break;
    }
    case Construct::kObj:
      mark();
      value(callable);
      for (const Value& a : args.items()) value(a);
      emit(out_, op::kObj);
      break;
  }
  end_node(v.node());
  in_progress_.erase(v.node());
  appends(o.list_items);
  setitems(o.dict_items);
  if (o.state) {
    value(*o.state);
    build();
  }
}

void Writer::value(const Value& v) {
  DepthGuard guard(depth_);
  using K = Value::Kind;
  switch (v.kind()) {
    case K::kNone:
      emit(out_, op::kNone);
      return;
    case K::kBool:
      emit(out_, v.as_bool() ? op::kNewTrue : op::kNewFalse);
      return;
    case K::kInt: {
      std::int64_t i = v.as_int();
      if (i >= 0 && i <= 0xFF) {
        emit(out_, op::kBinInt1);
        out_.put(static_cast<char>(i));
      } else if (i >= 0 && i <= 0xFFFF) {
        emit(out_, op::kBinInt2);
        out_.le<std::uint16_t>(static_cast<std::uint16_t>(i));
      } else if (i >= INT32_MIN && i <= INT32_MAX) {
        emit(out_, op::kBinInt);
        out_.le<std::int32_t>(static_cast<std::int32_t>(i));
      } else {
        std::string le = le_from_int64(i);
        emit(out_, op::kLong1);
        out_.put(static_cast<char>(le.size()));
        out_.put(le);
      }
      return;
    }
    case K::kBigInt: {
      const std::string& le = v.as_bigint().le_bytes;
      if (le.size() < 256) {
        emit(out_, op::kLong1);
        out_.put(static_cast<char>(le.size()));
      } else {
        if (le.size() > 0x7FFFFFFF) fail(rules::kWriteTooLarge, "integer too large for LONG4");
        emit(out_, op::kLong4);
        out_.le<std::int32_t>(static_cast<std::int32_t>(le.size()));
      }
      out_.put(le);
      return;
    }
    case K::kFloat:
      binfloat(v.as_float());
      return;
    case K::kComplex: {
      const Complex c = v.as_complex();
      global("builtins", "complex");
      binfloat(c.real);
      binfloat(c.imag);
      end_tuple(2);
      reduce();
      put_memo();
      return;
    }
    case K::kStr:
      str(v.as_str());
      return;
    case K::kBytes:
      if (!v.is_bytearray()) {
        bytes(v.as_bytes());
        return;
      }
      // save_bytearray (protocol < 5): bytearray() or bytearray(bytes(obj)).
      if (!begin_node(v.node())) return;
      global("builtins", "bytearray");
      if (v.as_bytes().empty()) {
        end_tuple(0);
      } else {
        bytes(v.as_bytes());
        end_tuple(1);
      }
      reduce();
      end_node(v.node());
      return;
    case K::kList:
      if (!begin_node(v.node())) return;
      emit(out_, op::kEmptyList);
      end_node(v.node());
      appends(v.items());
      return;
    case K::kTuple: {
      const auto& items = v.items();
      if (items.empty()) {
        end_tuple(0);
        return;
      }
      if (!begin_node(v.node())) return;
      const bool outer = in_progress_.insert(v.node()).second;
      begin_tuple(items.size());
      for (const Value& x : items) value(x);
      if (outer) in_progress_.erase(v.node());
      if (const std::uint32_t* known = node_memo_.find(v.node()); outer && known != nullptr) {
        // A Ref inside the items wrote this tuple already (CPython's save_tuple for a
        // recursive tuple): drop the items and fetch that one.
        if (items.size() <= 3) {
          for (std::size_t i = 0; i < items.size(); ++i) emit(out_, op::kPop);
        } else {
          emit(out_, op::kPopMark);
        }
        get_memo(*known);
        return;
      }
      emit(out_, tuple_op(items.size()));
      end_node(v.node());
      return;
    }
    case K::kDict:
      dict(v);
      return;
    case K::kSet: {
      // save_set / save_frozenset (protocol < 4): set(list(obj)) via REDUCE.
      if (!begin_node(v.node())) return;
      in_progress_.insert(v.node());
      global("builtins", v.as_set().frozen ? "frozenset" : "set");
      emit(out_, op::kEmptyList);
      put_memo();
      appends(v.as_set().items);
      end_tuple(1);
      reduce();
      end_node(v.node());
      in_progress_.erase(v.node());
      return;
    }
    case K::kTensor:
      if (!hooks_.tensor) fail(rules::kWriteNoHook, "a tensor needs Writer::Hooks::tensor (the torch layer)");
      hooks_.tensor(*this, *v.as_tensor());
      return;
    case K::kStorage:
      if (!hooks_.storage) fail(rules::kWriteNoHook, "a storage needs Writer::Hooks::storage (the torch layer)");
      hooks_.storage(*this, *v.as_storage());
      return;
    case K::kGlobal:
      global(v.as_global().module, v.as_global().name);
      return;
    case K::kObject:
      object(v);
      return;
    case K::kRef: {
      // An edge back to an enclosing node: BINGET once it is memoized. Lists, dicts and
      // objects are memoized before their items and state; a tuple is written again
      // from its (memoized) items, as CPython does.
      if (const std::uint32_t* known = node_memo_.find(v.node())) {
        get_memo(*known);
        return;
      }
      const Value target = v.ref_target();
      if (target.is_none()) fail(rules::kWriteBadValue, "a recursive reference whose target no longer exists");
      if (!target.is(K::kTuple) && in_progress_.count(v.node()))
        fail(rules::kWriteBadValue,
             "a recursive reference into a set's items or an object's constructor arguments "
             "(pickle cannot express it)");
      value(target);
      return;
    }
  }
}

}  // namespace tensorseal::detail::pickle
