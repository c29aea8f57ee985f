// What only a reader may set on a Storage: the checksum facts it established about the
// bytes (include/tensorseal/storage.h gives each one's meaning). Kept out of the public
// header so that no user of the library can mark bytes as verified.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "tensorseal/storage.h"

namespace tensorseal::detail::core {

struct StorageAccess {
  // `crc` must have been computed over s.bytes() by the caller (never taken from a
  // file unchecked).
  static void set_verified_crc32(Storage& s, std::uint32_t crc) noexcept { s.verified_crc32_ = crc; }
  // A checksum the caller's reader was asked not to verify (Storage::PendingChecksum).
  static void set_pending_checksum(Storage& s, std::shared_ptr<const Storage::PendingChecksum> p) noexcept {
    s.pending_ = std::move(p);
  }
};

}  // namespace tensorseal::detail::core
