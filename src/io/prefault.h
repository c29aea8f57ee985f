// Mapping a file's pages ahead of a consumer that streams them.
#pragma once

#include <atomic>
#include <cstddef>
#include <span>

namespace tensorseal::detail::io {

// Maps the pages of `bytes` (part of a file mapping) into the process, front to back in
// 8 MiB steps (MADV_POPULATE_READ, else one read per page), stopping early once `stop`
// is set: a writer that then copies the bytes does not stop on a page fault per page.
// Advice only: never fails and changes no byte.
void prefault(std::span<const std::byte> bytes, const std::atomic<bool>& stop);

}  // namespace tensorseal::detail::io
