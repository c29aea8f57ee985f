// Torch semantics on top of the generic pickle VM: persistent ids become storages and
// torch's rebuild functions (one table, rebuild.cc kRebuildCalls) become tensors; the
// standard library's calls become typed values through the VM's reduce hook, the one
// table every entry point shares (pickle/stdlib.h).
// Nothing is executed: only names from fixed tables are interpreted, and only as data.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "io/input.h"
#include "tensorseal/checkpoint.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::torch {

// The storage a persistent id ('storage', type, key, location, numel[, view]) names.
struct StorageRef {
  DType dtype = DType::kUInt8;  // element type of a typed storage class; uint8 untyped
  bool typed = false;           // legacy class (FloatStorage): numel counts elements
  std::string type_name;        // "FloatStorage", "UntypedStorage", ...
  std::string key, location;
  std::uint64_t numel = 0;       // as written: elements for typed, bytes for untyped
  Value view_metadata;           // legacy 6th field: None or (view_key, offset, size)
  std::uint64_t nbytes() const;  // numel * itemsize, overflow-checked by parse()
};

// Validates and decodes a storage persistent id. `legacy` expects 6 fields.
StorageRef parse_storage_pid(const Value& pid, bool legacy, const std::string& name, std::uint64_t offset);

// Context for resolving one file's pickle: where nested files (_load_from_bytes)
// come from and where their globals/facts go.
struct Resolver {
  const io::Input* in = nullptr;
  Checkpoint* out = nullptr;
  std::uint32_t nested_seen = 0;  // _load_from_bytes payloads found so far (numbering)
  // Nested files already parsed, by payload identity (the memo-shared bytes object):
  // a pickle may apply _load_from_bytes to one payload any number of times; it is
  // parsed and copied once, so a 1 MB file cannot make tensorseal copy gigabytes.
  std::map<std::pair<const char*, std::size_t>, Value> nested_cache;

  // Turns the VM's generic value into typed values. Shared nodes stay shared.
  Value resolve(const Value& raw);
};

// Runs the VM over a pickle stream and resolves it; globals/facts go to `out`.
// `persistent_load` may be empty (plain pickles).
Value unpickle(const io::Input& in, std::span<const std::byte> stream, std::uint64_t base_offset,
               const std::string& where, const std::function<Value(const Value&, std::uint64_t)>& persistent_load,
               Checkpoint& out, std::uint64_t* end = nullptr, int* protocol = nullptr);

// Converts big-endian element data to little-endian in an owned copy.
std::shared_ptr<Storage> swapped_copy(const Storage& s, DType dtype);

}  // namespace tensorseal::detail::torch
