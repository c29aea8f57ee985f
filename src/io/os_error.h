#pragma once
// The one form of a failed system call's error: "<what>: <strerror(err)>", naming the
// file it concerns. The file is taken by reference so that nothing runs between the
// failed call and the read of errno at the call site.

#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "tensorseal/error.h"

namespace tensorseal::detail::io {

[[noreturn]] inline void fail_os(const Rule& rule, std::string_view what, int err, const std::filesystem::path& file) {
  throw Error(rule, std::string(what) + ": " + std::strerror(err), file.string());
}

}  // namespace tensorseal::detail::io
