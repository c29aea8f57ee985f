#include "zip/inflate.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

namespace tensorseal::detail::zip {

Inflated inflate_bounded(std::span<const std::byte> raw, std::uint64_t max_out) {
  Inflated out;
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
    out.invalid = true;
    return out;
  }
  constexpr std::uint64_t kChunk = 64 << 10;
  constexpr std::uint64_t kMaxIn = std::numeric_limits<uInt>::max();
  std::uint64_t in_pos = 0;
  // One byte beyond max_out tells "over" from "exactly max_out".
  while (true) {
    const std::uint64_t have = out.data.size();
    const std::uint64_t room = std::min<std::uint64_t>(kChunk, max_out + 1 - have);
    out.data.resize(have + room);
    zs.next_out = reinterpret_cast<Bytef*>(out.data.data() + have);
    zs.avail_out = static_cast<uInt>(room);
    if (zs.avail_in == 0 && in_pos < raw.size()) {
      const std::uint64_t n = std::min<std::uint64_t>(kMaxIn, raw.size() - in_pos);
      zs.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(raw.data() + in_pos));
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    const int r = inflate(&zs, Z_NO_FLUSH);
    out.data.resize(have + room - zs.avail_out);
    if (r == Z_STREAM_END) {
      out.ended = true;
      break;
    }
    if (r != Z_OK && r != Z_BUF_ERROR) {
      out.invalid = true;
      break;
    }
    if (out.data.size() > max_out) {
      out.over = true;
      out.data.resize(max_out);
      break;
    }
    if (r == Z_BUF_ERROR && zs.avail_in == 0 && in_pos >= raw.size()) break;  // input ran out
  }
  out.consumed = in_pos - zs.avail_in;
  inflateEnd(&zs);
  return out;
}

}  // namespace tensorseal::detail::zip
