// The canonical form of a checkpoint and canon --check: the format table's writer
// streamed into a sink that compares instead of storing.
#include "tensorseal/canon.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "api/formats.h"
#include "hash/content_hash.h"
#include "io/sink.h"

namespace tensorseal {
namespace {

// Compares what a writer streams with `expected`: remembers the first differing
// offset and counts every byte (the writer always runs to its end, so the canonical
// size is known exactly). Keeps nothing.
class CompareSink final : public detail::io::Sink {
 public:
  explicit CompareSink(std::span<const std::byte> expected) : expected_(expected) {}

  void write(std::span<const std::byte> data) override {
    if (first_ == kNoOffset && position_ < expected_.size()) {
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(data.size(), expected_.size() - position_));
      const std::byte* want = expected_.data() + position_;
      if (std::memcmp(data.data(), want, n) != 0) {
        std::size_t i = 0;
        while (data[i] == want[i]) ++i;
        first_ = position_ + i;
      }
    }
    position_ += data.size();
  }

  // The first difference, counting a length mismatch at the shorter length.
  std::uint64_t first_difference() const noexcept {
    if (first_ != kNoOffset) return first_;
    return position_ == expected_.size() ? kNoOffset : std::min<std::uint64_t>(position_, expected_.size());
  }

 private:
  std::span<const std::byte> expected_;
  std::uint64_t first_ = kNoOffset;
};

// The single-file writer of `c`'s canonical format, or the directory error.
const detail::api::FormatRow& single_file_row(const Checkpoint& c) {
  const Format f = canonical_format(c);
  const auto* r = detail::api::row(f);
  if (r == nullptr || r->write == nullptr || r->write_dir != nullptr)
    throw Error(rules::kCanonCheckDirectory,
                "the canonical form of this " + std::string(format_name(c.format)) + " checkpoint is " +
                    std::string(format_name(f)) + ", a directory, not one file",
                c.file);
  return *r;
}

}  // namespace

Format canonical_format(const Checkpoint& c) {
  const FormatInfo* info = format_info(c.format);
  if (info == nullptr) throw Error(rules::kUnknownFormat, "no canonical form for an unknown format", c.file);
  return info->canonical;
}

WriteOptions canonical_write_options(const Checkpoint& c, Format f, unsigned threads) {
  WriteOptions o;
  o.threads = threads;
  const auto* r = detail::api::row(f);
  if (r != nullptr && r->keep != nullptr) r->keep(c, o);
  // A checkpoint written as its own format keeps its layout (a shard directory's split,
  // a DCP directory's ranks, an npz's compression).
  if (c.format == f) o.format_options = c.layout;
  return o;
}

std::string canonical_bytes(const Checkpoint& c, unsigned threads) {
  const auto& r = single_file_row(c);
  detail::io::StringSink sink;
  r.write(c.root, canonical_write_options(c, r.info.format, threads), sink);
  return std::move(sink.out);
}

CanonCheck check_canonical(const Checkpoint& c, std::span<const std::byte> bytes, unsigned threads,
                           const Progress& progress) {
  const auto& r = single_file_row(c);
  CompareSink sink(bytes);
  detail::util::ProgressMeter meter(&progress, progress ? detail::hash::content_hash_bytes(c.root) : 0);
  detail::io::ProgressSink counted(sink, meter);
  try {
    r.write(c.root, canonical_write_options(c, r.info.format, threads),
            meter.active() ? static_cast<detail::io::Sink&>(counted) : sink);
  } catch (const Error& e) {
    throw e.located(c.file);
  }
  meter.finish();
  CanonCheck out;
  out.file = c.file;
  out.format = c.format;
  out.canonical_format = r.info.format;
  out.size = bytes.size();
  out.canonical_size = sink.position();
  out.first_difference = sink.first_difference();
  out.canonical = out.first_difference == kNoOffset;
  if (out.canonical) return out;
  if (out.format != out.canonical_format) {
    out.reason =
        fmt::format("a {} file; its canonical form is {}", format_name(out.format), format_name(out.canonical_format));
  } else {
    out.reason = fmt::format("differs from its canonical {} bytes at byte {} ({} bytes, canonical {})",
                             format_name(out.canonical_format), out.first_difference, out.size, out.canonical_size);
  }
  return out;
}

CanonCheck check_canonical_file(const std::filesystem::path& path, const CanonCheckOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(rules::kCanonCheckDirectory, "a directory; canon --check compares files", path.string());
  const Checkpoint c = read_file(path, options.read);
  if (c.mapping == nullptr) {  // read_file of a shard index reads a directory
    (void)single_file_row(c);
    throw Error(rules::kCanonCheckDirectory, "not read from one file", c.file);
  }
  return check_canonical(c, c.mapping->bytes(), options.threads, options.progress);
}

}  // namespace tensorseal
