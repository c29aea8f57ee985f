#include "zip/unpack.h"

#include <bzlib.h>
#include <lzma.h>

#include <algorithm>
#include <limits>

#include "util/endian.h"
#include "zip/constants.h"

namespace tensorseal::detail::zip {
namespace {

constexpr std::uint64_t kChunk = 64 << 10;
// LZMA dictionaries larger than this are refused (zipfile's writer uses 8 MiB presets;
// the decoder allocates the whole dictionary up front).
constexpr std::uint64_t kMaxLzmaDictionary = 64u << 20;
constexpr std::uint64_t kLzmaPrefix = 4;  // u8 major, u8 minor, u16 le properties size

// Drives one streaming decoder: `step(in, in_len, out, out_len)` consumes and produces,
// returning +1 at the stream's end, 0 to go on, -1 for invalid data; it reports what it
// used through the in/out counters it is given.
template <class Step>
Inflated drive(std::span<const std::byte> raw, std::uint64_t max_out, Step&& step) {
  Inflated out;
  std::uint64_t in_pos = 0;
  for (;;) {
    const std::uint64_t have = out.data.size();
    const std::uint64_t room = std::min<std::uint64_t>(kChunk, max_out + 1 - have);
    out.data.resize(have + room);
    std::uint64_t used_in = 0, made = 0;
    const int r = step(raw.data() + in_pos, raw.size() - in_pos, out.data.data() + have, room, used_in, made);
    in_pos += used_in;
    out.data.resize(have + made);
    if (r > 0) {
      out.ended = true;
      break;
    }
    if (r < 0) {
      out.invalid = true;
      break;
    }
    if (out.data.size() > max_out) {
      out.over = true;
      out.data.resize(max_out);
      break;
    }
    if (used_in == 0 && made == 0) break;  // input ran out
  }
  out.consumed = in_pos;
  return out;
}

Inflated bunzip(std::span<const std::byte> raw, std::uint64_t max_out) {
  bz_stream bz{};
  if (BZ2_bzDecompressInit(&bz, 0, 0) != BZ_OK) return Inflated{.invalid = true};
  Inflated out = drive(raw, max_out,
                       [&](const std::byte* in, std::uint64_t in_len, std::byte* o, std::uint64_t o_len,
                           std::uint64_t& used_in, std::uint64_t& made) {
                         const unsigned in_n = static_cast<unsigned>(
                             std::min<std::uint64_t>(in_len, std::numeric_limits<unsigned>::max()));
                         bz.next_in = const_cast<char*>(reinterpret_cast<const char*>(in));
                         bz.avail_in = in_n;
                         bz.next_out = reinterpret_cast<char*>(o);
                         bz.avail_out = static_cast<unsigned>(o_len);
                         const int r = BZ2_bzDecompress(&bz);
                         used_in = in_n - bz.avail_in;
                         made = o_len - bz.avail_out;
                         return r == BZ_STREAM_END ? 1 : r == BZ_OK ? 0 : -1;
                       });
  BZ2_bzDecompressEnd(&bz);
  return out;
}

Inflated unlzma(std::span<const std::byte> raw, std::uint64_t max_out) {
  if (raw.size() < kLzmaPrefix) return Inflated{.invalid = true};
  const std::uint64_t psize = util::load_le<std::uint16_t>(raw.data() + 2);
  if (psize > raw.size() - kLzmaPrefix) return Inflated{.invalid = true};
  lzma_filter filters[2] = {{LZMA_FILTER_LZMA1, nullptr}, {LZMA_VLI_UNKNOWN, nullptr}};
  if (lzma_properties_decode(&filters[0], nullptr, reinterpret_cast<const std::uint8_t*>(raw.data() + kLzmaPrefix),
                             psize) != LZMA_OK)
    return Inflated{.invalid = true};
  const auto* opts = static_cast<const lzma_options_lzma*>(filters[0].options);
  const bool too_big = opts->dict_size > kMaxLzmaDictionary;
  lzma_stream ls = LZMA_STREAM_INIT;
  const bool ok = !too_big && lzma_raw_decoder(&ls, filters) == LZMA_OK;
  free(filters[0].options);
  if (!ok) return Inflated{.invalid = true};
  Inflated out = drive(raw.subspan(kLzmaPrefix + psize), max_out,
                       [&](const std::byte* in, std::uint64_t in_len, std::byte* o, std::uint64_t o_len,
                           std::uint64_t& used_in, std::uint64_t& made) {
                         ls.next_in = reinterpret_cast<const std::uint8_t*>(in);
                         ls.avail_in = in_len;
                         ls.next_out = reinterpret_cast<std::uint8_t*>(o);
                         ls.avail_out = o_len;
                         const lzma_ret r = lzma_code(&ls, LZMA_RUN);
                         used_in = in_len - ls.avail_in;
                         made = o_len - ls.avail_out;
                         return r == LZMA_STREAM_END ? 1 : r == LZMA_OK || r == LZMA_BUF_ERROR ? 0 : -1;
                       });
  out.consumed += kLzmaPrefix + psize;
  lzma_end(&ls);
  return out;
}

}  // namespace

bool can_unpack(std::uint16_t method) noexcept {
  return method == kMethodStored || method == kMethodDeflated || method == kMethodBzip2 || method == kMethodLzma;
}

Inflated unpack_bounded(std::uint16_t method, std::span<const std::byte> raw, std::uint64_t max_out) {
  switch (method) {
    case kMethodStored: {
      Inflated out;
      const auto n = std::min<std::uint64_t>(raw.size(), max_out);
      out.data.assign(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(n));
      out.over = raw.size() > max_out;
      out.ended = !out.over;
      out.consumed = n;
      return out;
    }
    case kMethodDeflated:
      return inflate_bounded(raw, max_out);
    case kMethodBzip2:
      return bunzip(raw, max_out);
    case kMethodLzma:
      return unlzma(raw, max_out);
    default:
      return Inflated{.invalid = true};
  }
}

}  // namespace tensorseal::detail::zip
