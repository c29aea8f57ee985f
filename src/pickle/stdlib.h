// pickle: the standard-library calls CPython's picklers emit for values the value tree
// has a kind for, read the way CPython's unpickler evaluates them. One table, and the
// first step of every reduce hook (torch files and bare pickles through
// torch::unpickle, DCP .metadata, scan), so that every entry point gives the same
// bytes the same value. Torch's own rebuild functions are a second table beside it
// (src/torch/rebuild.cc).
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "tensorseal/value.h"

namespace tensorseal::detail::pickle {

// One callable. `build` gives the value `module.name(*args)` evaluates to, or nullopt
// for arguments the call does not turn into a value of the tree (the Object is kept
// opaque: the same bytes then read as the same opaque object everywhere). Only REDUCE
// calls are taken, and NEWOBJ `cls.__new__(cls, *args)` too where `newobj` says that
// __new__ alone makes the value (complex).
struct StdlibCall {
  std::string_view module, name;
  std::optional<Value> (*build)(const std::vector<Value>& args);
  bool newobj = false;
};

// The table, sorted by (module, name). Names are Python 3 names (the VM maps Python 2
// names at protocol < 3, as CPython's find_class does):
//   builtins.bytes()  bytes([int 0..255, ...])                     -> bytes
//   builtins.bytearray()  bytearray(bytes)  bytearray(str, 'latin-1') -> bytearray
//   builtins.complex() complex(x) complex(re, im), bool/int/float parts -> Complex
//   builtins.dict() dict(dict) dict([(k, v), ...])                  -> Dict
//   builtins.set / frozenset () or (list|tuple)  (equal items once) -> Set
//   builtins.getattr(Global m.a, 'b')            -> Global m.'a.b' (protocol < 4 nested
//                                                   names; 'b' without dots, '' kept, the
//                                                   inverse of the writer's split)
//   _codecs.encode(str) / (str, 'utf-8')         -> bytes of the UTF-8 (no lone surrogate)
//   _codecs.encode(str, 'latin1' | 'latin-1')    -> bytes (protocol < 3 bytes)
//   collections.OrderedDict / Counter () (dict) ([(k, v), ...]) -> Dict{kOrderedDict|kCounter}
// Dicts and sets are built with Python's key identity (pickle/keys.h); an unhashable
// key keeps the Object opaque.
std::span<const StdlibCall> stdlib_calls();

// The table row for a global, or null.
const StdlibCall* find_stdlib_call(std::string_view module, std::string_view name);

// The value of a just-built Object (callable, args, how; kwargs, state and items
// unset) when its callable is a row of the table that takes these arguments; else
// nullopt. Install as `hooks.reduce`, or call first from a richer hook.
std::optional<Value> stdlib_reduce(const Object& obj);

// The value CPython's complex(*args) gives for 0..2 real arguments (bool, int64 or
// float; each part becomes float(x) exactly as Python converts it). Other arguments
// (strings, complex parts, ints beyond int64) give nullopt.
std::optional<Complex> complex_from_args(const std::vector<Value>& args);

}  // namespace tensorseal::detail::pickle
