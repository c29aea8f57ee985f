#include "dcp/transform.h"

#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>

#include "dcp/constants.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::dcp {

bool known_transform(std::string_view s) noexcept {
  if (!s.starts_with(dcp::kZstdTransform) || s.size() <= dcp::kZstdTransform.size() ||
      s[dcp::kZstdTransform.size()] != '/')
    return false;
  const std::string_view version = s.substr(dcp::kZstdTransform.size() + 1);
  return version == "1" || version.starts_with("1.");
}

std::size_t zstd_frame_size(std::span<const std::byte> data) noexcept {
  const std::size_t n = ZSTD_findFrameCompressedSize(data.data(), data.size());
  return ZSTD_isError(n) ? 0 : n;
}

namespace {

std::vector<std::byte> unzstd(std::span<const std::byte> raw, std::uint64_t max_alloc, const std::string& file,
                              std::uint64_t offset) {
  struct Ctx {
    ZSTD_DCtx* p = ZSTD_createDCtx();
    ~Ctx() { ZSTD_freeDCtx(p); }
  } ctx;
  if (ctx.p == nullptr) throw Error(tensorseal::rules::kInternal, "ZSTD_createDCtx failed", file, offset);
  // zstd's default ZSTD_d_windowLogMax (27) bounds the window a frame header may
  // demand to 128 MiB: a hostile header cannot make the decoder allocate more.
  const unsigned long long declared = ZSTD_getFrameContentSize(raw.data(), raw.size());
  std::uint64_t cap = declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR
                          ? declared
                          : std::max<std::uint64_t>(raw.size() * 4, 1 << 16);
  cap = std::min<std::uint64_t>(std::max<std::uint64_t>(cap, 1), max_alloc == 0 ? 1 : max_alloc);
  std::vector<std::byte> out(cap);
  std::uint64_t pos = 0;
  ZSTD_inBuffer in{raw.data(), raw.size(), 0};
  auto corrupt = [&](const std::string& why) -> Error {
    return Error(rules::kTransformData, "the zstd stream of the item " + why, file, offset);
  };
  for (;;) {
    if (pos == out.size()) {
      if (out.size() >= max_alloc)
        throw Error(rules::kMaxAlloc, fmt::format("the item decompresses to more than max_alloc ({} bytes)", max_alloc),
                    file, offset);
      out.resize(std::min<std::uint64_t>(max_alloc, out.size() * 2));
    }
    ZSTD_outBuffer o{out.data(), out.size(), pos};
    const std::size_t r = ZSTD_decompressStream(ctx.p, &o, &in);
    if (ZSTD_isError(r)) throw corrupt(std::string("is corrupt: ") + ZSTD_getErrorName(r));
    pos = o.pos;
    if (r == 0 && in.pos == in.size) break;  // the last frame ended with the input
    if (in.pos == in.size && o.pos < o.size) throw corrupt("is truncated");
  }
  out.resize(pos);
  return out;
}

}  // namespace

std::shared_ptr<const Storage> undo_transforms(std::span<const std::byte> raw,
                                               const std::vector<std::string>& transforms, std::uint64_t max_alloc,
                                               const std::string& file, std::uint64_t offset) {
  std::vector<std::byte> bytes;
  for (std::size_t i = 0; i < transforms.size(); ++i) {
    if (!known_transform(transforms[i]))
      throw Error(rules::kTransform, "unknown transform " + transforms[i], file, offset);
    bytes = unzstd(i == 0 ? raw : std::span<const std::byte>(bytes), max_alloc, file, offset);
  }
  if (transforms.empty()) bytes.assign(raw.begin(), raw.end());
  return Storage::owned(std::move(bytes));
}

}  // namespace tensorseal::detail::dcp
