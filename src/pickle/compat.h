// pickle: compatibility with CPython's unpickler: the fix_imports name mapping between
// Python 2 and Python 3 globals, and the standard-library constructions that stand for
// values the value tree has a kind for.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tensorseal/value.h"

namespace tensorseal::detail::pickle {

// What CPython's Unpickler.find_class imports for GLOBAL `module name` in a stream
// of protocol < 3: ("__builtin__", "set") -> ("builtins", "set"), ("copy_reg", x) ->
// ("copyreg", x), ("commands", x) -> ("subprocess", x), ... Unmapped names are returned as is.
std::pair<std::string, std::string> py2_to_py3_name(std::string_view module, std::string_view name);
// What CPython's Pickler writes for a global at protocol < 3 (the reverse tables):
// ("builtins", "set") -> ("__builtin__", "set"), ("copyreg", x) -> ("copy_reg", x), ...
std::pair<std::string, std::string> py3_to_py2_name(std::string_view module, std::string_view name);

// Recognises the standard-library constructions CPython's picklers emit for values
// the value model has a kind for, and returns that value (a new node):
//   collections.OrderedDict()                  -> Dict{kOrderedDict} (Python 2: ([[k, v], ...],))
//   collections.Counter() / Counter(dict)      -> Dict{kCounter}
//   builtins.set(list) / frozenset(list), ()   -> Set
//   _codecs.encode(str, 'latin1' | 'utf-8')    -> bytes (protocol < 3 bytes)
//   builtins.bytes() / bytes([int, ...])       -> bytes
//   builtins.bytearray() / bytearray(bytes) / bytearray(str, 'latin-1') -> bytearray
//   builtins.getattr(Global m.a, 'b')          -> Global m.'a.b' (protocol < 4 nested names)
//   builtins.complex(), complex(x), complex(re, im) with bool/int/float parts -> Complex
// Names are Python 3 names (the VM maps Python 2 names at protocol < 3). Anything else,
// including these callables with unexpected arguments, gives nullopt. Install it as
// `hooks.reduce = [](const Object& o, std::uint64_t) { return stdlib_reduce(o); }`, or
// call it from a richer hook.
std::optional<Value> stdlib_reduce(const Object& obj);

// The value CPython's complex(*args) gives for 0..2 real arguments (bool, int64 or
// float; each part becomes float(x) exactly as Python converts it). Other arguments
// (strings, complex parts, ints beyond int64) give nullopt: the object stays opaque.
std::optional<Complex> complex_from_args(const std::vector<Value>& args);

}  // namespace tensorseal::detail::pickle
