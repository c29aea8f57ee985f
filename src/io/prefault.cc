#include "io/prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace tensorseal::detail::io {

namespace {
#ifndef MADV_POPULATE_READ
constexpr int MADV_POPULATE_READ = 22;  // Linux 5.14
#endif
constexpr std::uint64_t kStep = std::uint64_t{8} << 20;
}  // namespace

void prefault(std::span<const std::byte> bytes, const std::atomic<bool>& stop) {
  if (bytes.empty()) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data()) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(bytes.data() + bytes.size());
  bool advise = true;
  for (std::uintptr_t at = begin; at < end && !stop.load(std::memory_order_relaxed); at += kStep) {
    const std::uintptr_t n = std::min<std::uintptr_t>(kStep, end - at);
    if (advise && ::madvise(reinterpret_cast<void*>(at), n, MADV_POPULATE_READ) == 0) continue;
    advise = false;  // an older kernel: read one byte per page (whole pages are mapped)
    for (std::uintptr_t p = at; p < at + n; p += page) (void)*reinterpret_cast<const volatile std::byte*>(p);
  }
}

}  // namespace tensorseal::detail::io
