// Returning pages of a private, read-only-used file mapping to the kernel once their
// bytes have been consumed, so that reading a large region (a compressed zip entry, a
// 16 MB safetensors header) does not keep it all resident. The bytes stay readable: a
// later access faults them back in from the page cache.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace tensorseal::detail::util {

// Releases the whole pages inside [from, to) of a file mapping nothing has written to
// (never call it on heap or anonymous memory: those pages would read back as zeros).
// Returns the address of the first byte not released (a page boundary, or `from`).
inline const std::byte* release_pages(const std::byte* from, const std::byte* to) noexcept {
#ifdef MADV_DONTNEED
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto a = (reinterpret_cast<std::uintptr_t>(from) + page - 1) & ~(page - 1);
  const auto b = reinterpret_cast<std::uintptr_t>(to) & ~(page - 1);
  if (a >= b) return from;
  (void)::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);  // advice: failure only costs memory
  return from + (b - reinterpret_cast<std::uintptr_t>(from));
#else
  (void)to;
  return from;
#endif
}

}  // namespace tensorseal::detail::util
