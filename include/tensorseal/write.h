// tensorseal/write.h — writing the value tree as canonical files.
//
// Every writer is deterministic: the bytes depend only on the value tree and the
// options, never on time, addresses, file names, hash-map order or thread count.
// File writes are atomic: a temp file in the target directory, fsync, rename.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/dtype.h"
#include "tensorseal/export.h"
#include "tensorseal/progress.h"
#include "tensorseal/value.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

struct WriteOptions {
  // safetensors: user metadata for "__metadata__" (written sorted by key).
  std::vector<std::pair<std::string, std::string>> metadata;
  // safetensors: write "__metadata__":{} even when `metadata` is empty, as
  // safetensors.torch.save(..., metadata={}) does (the drop-in's byte identity).
  bool empty_metadata = false;
  unsigned threads = 0;  // 0: all cores; never changes the bytes
  bool fsync = true;     // fsync file and directory before/after the rename
  Progress progress;     // tensor bytes written of all (tensorseal/progress.h)
  // The written format's own options by name (FormatInfo::params: hf-shards'
  // max_shard_size and shard_counts, dcp's world_size, npz's compress), values as text
  // as their FormatParam::parse gives them; set them with set_option. A format reads
  // only its own names (src/<format>/format.h) and ignores the others.
  FormatOptions format_options;
  // Called once every byte is written and before the output appears (the file renamed,
  // the directory swapped into place); an exception from it aborts the write and
  // leaves nothing at the target (convert_file verifies input checksums here).
  std::function<void()> before_commit;
};

// A shard size as huggingface_hub's parse_size_to_int reads it: a number (decimals
// allowed) and one of the units KB, MB, GB, TB (decimal: "5GB" = 5e9; any case), or a
// plain byte count. Throws Error shards/bad-size.
[[nodiscard]] std::uint64_t parse_shard_size(std::string_view text);

// Writes `root` as `format` to `path` atomically. For hf-shards `path` is a directory,
// built beside the target and renamed into place as a whole. Throws tensorseal::Error; on error
// nothing is left at `path` that was not there before.
void write_file(const Value& root, const std::filesystem::path& path, Format format, const WriteOptions& options = {});
// Writes `bytes` as the whole file `path`, atomically as write_file does (for the
// tools' text outputs: manifests, signatures, reports).
void write_text_file(const std::filesystem::path& path, std::string_view bytes, bool fsync = true);

// The same bytes, in memory.
[[nodiscard]] std::string write_bytes(const Value& root, Format format, const WriteOptions& options = {});

// A .safetensors or canonical .pt save of a flat dict (str -> tensor, each over memory
// of its own) whose tensors are still being made, one by one (the Python binding
// converts them under the GIL). Such a file's layout follows from each tensor's name,
// dtype and shape alone: a writer thread plans it from the entries while the caller
// makes the tensors, and writes each tensor's bytes into the file as soon as put()
// hands the tensor over, so that the copy into the file runs while the rest of the
// dict is converted. finish() commits only the bytes write_file(root, path, format,
// options) writes; for any other root, or when the thread could not plan or write, it
// leaves nothing and says so, and the caller writes the usual way (which reports what
// is wrong).
class StreamedWrite {
 public:
  // Views into memory the caller keeps valid and unchanged until the stream is gone.
  struct Entry {
    std::string_view name;
    DType dtype;
    std::span<const std::int64_t> shape;
  };
  // `entries` in the dict's order. Null for a format other than kSafetensors and
  // kTorchZip, options this writer does not take (progress), or when no thread can be
  // started; the caller then uses write_file.
  [[nodiscard]] static std::unique_ptr<StreamedWrite> begin(const std::filesystem::path& path, Format format,
                                                            std::vector<Entry> entries,
                                                            const WriteOptions& options = {});
  // Without a finish() that returned true: stops the writer thread, removes the temp file.
  ~StreamedWrite();
  StreamedWrite(const StreamedWrite&) = delete;
  StreamedWrite& operator=(const StreamedWrite&) = delete;

  // The tensor of entries[index], kept until finish(); its bytes must not change until
  // then. One whose dtype or shape differs from the entry, or given twice, makes
  // finish() return false.
  void put(std::size_t index, std::shared_ptr<const Tensor> tensor);
  // True: `root` is a dict of exactly the entries, in order, each the tensor put, that
  // the format writes from names, dtypes and shapes alone, and the file is at `path`
  // (fsync and rename as write_file). False: nothing was written; write `root` with
  // write_file. Throws Error when the commit fails (nothing is left at `path` then).
  [[nodiscard]] bool finish(const Value& root);

 private:
  struct Impl;
  explicit StreamedWrite(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorseal
TENSORSEAL_API_END
