// tensorseal/value.h — the value tree: what a checkpoint holds.
//
// Readers produce a Value, writers consume one, and every tool (hash, diff, explain,
// canon, scan) works on it. It can represent anything a pickle can hold without
// executing it: plain Python values, containers, tensors and storages as typed leaves,
// and "opaque" objects — a callable (usually a Global: module + name, never imported)
// applied to arguments, plus the state and items pickle would have set on the result.
//
// Containers are reference nodes (shared_ptr): copying a Value shares the node, which
// is how one object referenced twice (pickle's memo) stays one object.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tensorseal/export.h"
#include "tensorseal/storage.h"
#include "tensorseal/tensor.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

class Value;

// An integer that does not fit in int64: two's complement, little-endian, minimal
// length (as pickle's LONG1). Invariant: never holds a value that fits in int64.
struct BigInt {
  std::string le_bytes;
  std::string to_decimal() const;
};

enum class DictKind : std::uint8_t { kDict, kOrderedDict, kCounter };

struct List {
  std::vector<Value> items;
};
struct Tuple {
  std::vector<Value> items;
};
struct Set {
  std::vector<Value> items;
  bool frozen = false;
};
// Keys follow Python dict semantics: True, 1 and 1.0 are one key, as are -0.0, 0 and
// False; NaN equals no key; tuples and frozensets compare by their items; objects,
// tensors and storages by node. Unhashable keys (lists, dicts...) compare with equal().
// Items may also be appended to `items` directly; keys must not be edited in place.
//
// Thread safety: find() may be called from any number of threads at once on a Dict
// that no thread modifies (its lookup index is built under an internal mutex). set(),
// and any change to `items`, need exclusive access. Copies and moves get their own
// index.
struct Dict {
  DictKind kind = DictKind::kDict;
  std::vector<std::pair<Value, Value>> items;  // insertion order, keys unique
  // Attributes pickle's BUILD set on the dict object (OrderedDict's `_metadata`), or
  // empty. Stored as a Dict of name -> value.
  std::shared_ptr<Dict> attrs;

  Dict();
  Dict(const Dict& other);
  Dict(Dict&& other) noexcept;
  Dict& operator=(const Dict& other);
  Dict& operator=(Dict&& other) noexcept;
  ~Dict();

  // Inserts or replaces the value (the first key object stays, as in Python).
  // Amortised O(1) for hashable keys.
  void set(Value key, Value value);
  // The value stored under `key`, or null.
  const Value* find(const Value& key) const;
  const Value* find(std::string_view str_key) const;

 private:
  struct Index;
  const Value* find_hashable(const std::string& encoded) const;
  mutable std::mutex index_mutex_;
  mutable std::unique_ptr<Index> index_;  // guarded by index_mutex_
};
// A reference to a global name (class, function, dtype...). Never resolved.
struct Global {
  std::string module, name;
};
// How an opaque object came to be. Kept so writers can re-emit it faithfully.
enum class Construct : std::uint8_t { kReduce, kNewObj, kNewObjEx, kInst, kObj };
struct Object {
  std::shared_ptr<Value> callable;  // usually a Global
  std::shared_ptr<Value> args;      // a Tuple
  std::shared_ptr<Value> kwargs;    // a Dict, for NEWOBJ_EX; else null
  Construct how = Construct::kReduce;
  std::shared_ptr<Value> state;                     // BUILD argument; null when never built
  std::vector<Value> list_items;                    // APPEND(S) applied to the object
  std::vector<std::pair<Value, Value>> dict_items;  // SETITEM(S) applied to the object
};
struct Str {
  std::shared_ptr<const std::string> utf8;
};
struct Bytes {
  std::shared_ptr<const std::string> data;
  bool bytearray = false;
};
struct None {};
// A Python complex number (builtins.complex): two binary64 parts, compared and hashed
// by their bits like floats. Pickles spell it REDUCE(builtins.complex, (real, imag)).
struct Complex {
  double real = 0.0, imag = 0.0;
};
// A reference back to a container or object that encloses it: how a recursive object
// graph (a list holding itself, an OmegaConf node's `_parent`, `child.parent = self`)
// is held without a reference cycle. The reference is weak: the target is owned by the
// tree above (readers guarantee it stays reachable from the root through ordinary
// edges), so walkers treat a Ref as a leaf and never loop. Its meaning is the edge to
// the target node, exactly as if the target itself were there.
struct Ref {
  std::variant<std::weak_ptr<List>, std::weak_ptr<Tuple>, std::weak_ptr<Dict>, std::weak_ptr<Set>,
               std::weak_ptr<Object>>
      target;
  const void* node = nullptr;  // the target's identity (Value::node() of the target)
};

class Value {
 public:
  enum class Kind : std::uint8_t {
    kNone,
    kBool,
    kInt,
    kBigInt,
    kFloat,
    kStr,
    kBytes,
    kList,
    kTuple,
    kDict,
    kSet,
    kTensor,
    kStorage,
    kGlobal,
    kObject,
    kComplex,
    kRef,  // last: the kinds before it keep their numbers
  };

  Value() = default;  // None
  Value(bool b) : v_(b) {}
  Value(const char*) = delete;  // would silently become a bool; use Value::str()
  template <typename T>
  Value(T*) = delete;  // no pointer (or function) may become a bool either
  Value(std::int64_t i) : v_(i) {}
  Value(int i) : v_(std::int64_t{i}) {}
  Value(double d) : v_(d) {}
  Value(Complex c) : v_(c) {}
  Value(BigInt b);  // normalises: values that fit become plain ints
  Value(std::shared_ptr<List> p) : v_(std::move(p)) {}
  Value(std::shared_ptr<Tuple> p) : v_(std::move(p)) {}
  Value(std::shared_ptr<Dict> p) : v_(std::move(p)) {}
  Value(std::shared_ptr<Set> p) : v_(std::move(p)) {}
  Value(std::shared_ptr<const Tensor> p) : v_(std::move(p)) {}
  Value(std::shared_ptr<Tensor> p) : v_(std::shared_ptr<const Tensor>(std::move(p))) {}
  Value(std::shared_ptr<const Storage> p) : v_(std::move(p)) {}
  Value(std::shared_ptr<Storage> p) : v_(std::shared_ptr<const Storage>(std::move(p))) {}
  Value(std::shared_ptr<Global> p) : v_(std::move(p)) {}
  Value(std::shared_ptr<Object> p) : v_(std::move(p)) {}
  Value(Ref r) : v_(std::move(r)) {}
  // A Ref to the node of `target` (a list, tuple, dict, set or object).
  static Value ref_to(const Value& target);

  static Value str(std::string s);
  static Value bytes(std::string b, bool bytearray = false);
  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items = {});
  static Value dict(DictKind kind = DictKind::kDict);
  static Value global(std::string module, std::string name);

  Kind kind() const noexcept { return static_cast<Kind>(v_.index()); }
  bool is(Kind k) const noexcept { return kind() == k; }
  bool is_none() const noexcept { return kind() == Kind::kNone; }

  // Accessors: throw Error{rules::kInternal} when the kind does not match.
  bool as_bool() const;
  std::int64_t as_int() const;
  const BigInt& as_bigint() const;
  double as_float() const;
  Complex as_complex() const;
  std::string_view as_str() const;
  std::string_view as_bytes() const;
  bool is_bytearray() const;
  // Containers and objects: a const Value gives read-only access to its node, so a
  // reader of a shared tree cannot mutate it through a `const Value&`. The node itself
  // is shared (copies of a Value are handles to it); mutation needs a non-const Value.
  const List& as_list() const;
  List& as_list();
  const Tuple& as_tuple() const;
  Tuple& as_tuple();
  const Dict& as_dict() const;
  Dict& as_dict();
  const Set& as_set() const;
  Set& as_set();
  const std::shared_ptr<const Tensor>& as_tensor() const;
  const std::shared_ptr<const Storage>& as_storage() const;
  const Global& as_global() const;
  Global& as_global();
  const Object& as_object() const;
  Object& as_object();
  const Ref& as_ref() const;
  // The node a Ref points to, as a Value (null Value when it no longer exists).
  Value ref_target() const;
  // Items of a list or tuple.
  const std::vector<Value>& items() const;
  std::vector<Value>& items();
  // Identity of the node for reference kinds (containers, tensors, ...), else null.
  // A Ref's node is its target's: the same object.
  const void* node() const noexcept;
  // True for a Global naming module.name.
  bool is_global(std::string_view module, std::string_view name) const noexcept;

 private:
  std::variant<None, bool, std::int64_t, BigInt, double, Str, Bytes, std::shared_ptr<List>, std::shared_ptr<Tuple>,
               std::shared_ptr<Dict>, std::shared_ptr<Set>, std::shared_ptr<const Tensor>,
               std::shared_ptr<const Storage>, std::shared_ptr<Global>, std::shared_ptr<Object>, Complex, Ref>
      v_;
};

std::string_view kind_name(Value::Kind k) noexcept;

// Deep structural equality (Python ==, with tensors equal when they are the same
// node). Floats compare by bits so NaN payloads and -0.0 are told apart. Recursive
// graphs compare as Python's == would if it terminated: a pair of nodes already being
// compared counts as equal (so two lists that each contain themselves are equal).
bool equal(const Value& a, const Value& b);

// A tensor reachable from the root, with its path in the tree.
struct TensorRef {
  std::string path;  // "encoder.layer.0.weight", "state.3.exp_avg", ...
  std::shared_ptr<const Tensor> tensor;
};

// Every tensor in the tree, depth-first in tree order, each node visited once.
// Path components: dict str/int keys as text, list/tuple indices, opaque objects'
// args as "args.N" and state as their dict keys. Components are joined with '.'.
std::vector<TensorRef> collect_tensors(const Value& root);

// Whether `v` reaches a tensor or a storage anywhere: items, dict keys and attrs, an
// object's callable, arguments, state and items.
[[nodiscard]] bool reaches_data(const Value& v);

// One-line Python-like rendering, for messages and `inspect` (bounded length).
std::string repr(const Value& v, std::size_t max_len = 200);

}  // namespace tensorseal
TENSORSEAL_API_END
