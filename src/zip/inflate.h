// Inflating raw deflate data (zip method 8) without trusting declared sizes: bounded
// prefixes (a .npy header, a pickle record under a budget) and whole entries streamed
// window by window, so that memory stays one window whatever an entry inflates to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tensorseal/limits.h"
#include "zip/reader.h"

namespace tensorseal::detail::zip {

struct Inflated {
  std::vector<std::byte> data;  // at most max_out bytes
  bool ended = false;           // the deflate stream reached its end within max_out
  bool over = false;            // the stream would give more than max_out bytes
  bool invalid = false;         // the stream is not valid deflate (data holds what came before)
  std::uint64_t consumed = 0;   // input bytes used
};

// Inflates `raw` until the stream ends, the input runs out, or max_out bytes were
// produced (then `over` tells whether more would follow). Memory: max_out + 64 KiB.
[[nodiscard]] Inflated inflate_bounded(std::span<const std::byte> raw, std::uint64_t max_out);

// Bytes of inflated output handed to a sink at a time by inflate_entry.
inline constexpr std::uint64_t kInflateWindow = std::uint64_t{1} << 20;

// Streams DEFLATED entry `e` of `file` (validated by zip::read): `sink(at, bytes)` gets
// the inflated bytes from offset 0 on, in windows of at most `window` bytes (valid only
// during the call), and returns false to stop there. A stream that is not stopped is
// checked after its last window: exactly e.size bytes from exactly e.compressed_size
// bytes (zip/inflate-failed; a byte past e.size is refused as soon as it appears, so a
// stream lying about its size costs at most e.size + one window) and, when
// `verify_crc`, its CRC-32, computed while inflating (zip/crc-mismatch). Memory: one
// window and the inflater's state (ISA-L's igzip, about 100 KiB).
// `release`: `file` is a private file mapping whose pages in this entry's data nobody
// else holds; pages of it the inflater has consumed are returned to the kernel
// (MADV_DONTNEED) as it goes, so the resident set stays bounded too.
void inflate_entry(std::span<const std::byte> file, const Entry& e, const std::string& name, bool verify_crc,
                   bool release, std::uint64_t window,
                   const std::function<bool(std::uint64_t at, std::span<const std::byte> bytes)>& sink);

// The whole inflated entry in one buffer (the same checks as inflate_entry, same
// inflater), for consumers that need it whole. Refuses e.size over limits.max_alloc
// first (zip/entry-too-large).
[[nodiscard]] std::vector<std::byte> inflate_entry_whole(std::span<const std::byte> file, const Entry& e,
                                                         const std::string& name, bool verify_crc,
                                                         const Limits& limits);

}  // namespace tensorseal::detail::zip
