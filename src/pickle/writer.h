// Canonical pickle writer (protocol 2). The bytes depend only on the value tree:
//   - memo: every container/object/bytearray node gets BINPUT when first written and
//     BINGET when the same node appears again (identity comes from the tree, i.e.
//     from the source file's own sharing); str and bytes values and globals are
//     memoized by value (equal strings -> one memo entry); memo indices count up
//     from 0; helper objects CPython creates on the fly (the args tuple of a REDUCE,
//     the list inside set(list)) get a memo entry each, as in CPython;
//   - opcodes: always the same choice for the same value, the one CPython 3.11's
//     pickle.dumps(v, protocol=2) makes (shortest int form, BINUNICODE, EMPTY_DICT +
//     SETITEMS in batches of 1000, fix_imports names such as `__builtin__ set`...);
//   - bytes use _codecs.encode(str, 'latin1') as CPython's protocol 2 does.
// For values without Python identity subtleties the output equals CPython's bytes
// (pinned by tests). Tensors and storages are written by hooks (the torch layer
// decides their form). Spec: docs/formats/pickle.md "Canonical writer".
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "tensorseal/value.h"
#include "util/endian.h"
#include "util/ptr_map.h"

namespace tensorseal::detail::pickle {

class Writer {
 public:
  struct Hooks {
    // Each must push exactly one object. value() hands tensors and storages to the
    // hook without memoizing them: a hook memoizes by identity with begin_node/
    // end_node when it wants sharing kept (torch memoizes tensors, while it writes a
    // storage's persistent id again at every use).
    std::function<void(Writer&, const Tensor&)> tensor;
    std::function<void(Writer&, const Storage&)> storage;
  };
  explicit Writer(Hooks hooks);

  // Writes PROTO 2, the value, STOP. Call once.
  std::string finish(const Value& root);

  // Building blocks for hooks.
  void value(const Value& v);                                   // any value, memo rules above
  void global(std::string_view module, std::string_view name);  // memoized by name
  void mark();                                                  // MARK
  void tuple_from_mark();                                       // TUPLE + BINPUT (items since mark())
  // A tuple of n items, as CPython writes it: begin_tuple(n), write the n items,
  // end_tuple(n). Gives EMPTY_TUPLE, items + TUPLE1/2/3, or MARK items TUPLE; every
  // non-empty tuple gets BINPUT.
  void begin_tuple(std::size_t n);
  void end_tuple(std::size_t n);
  void tuple(std::span<const Value> items);  // the same with value() for each
  void tuple(std::size_t n);                 // after n <= 3 items: end_tuple(n)
  void reduce();                             // REDUCE
  void build();                              // BUILD
  void binpersid();                          // BINPERSID
  void newobj();                             // NEWOBJ
  void raw(std::string_view bytes);          // opcodes not covered above
  // Before writing a node: when `node` was written before, emits BINGET and returns
  // false (write nothing else); otherwise returns true.
  bool begin_node(const void* node);
  // After the node's object is on the stack: BINPUT, remembered under `node`.
  void end_node(const void* node);
  // BINPUT of the object on top of the stack without remembering it (CPython's
  // memoize() of a temporary).
  void put_anonymous() { put_memo(); }
  // A str value (UTF-8), with the memo rules of value(Value::str(utf8)), without
  // making the Value.
  void text(std::string_view utf8) { str(utf8); }

 private:
  std::uint32_t put_memo();
  void get_memo(std::uint32_t index);
  void str(std::string_view utf8);
  void binfloat(double d);
  void bytes(std::string_view data);
  void dict(const Value& v);
  void object(const Value& v);
  void appends(const std::vector<Value>& items);
  void setitems(const std::vector<std::pair<Value, Value>>& items);
  // A memo of values memoized by value, one per kind (strs_, bytes_, globals_: keyed
  // by the UTF-8, the bytes, "<module>\n<name>"; no key copied to look it up): the
  // keys in one buffer and an open-addressing table over them (a 10,000-tensor
  // state dict makes 20,000 distinct strs; a map node and a string each cost more than
  // writing them), and in front of it the few keys found most recently (a tensor
  // writes the same three globals and two strs: compared, not hashed).
  class ValueMemo {
   public:
    // The memo of `key`, or nullopt with `hash` set for insert (when found in the
    // table, the key becomes recent).
    std::optional<std::uint32_t> lookup(std::string_view key, std::uint64_t& hash);
    void insert(std::string_view key, std::uint64_t hash, std::uint32_t memo);  // `key` must be absent

   private:
    struct Slot {
      std::uint64_t hash = 0, offset = 0, size = 0;
      std::uint32_t memo = kEmpty;
    };
    static constexpr std::uint32_t kEmpty = 0xFFFFFFFF;
    static constexpr std::size_t kRecent = 8;
    std::size_t probe(std::string_view key, std::uint64_t hash) const;  // its slot, or the free slot for it
    std::string_view key_of(const Slot& s) const noexcept { return std::string_view(keys_).substr(s.offset, s.size); }
    std::string keys_;
    std::vector<Slot> slots_;
    std::size_t size_ = 0;
    Slot recent_[kRecent];         // copies of table slots (memo kEmpty: unused)
    std::size_t next_recent_ = 0;  // the one replaced next
  };
  // key_ = module + '\n' + name: a global's key in globals_ (a reused buffer).
  std::string_view global_key(std::string_view module, std::string_view name);

  // The pickle so far. Appends are inline: a tensor is about 60 opcode and argument
  // bytes, and std::string::push_back is an out-of-line call for each.
  class Out {
   public:
    void put(char c) {
      if (at_ == end_) grow(1);
      *at_++ = c;
    }
    void put(std::string_view s) {
      if (s.empty()) return;  // (at_ may be null)
      if (static_cast<std::size_t>(end_ - at_) < s.size()) grow(s.size());
      std::memcpy(at_, s.data(), s.size());
      at_ += s.size();
    }
    template <typename T>  // little-endian, as util::append_le
    void le(T v) {
      if constexpr (std::endian::native == std::endian::big) v = util::bswap(v);
      char b[sizeof v];
      std::memcpy(b, &v, sizeof v);
      put(std::string_view(b, sizeof v));
    }
    std::string take();  // the bytes put so far; leaves this empty

   private:
    void grow(std::size_t n);
    std::string buf_;  // sized to its capacity: [data, at_) is written
    char* at_ = nullptr;
    char* end_ = nullptr;
  };

  Hooks hooks_;
  Out out_;
  std::uint32_t next_memo_ = 0;
  std::uint32_t depth_ = 0;
  util::PtrMap<std::uint32_t> node_memo_;
  std::unordered_set<const void*> in_progress_;  // tuples, sets, objects whose items are being written
  ValueMemo strs_, bytes_, globals_;             // by value: str by UTF-8, bytes by content
  std::string key_;
};

}  // namespace tensorseal::detail::pickle
