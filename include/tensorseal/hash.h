// tensorseal/hash.h — the content hash (definition: docs/content-hash.md).
//
// A digest of what a checkpoint means, independent of container, layout, storage
// sharing, dict order and file name. Stable forever: golden vectors pin it.
#pragma once

#include <array>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/export.h"
#include "tensorseal/progress.h"
#include "tensorseal/value.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

enum class HashAlgo : std::uint8_t { kSha256, kXxh3 };

struct HashOptions {
  HashAlgo algo = HashAlgo::kSha256;
  unsigned threads = 0;  // 0: all cores. The result never depends on this.
  ReadOptions read;      // how hash_file reads (limits, format, in_memory, ...)
  Progress progress;     // bytes hashed (and checksummed) of all; tensorseal/progress.h
};

// "sha256:<64 hex>" or "xxh3:<32 hex>".
[[nodiscard]] std::string content_hash(const Value& root, const HashOptions& options = {});

// content_hash(read_file(path).root, options): same digest, same errors. Container
// checksums over tensor data are verified while those bytes are hashed (one pass over
// memory instead of two); the digest is returned only when every one verified (else
// the reader's own error, e.g. zip/crc-mismatch).
[[nodiscard]] std::string hash_file(const std::filesystem::path& path, const HashOptions& options = {});

// One file's result of hash_files: the digest, or the error hash_file would have thrown.
struct FileHash {
  std::string digest;        // empty when error is set
  std::exception_ptr error;  // rethrow it to see the Error (file, offset, rule)
};

// hash_file of every path, in the order given, each equal to hash_file's result. The
// work of all files is shared by `options.threads` (reading and hashing: many small
// files use every core, as one large file does). options.progress counts the bytes of
// the files read so far (its total grows as files are read).
[[nodiscard]] std::vector<FileHash> hash_files(const std::vector<std::filesystem::path>& paths,
                                               const HashOptions& options = {});

// Plain SHA-256 of a tensor's elements in row-major little-endian order, as hex
// (equal to hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()).
[[nodiscard]] std::string tensor_sha256(const Tensor& t);

// Per-tensor plain SHA-256 for many tensors, in parallel; same order as input.
[[nodiscard]] std::vector<std::string> tensor_sha256_all(const std::vector<TensorRef>& tensors, unsigned threads = 0);

// SHA-256 of bytes as lowercase hex.
[[nodiscard]] std::string sha256_hex(std::span<const std::byte> bytes);

}  // namespace tensorseal
TENSORSEAL_API_END
