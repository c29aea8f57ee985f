// pickle: compatibility with CPython's unpickler: the fix_imports name mapping between
// Python 2 and Python 3 globals. (The standard-library calls that stand for values of
// the tree are pickle/stdlib.h.)
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace tensorseal::detail::pickle {

// What CPython's Unpickler.find_class imports for GLOBAL `module name` in a stream
// of protocol < 3: ("__builtin__", "set") -> ("builtins", "set"), ("copy_reg", x) ->
// ("copyreg", x), ("commands", x) -> ("subprocess", x), ... Unmapped names are returned as is.
std::pair<std::string, std::string> py2_to_py3_name(std::string_view module, std::string_view name);
// What CPython's Pickler writes for a global at protocol < 3 (the reverse tables):
// ("builtins", "set") -> ("__builtin__", "set"), ("copyreg", x) -> ("copy_reg", x), ...
std::pair<std::string, std::string> py3_to_py2_name(std::string_view module, std::string_view name);

}  // namespace tensorseal::detail::pickle
