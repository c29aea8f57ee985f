// tensorseal/canon.h — the canonical form of a checkpoint (`tseal canon`), and whether
// a file already is it (`tseal canon --check`, for CI and pre-commit).
//
// A checkpoint's canonical form is the file write_file produces for its content in the
// format the format table names as its family's canonical one (FormatInfo::canonical:
// torch zip, legacy and pickle -> torch-zip; safetensors, npy, npz stay), carrying the
// file's safetensors user metadata (and, for a shard directory, its split into files;
// for a DCP directory, its number of ranks).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>

#include "tensorseal/checkpoint.h"
#include "tensorseal/error.h"
#include "tensorseal/export.h"
#include "tensorseal/format.h"
#include "tensorseal/limits.h"
#include "tensorseal/progress.h"
#include "tensorseal/write.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

namespace rules {
// canon --check compares one file's bytes; a shard directory is several files.
inline constexpr Rule kCanonCheckDirectory{"canon/check-directory", ErrorKind::kUnsupported};
}  // namespace rules

// The format `canon` writes for `c` (its format's FormatInfo::canonical).
[[nodiscard]] Format canonical_format(const Checkpoint& c);
// The WriteOptions `canon` (target = canonical_format(c)) and `convert` write `c` as
// `target` with: what target's row keeps (FormatRow::keep: user metadata for
// safetensors and hf-shards), and c.layout (a shard directory's split, a DCP
// directory's number of ranks, an npz's compression) when `target` is its own format;
// `threads` as given (never changes the bytes).
[[nodiscard]] WriteOptions canonical_write_options(const Checkpoint& c, Format target, unsigned threads = 0);
// The canonical bytes of a single-file checkpoint, in memory (`canon --stdout`).
// Throws Error kCanonCheckDirectory when the canonical format is a directory.
[[nodiscard]] std::string canonical_bytes(const Checkpoint& c, unsigned threads = 0);

struct CanonCheck {
  std::string file;                            // Checkpoint::file
  Format format = Format::kUnknown;            // detected
  Format canonical_format = Format::kUnknown;  // what canon writes for it
  bool canonical = false;                      // the bytes equal the canonical bytes
  std::uint64_t size = 0;                      // bytes of the file
  std::uint64_t canonical_size = 0;            // bytes of its canonical form
  // Offset of the first byte that differs (the shorter length when one is a prefix of
  // the other); kNoOffset when canonical.
  std::uint64_t first_difference = kNoOffset;
  std::string reason;  // one line saying why it is not canonical; empty when it is
};

struct CanonCheckOptions {
  unsigned threads = 0;  // never changes the result
  ReadOptions read;      // how check_canonical_file reads (limits, format, ...)
  Progress progress;     // canonical bytes compared of all (tensorseal/progress.h)
};

// Compares `bytes` (the file `c` was read from) with the canonical bytes of `c`,
// streaming: the canonical form is never held in memory. Writes nothing.
[[nodiscard]] CanonCheck check_canonical(const Checkpoint& c, std::span<const std::byte> bytes, unsigned threads = 0,
                                         const Progress& progress = {});
// Reads (with every checksum verified) and checks a file. Throws Error for unreadable
// input, and kCanonCheckDirectory for a directory (a shard directory is many files).
[[nodiscard]] CanonCheck check_canonical_file(const std::filesystem::path& path, const CanonCheckOptions& options = {});

struct ConvertOptions {
  ReadOptions read;              // how the input is read (format, limits, in_memory)
  Format to = Format::kUnknown;  // kUnknown: the input's canonical format (canon)
  // threads, fsync, progress, before_commit; format_options (hf-shards'
  // max_shard_size: a new split instead of the input's; dcp's world_size: this many
  // ranks instead of the input's) over the kept layout. Metadata and the layout come
  // from canonical_write_options.
  WriteOptions write;
  // Sees the checkpoint once it is read, before anything is written; false writes
  // nothing (canon's refusal of dangerous globals).
  std::function<bool(const Checkpoint&)> accept;
};

// read_file(in) and write_file of its canonical form to `out` as options.to (a file,
// or a directory for directory formats), streaming from the mapped input. The tensor
// data's container checksums (zip CRC32) are verified on another thread while the
// output is written, not before; `out` appears only once every one held, else the
// reader's error is thrown and nothing is left at `out`. Returns false (writing
// nothing) when options.accept declined the checkpoint.
bool convert_file(const std::filesystem::path& in, const std::filesystem::path& out,
                  const ConvertOptions& options = {});
// The write half of convert_file, for a checkpoint already read (e.g. from memory):
// write_file of `c`'s canonical form as options.to, with canonical_write_options(c)
// and options.write's threads, fsync, progress, before_commit and format_options.
// options.read and options.accept are not used.
void write_canonical(const Checkpoint& c, const std::filesystem::path& out, const ConvertOptions& options);

}  // namespace tensorseal
TENSORSEAL_API_END
