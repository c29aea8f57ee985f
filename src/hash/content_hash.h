// The content hash with progress counted on a meter the caller owns: for tools that
// run it as one phase of longer work (inspect: per-tensor SHA-256, then the hash).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorseal/hash.h"
#include "tensorseal/value.h"
#include "util/progress.h"

namespace tensorseal::detail {

// Bytes content_hash reads for `root` (each tensor and bare storage once).
[[nodiscard]] std::uint64_t content_hash_bytes(const Value& root);
// content_hash(root, options), counting its bytes on `meter` (options.progress unused).
[[nodiscard]] std::string content_hash(const Value& root, const HashOptions& options, util::ProgressMeter& meter);
// tensor_sha256_all, counting each tensor's nbytes on `meter`.
[[nodiscard]] std::vector<std::string> tensor_sha256_all(const std::vector<TensorRef>& tensors, unsigned threads,
                                                         util::ProgressMeter& meter);

}  // namespace tensorseal::detail
