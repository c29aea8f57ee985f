// The content hash with progress counted on a meter the caller owns: for tools that
// run it as one phase of longer work (inspect: per-tensor SHA-256, then the hash).
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "tensorseal/hash.h"
#include "tensorseal/value.h"
#include "util/progress.h"

namespace tensorseal::detail::hash {

// content_hash of each of `roots` (trees sharing no tensors or storages), with one pool
// of jobs over all of them; errors[i] is set (and the digest empty) for a tree whose
// pending checksum failed. options.progress counts the bytes of all.
[[nodiscard]] std::vector<std::string> content_hash_many(const std::vector<const Value*>& roots,
                                                         const HashOptions& options,
                                                         std::vector<std::exception_ptr>& errors);
// Bytes content_hash reads for `root` (each tensor and bare storage once).
[[nodiscard]] std::uint64_t content_hash_bytes(const Value& root);
// content_hash(root, options), counting its bytes on `meter` (options.progress unused).
[[nodiscard]] std::string content_hash(const Value& root, const HashOptions& options, util::ProgressMeter& meter);
// tensor_sha256_all, counting each tensor's nbytes on `meter`.
[[nodiscard]] std::vector<std::string> tensor_sha256_all(const std::vector<TensorRef>& tensors, unsigned threads,
                                                         util::ProgressMeter& meter);

}  // namespace tensorseal::detail::hash
