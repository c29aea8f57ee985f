// The restricted pickle VM: parses pickle protocols 0-5 into the value tree without
// executing anything. A GLOBAL is a name (Value::global), never an import; REDUCE,
// NEWOBJ, NEWOBJ_EX, INST and OBJ build opaque Objects; BUILD sets Object::state;
// APPEND(S)/SETITEM(S) on non-containers go to Object::list_items/dict_items.
// Torch semantics (turning _rebuild_tensor_v2(...) objects into tensors) live in
// src/torch/, on top of this generic result.
//
// Guarantees on the result (whatever the input): no cycles, no container nested deeper
// than Limits::max_depth, and the tree expanded without sharing stays within
// Limits::max_alloc bytes, so recursive walkers of the tree are safe.
//
// Spec: docs/formats/pickle.md. Every limit in Limits is enforced with its own rule.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/limits.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::pickle {

// GlobalRef::module of a STACK_GLOBAL whose operands were computed (see Hooks::on_global).
inline constexpr std::string_view kComputedModule = "<computed>";

struct Hooks {
  // PERSID / BINPERSID: maps the persistent id (a str for PERSID, any value for
  // BINPERSID) to the object it stands for. Unset: persistent ids are refused.
  std::function<Value(const Value& pid, std::uint64_t offset)> persistent_load;
  // REDUCE / NEWOBJ / NEWOBJ_EX / INST / OBJ: called with the opaque Object just built
  // (callable, args, kwargs, how; no state or items yet). Returning a value replaces
  // the Object on the stack (e.g. the torch layer's tensors, or the OrderedDict/set/
  // bytes of stdlib_reduce in stdlib.h); nullopt keeps the Object. The returned value
  // should be a new node or a leaf (it may contain the arguments). Unset: Objects are
  // kept.
  std::function<std::optional<Value>(const Object& obj, std::uint64_t offset)> reduce;
  // Called for every global as it is read (the same GlobalRef Parsed::globals gets),
  // and for a STACK_GLOBAL whose operands are not both str (module "<computed>": a name
  // built at load time) just before the VM refuses it. Lets a scanner keep what a
  // stream referenced even when parsing fails later.
  std::function<void(const GlobalRef& ref)> on_global;
  // BUILD, APPEND, APPENDS, SETITEM and SETITEMS: called before the change, whatever
  // the target's kind, with the opcode, the target and the operands (BUILD: the state;
  // APPEND(S): the items; SETITEM(S): keys and values alternating). Lets a scanner see
  // the calls a loader makes through methods a BUILD installed on the target
  // (`__setstate__`, `append`, `extend`) and mutations of non-containers.
  std::function<void(std::uint8_t op, const Value& target, const std::vector<Value>& operands, std::uint64_t offset)>
      on_mutate;
  // How Python 2 str opcodes decode (ReadOptions::py2_strings).
  Py2Strings py2_strings = Py2Strings::kUtf8;
};

struct Parsed {
  Value value;                     // what STOP returned
  int protocol = 0;                // from PROTO; 0 when absent (protocol 0/1 stream)
  std::uint64_t end = 0;           // offset just past STOP, relative to the stream
  std::vector<GlobalRef> globals;  // every global referenced, in stream order
  // Facts, all with where = the stream name: "pickle.protocol" ("2"), "pickle.memo"
  // ("puts=12 gets=3"), "pickle.opcodes" ("BINPUT:12,BINUNICODE:5,..." sorted by
  // name), "pickle.frames" ("count=3", only when FRAME is used) and
  // "pickle.stop-leftover" ("stack=2 marks=0", only when STOP left values behind).
  std::vector<Fact> facts;
};

// Parses one pickle stream starting at data[0] and stopping at its STOP opcode.
// `name` and `base_offset` locate it in errors and GlobalRef::where (offsets are
// reported as base_offset + position). Throws tensorseal::Error.
[[nodiscard]] Parsed parse(std::span<const std::byte> data, const std::string& name, std::uint64_t base_offset,
                           const Limits& limits, const Hooks& hooks = {});

}  // namespace tensorseal::detail::pickle
