// Reading the arguments of torch's rebuild calls, shared by the resolver
// (torch/rebuild.cc) and the composite checks (torch/composite_check.cc). Every failure
// is Error(torch/bad-rebuild-args) naming the function `fn` and the file `in`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/input.h"
#include "tensorseal/dtype.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::torch {

// module.name of a global, Python 2 and numpy 2 module names folded into the names
// the tables use ("__builtin__" -> "builtins", "numpy._core.*" -> "numpy.core.*").
std::string qualname(const Global& g);

[[noreturn]] void bad_args(const std::string& fn, const std::string& why, const io::Input& in);

// The call's positional arguments, between `min` and `max` of them.
const std::vector<Value>& tuple_args(const Object& o, const std::string& fn, const io::Input& in, std::size_t min,
                                     std::size_t max);

// A tuple, list or torch.Size of integers; `what` names it in messages.
std::vector<std::int64_t> int_list(const Value& v, const std::string& fn, const char* what, const io::Input& in);

// torch.<dtype> as a DType; nullopt for any other value.
std::optional<DType> dtype_of_global(const Value& v);

}  // namespace tensorseal::detail::torch
