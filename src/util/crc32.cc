#include "util/crc32.h"

#include <isa-l/crc.h>
#include <zlib.h>

namespace tensorseal::detail::util {

std::uint32_t crc32(std::uint32_t crc, std::span<const std::byte> data) {
  // ISA-L's gzip CRC is zip's CRC-32, chainable like zlib's; its length is 64-bit.
  const std::uint32_t out = crc32_gzip_refl(crc, reinterpret_cast<const unsigned char*>(data.data()), data.size());
#if defined(__x86_64__)
  // ISA-L's AVX-512 kernel returns with dirty upper register halves; VZEROUPPER keeps
  // the SSE code that follows (e.g. SHA-256) from paying AVX-SSE transition penalties.
  static const bool has_avx = __builtin_cpu_supports("avx");
  if (has_avx) asm volatile("vzeroupper");  // keeps xmm0-15 (the low halves) intact
#endif
  return out;
}

std::uint32_t crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) {
  static_assert(sizeof(z_off_t) >= sizeof(std::uint64_t), "zlib's z_off_t must hold a 64-bit length");
  return static_cast<std::uint32_t>(::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(len_b)));
}

}  // namespace tensorseal::detail::util
