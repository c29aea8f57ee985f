// tensorseal/version.h — the library's version.
#pragma once

#define TENSORSEAL_VERSION "0.1.0"

namespace tensorseal {
inline constexpr const char* kVersion = TENSORSEAL_VERSION;
}  // namespace tensorseal
