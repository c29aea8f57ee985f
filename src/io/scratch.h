// Scratch memory for values assembled while reading (DCP tensors made of several
// chunks): large buffers live in an unlinked temp file mapped shared, so their pages
// are file cache the kernel can write back and reclaim, not anonymous memory; the
// file disappears with the last view of the buffer (and with the process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensorseal/storage.h"

namespace tensorseal::detail::io {

// Buffers of at least this many bytes go to a temp file; smaller ones are owned memory.
inline constexpr std::uint64_t kScratchFileMin = 64 * 1024;

struct Scratch {
  std::shared_ptr<Storage> storage;  // zero-filled, `size` bytes, dtype as given
  std::byte* data = nullptr;         // writable until the storage is handed out
};

// A zero-filled buffer of `size` bytes: in the temp directory (TMPDIR, else /tmp) when
// size >= kScratchFileMin, else in memory. Throws io/write when the file cannot be made.
Scratch scratch(std::uint64_t size, DType dtype);

}  // namespace tensorseal::detail::io
