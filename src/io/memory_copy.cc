#include "io/memory_copy.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "tensorseal/error.h"
#include "util/parallel.h"

namespace tensorseal::detail::io {

std::shared_ptr<Storage> copy_into_memory(const MappedFile& file) {
  const std::uint64_t n = file.size();
  if (n == 0) return Storage::owned({});
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error(rules::kIoMap, std::string("copying into memory: ") + std::strerror(errno), file.path());
  std::shared_ptr<const void> owner(p, [n](const void* q) { ::munmap(const_cast<void*>(q), n); });
#ifdef MADV_HUGEPAGE
  (void)::madvise(p, n, MADV_HUGEPAGE);  // advice only: without it the copy is the same, with more faults
#endif
  constexpr std::uint64_t kPiece = std::uint64_t{8} << 20;
  const std::byte* from = file.bytes().data();
  auto* to = static_cast<std::byte*>(p);
  util::parallel_for((n + kPiece - 1) / kPiece, 0, [&](std::size_t i) {
    const std::uint64_t at = i * kPiece;
    std::memcpy(to + at, from + at, std::min(kPiece, n - at));
  });
  return Storage::external(to, n, std::move(owner));
}

}  // namespace tensorseal::detail::io
