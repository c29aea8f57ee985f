// fail(): the shared spelling of "throw this rule here" for code that has no parser
// state to add (io/input.h has the overload that names an Input's file). Readers that
// do (the pickle VM's position, the zip reader's name) keep member wrappers that add it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "tensorseal/error.h"

namespace tensorseal::detail {

// Throws Error(rule, detail, file, offset); [[noreturn]], so callers need no return
// after it.
[[noreturn]] inline void fail(const Rule& rule, std::string detail, std::string file = {},
                              std::uint64_t offset = kNoOffset) {
  throw Error(rule, std::move(detail), std::move(file), offset);
}

}  // namespace tensorseal::detail
