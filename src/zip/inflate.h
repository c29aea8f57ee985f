// Bounded streaming inflate of raw deflate data (zip method 8), for readers that need
// only part of a record (a .npy header) or must stop a bomb at the first excess byte
// rather than trust a declared size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

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

}  // namespace tensorseal::detail::zip
