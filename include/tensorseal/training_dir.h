// tensorseal/training_dir.h — a training directory: a Hugging Face Trainer
// checkpoint-N/, an accelerate save_state folder, any folder that holds checkpoints
// beside other files (JSON, tokenizers, logs). `tseal hash|verify|canon DIR` use it
// for every directory that is not one checkpoint layout (docs/content-hash.md,
// "Training directories").
//
// Its entries, in byte order of their relative paths ('/'-separated):
//   - a checkpoint: a file whose bytes a format row detects (torch zip/legacy/pickle,
//     safetensors, npy, npz);
//   - a layout: a subdirectory holding a DCP .metadata (its path: the subdirectory), or
//     a Hugging Face shard index `*.safetensors.index.json` / `*.bin.index.json` (its
//     path: the index file), which takes the shard files it names;
//   - every other file (kind kFile), hashed by its bytes.
// Symlinks and special files are refused (dir/entry): a digest of the directory must
// not depend on what a link points to.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tensorseal/canon.h"
#include "tensorseal/error.h"
#include "tensorseal/export.h"
#include "tensorseal/format.h"
#include "tensorseal/hash.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

namespace rules {
inline constexpr Rule kDirEntry{"dir/entry", ErrorKind::kUnsupported};        // a symlink or special file
inline constexpr Rule kDirTarget{"dir/target", ErrorKind::kInvalidArgument};  // canon would replace a directory
}  // namespace rules

struct DirEntry {
  enum class Kind { kCheckpoint, kLayout, kFile };
  std::string path;  // relative, '/'-separated
  Kind kind = Kind::kFile;
  Format format = Format::kUnknown;  // of a checkpoint or layout
  // The files a layout takes (relative paths, sorted), itself excluded; empty otherwise.
  std::vector<std::string> members;
  std::string digest;  // content hash (checkpoint, layout) or hash of the bytes (file); "" until hashed
};

// The entries of `dir`, classified, digests empty. Throws Error (dir/entry, io/open).
[[nodiscard]] std::vector<DirEntry> list_training_dir(const std::filesystem::path& dir);

// Whether `path` is a directory to treat as a training directory: a directory that
// is not one checkpoint layout, i.e. not a DCP directory and not a model directory
// whose only checkpoint is the one read_file reads for it (a shard index at its top,
// or its model.safetensors / pytorch_model.bin). False for files and missing paths.
[[nodiscard]] bool is_training_dir(const std::filesystem::path& path);

struct DirHash {
  std::string dir;
  std::vector<DirEntry> entries;  // every entry, digests set
  std::string digest;             // of the whole directory (docs/content-hash.md)
};

// Hashes every entry (checkpoints and layouts as hash_file, with their checksums
// verified; files by their bytes, with options.algo) and the directory. Throws the
// first entry's Error, naming its file.
[[nodiscard]] DirHash hash_training_dir(const std::filesystem::path& dir, const HashOptions& options = {});

// The directory digest of entries with digests set (what hash_training_dir computes).
[[nodiscard]] std::string training_dir_digest(const std::vector<DirEntry>& entries, HashAlgo algo);

// Writes the canonical form of `dir` to `out`, atomically as a whole directory: each
// checkpoint file as convert_file writes its canonical form (same relative path), each
// DCP layout as its canonical directory, every other file (shard indexes included)
// copied byte for byte. `out` must not exist, or be an empty directory (dir/target).
// Returns false, writing nothing, when options.accept declined a checkpoint (its
// path in `declined`).
bool canon_training_dir(const std::filesystem::path& dir, const std::filesystem::path& out,
                        const ConvertOptions& options, std::string* declined = nullptr);

}  // namespace tensorseal
TENSORSEAL_API_END
