// Bounded decompression of a zip member by its method, for the readers of loaders that
// take more than stored and deflated members: Python's zipfile (numpy.load, any
// zipfile-based loader) also reads bzip2 (12) and LZMA (14) members; torch's miniz reads
// neither. scan uses it to see what those loaders would unpickle.
#pragma once

#include <cstdint>
#include <span>

#include "zip/inflate.h"

namespace tensorseal::detail::zip {

// True for the methods unpack_bounded decompresses: stored, deflated, bzip2, LZMA.
bool can_unpack(std::uint16_t method) noexcept;

// The member's data (`raw`: its compressed bytes) decompressed until its stream ends,
// the input runs out or max_out bytes came (then `over` says whether more would
// follow), as inflate_bounded reports it. LZMA members carry zipfile's prefix: u8
// major, u8 minor version, u16 le properties size, the LZMA1 properties, then the raw
// LZMA1 stream. Memory: max_out plus the decoder's state (bzip2 at most ~3.7 MB,
// LZMA's dictionary as the properties declare, at most 1.5 GiB: refused past 64 MiB).
[[nodiscard]] Inflated unpack_bounded(std::uint16_t method, std::span<const std::byte> raw, std::uint64_t max_out);

}  // namespace tensorseal::detail::zip
