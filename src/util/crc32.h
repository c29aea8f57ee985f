// CRC-32 with the zip/gzip polynomial (reflected 0xEDB88320, pre- and post-inverted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tensorseal::detail::util {

// Chainable: crc32(crc32(0, a), b) == crc32(0, a + b). ISA-L's kernels.
std::uint32_t crc32(std::uint32_t crc, std::span<const std::byte> data);
// crc32(0, a + b) from crc_a = crc32(0, a), crc_b = crc32(0, b) and b's length, in
// O(log len_b) (zlib's crc32_combine).
std::uint32_t crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b);

}  // namespace tensorseal::detail::util
