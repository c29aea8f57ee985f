// Canonical pickle writer (protocol 2). The bytes depend only on the value tree:
//   - memo: every container/object/tensor node gets BINPUT when first written and
//     BINGET when the same node appears again (identity comes from the tree, i.e.
//     from the source file's own sharing); str values and globals are memoized by
//     value (equal strings -> one memo entry); memo indices count up from 0;
//   - opcodes: always the same choice for the same value (shortest int form, BINUNICODE,
//     EMPTY_DICT + SETITEMS in batches of 1000 like CPython, ...);
//   - bytes use _codecs.encode(str, 'latin1') as CPython's protocol 2 does.
// Tensors and storages are written by hooks (the torch layer decides their form).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "tensorseal/value.h"

namespace tensorseal::detail::pickle {

class Writer {
 public:
  struct Hooks {
    std::function<void(Writer&, const Tensor&)> tensor;    // must push exactly one object
    std::function<void(Writer&, const Storage&)> storage;  // must push exactly one object
  };
  explicit Writer(Hooks hooks);

  // Writes PROTO 2, the value, STOP. Call once.
  std::string finish(const Value& root);

  // Building blocks for hooks.
  void value(const Value& v);                      // any value, memo rules above
  void global(std::string_view module, std::string_view name);  // memoized by name
  void mark();
  void tuple_from_mark();                          // TUPLE (or TUPLE1..3 when short)
  void tuple(std::size_t n);                       // EMPTY_TUPLE/TUPLE1/2/3 or MARK..TUPLE
  void reduce();
  void build();
  void binpersid();
  void newobj();
  void raw(std::string_view bytes);                // opcodes not covered above
  // Memoizes the object on top of the stack under `node` (identity) and returns true,
  // or, when `node` was written before, emits BINGET and returns false.
  bool begin_node(const void* node);
  void end_node(const void* node);

 private:
  void put_memo();
  void get_memo(std::uint32_t index);
  Hooks hooks_;
  std::string out_;
  std::uint32_t next_memo_ = 0;
  std::unordered_map<const void*, std::uint32_t> node_memo_;
  std::unordered_map<std::string, std::uint32_t> value_memo_;  // "s<str>" / "g<mod>\n<name>"
};

}  // namespace tensorseal::detail::pickle
