// The restricted pickle VM: parses pickle protocols 0-5 into the value tree without
// executing anything. A GLOBAL is a name (Value::global), never an import; REDUCE,
// NEWOBJ, NEWOBJ_EX, INST and OBJ build opaque Objects; BUILD sets Object::state;
// APPEND(S)/SETITEM(S) on non-containers go to Object::list_items/dict_items.
// Torch semantics (turning _rebuild_tensor_v2(...) objects into tensors) live in
// src/torch/, on top of this generic result.
//
// Spec: docs/formats/pickle.md. Every limit in Limits is enforced with its own rule.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/limits.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::pickle {

struct Hooks {
  // PERSID / BINPERSID: maps the persistent id (a str for PERSID, any value for
  // BINPERSID) to the object it stands for. Unset: persistent ids are refused.
  std::function<Value(const Value& pid, std::uint64_t offset)> persistent_load;
};

struct Parsed {
  Value value;                     // what STOP returned
  int protocol = 0;                // from PROTO; 0 when absent (protocol 0/1 stream)
  std::uint64_t end = 0;           // offset just past STOP, relative to the stream
  std::vector<GlobalRef> globals;  // every global referenced, in stream order
  std::vector<Fact> facts;         // pickle.protocol, pickle.memo_puts, pickle.opcodes, ...
};

// Parses one pickle stream starting at data[0] and stopping at its STOP opcode.
// `name` and `base_offset` locate it in errors and GlobalRef::where (offsets are
// reported as base_offset + position). Throws tensorseal::Error.
[[nodiscard]] Parsed parse(std::span<const std::byte> data, const std::string& name, std::uint64_t base_offset,
                           const Limits& limits, const Hooks& hooks = {});

}  // namespace tensorseal::detail::pickle
