// Inflating zip entries. inflate_bounded: zlib, for prefixes under a budget.
// inflate_entry: ISA-L's igzip (CRC-32 of the output computed by the inflater itself,
// as fast as libdeflate's one-shot inflate on tensor data) fed the compressed bytes in
// pieces and drained one window at a time.
#include "zip/inflate.h"

#include <fmt/format.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "tensorseal/error.h"
#include "util/release.h"
#include "util/text.h"
#include "zip/constants.h"

namespace tensorseal::detail::zip {
namespace {

// Compressed bytes given to the inflater at a time (and released after it).
constexpr std::uint64_t kInputPiece = std::uint64_t{4} << 20;

}  // namespace

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

void inflate_entry(std::span<const std::byte> file, const Entry& e, const std::string& name, bool verify_crc,
                   bool release, std::uint64_t window,
                   const std::function<bool(std::uint64_t at, std::span<const std::byte> bytes)>& sink) {
  if (e.data_offset > file.size() || e.compressed_size > file.size() - e.data_offset)
    throw Error(rules::kDataPastEnd, fmt::format("entry {}: data runs past the end of the file", util::quoted(e.name)),
                name, e.data_offset);
  check_deflated(e, name);
  const auto raw = file.subspan(e.data_offset, e.compressed_size);
  auto fail = [&](std::string detail, std::uint64_t at) {
    throw Error(rules::kInflateFailed, fmt::format("entry {}{}", util::quoted(e.name), detail), name,
                e.data_offset + at);
  };
  auto st = std::make_unique<inflate_state>();
  isal_inflate_init(st.get());
  st->crc_flag = ISAL_GZIP_NO_HDR;  // the gzip CRC-32 of the output: zip's
  window = std::clamp<std::uint64_t>(window, 1, std::numeric_limits<std::uint32_t>::max());
  std::vector<std::byte> buf(window);
  std::uint64_t in_pos = 0, out_pos = 0;
  const std::byte* kept = raw.data();  // first compressed byte not released
  while (true) {
    if (st->avail_in == 0 && in_pos < raw.size()) {
      if (release) kept = util::release_pages(kept, raw.data() + in_pos);
      const std::uint64_t n = std::min(kInputPiece, raw.size() - in_pos);
      st->next_in = reinterpret_cast<std::uint8_t*>(const_cast<std::byte*>(raw.data() + in_pos));
      st->avail_in = static_cast<std::uint32_t>(n);
      in_pos += n;
    }
    const std::uint32_t avail_before = st->avail_in;
    st->next_out = reinterpret_cast<std::uint8_t*>(buf.data());
    st->avail_out = static_cast<std::uint32_t>(window);
    const int r = isal_inflate(st.get());
    const std::uint64_t produced = window - st->avail_out;
    const std::uint64_t consumed = in_pos - st->avail_in;
    if (r < 0 || r == ISAL_NEED_DICT)
      fail(fmt::format(": the deflate stream is invalid (after {} inflated bytes)", out_pos + produced), consumed);
    if (produced > e.size - out_pos)
      fail(fmt::format(" inflates to more than the declared {} bytes", e.size), consumed);
    if (produced > 0) {
      if (!sink(out_pos, {buf.data(), produced})) return;
      out_pos += produced;
    }
    if (st->block_state == ISAL_BLOCK_FINISH) break;
    if (produced == 0 && st->avail_in == avail_before) {
      if (in_pos == raw.size())
        fail(fmt::format(": the deflate stream is cut short after {} inflated bytes", out_pos), raw.size());
      if (st->avail_in > 0) fail(": the inflater made no progress", consumed);
    }
  }
  // Whole bytes the inflater read ahead into its bit buffer are not part of the stream.
  const std::uint64_t used = in_pos - st->avail_in - static_cast<std::uint64_t>(st->read_in_length) / 8;
  if (out_pos != e.size)
    fail(fmt::format(" inflates to {} bytes, the central directory says {}", out_pos, e.size), used);
  if (used != e.compressed_size)
    fail(fmt::format(": the deflate stream ends after {} of {} bytes", used, e.compressed_size), used);
  if (release) util::release_pages(kept, raw.data() + raw.size());
  if (verify_crc) check_crc(e, st->crc, name);
}

std::vector<std::byte> inflate_entry_whole(std::span<const std::byte> file, const Entry& e, const std::string& name,
                                           bool verify_crc, const Limits& limits) {
  if (e.size > limits.max_alloc)
    throw Error(rules::kEntryTooLarge,
                fmt::format("entry {} inflates to {} bytes, over the allocation limit of {} (--max-alloc)",
                            util::quoted(e.name), e.size, limits.max_alloc),
                name, e.data_offset);
  std::vector<std::byte> out(e.size);
  inflate_entry(file, e, name, verify_crc, false, kInflateWindow, [&](std::uint64_t at, std::span<const std::byte> b) {
    std::memcpy(out.data() + at, b.data(), b.size());
    return true;
  });
  return out;
}

}  // namespace tensorseal::detail::zip
