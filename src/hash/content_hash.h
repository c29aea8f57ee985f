// The content hash with progress counted on a meter the caller owns: for tools that
// run it as one phase of longer work (inspect: per-tensor SHA-256, then the hash).
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensorseal/error.h"
#include "tensorseal/hash.h"
#include "tensorseal/value.h"
#include "util/progress.h"

namespace tensorseal::detail::hash {

// A recursive graph whose encoding (docs/content-hash.md "Recursive values") would
// expand more than kMaxRefExpansion containers below its Refs.
inline constexpr Rule kRecursionExpansion{"hash/recursion-expansion", ErrorKind::kLimit};
inline constexpr std::uint64_t kMaxRefExpansion = std::uint64_t{1} << 24;

// content_hash of each of `roots` (trees sharing no tensors or storages), with one pool
// of jobs over all of them; errors[i] is set (and the digest empty) for a tree whose
// pending checksum failed. options.progress counts the bytes of all.
[[nodiscard]] std::vector<std::string> content_hash_many(const std::vector<const Value*>& roots,
                                                         const HashOptions& options,
                                                         std::vector<std::exception_ptr>& errors);
// The size of the leaf chunks (docs/content-hash.md): 1 MiB of row-major element bytes.
inline constexpr std::uint64_t kLeafChunk = std::uint64_t{1} << 20;
// enc(v): the bytes content_hash digests under its domain string (tensors hashed here).
[[nodiscard]] std::string encode_value(const Value& v, const HashOptions& options);
// content_hash(root) where each tensor node whose Tensor is a key of `encoded` is
// encoded as the bytes given (its enc(), made elsewhere: a tensor the ranks of a job
// hash together) instead of from its storage.
[[nodiscard]] std::string content_hash_encoded(const Value& root,
                                               const std::unordered_map<const Tensor*, std::string>& encoded,
                                               const HashOptions& options);
// content_hash(root, options), also giving each tensor's leaf chunk digests (raw bytes,
// in chunk order) in `chunks`.
[[nodiscard]] std::string content_hash_chunks(const Value& root, const HashOptions& options,
                                              std::unordered_map<const Tensor*, std::vector<std::string>>& chunks);
// content_hash(root) where the leaf chunk digests (raw bytes) of some tensors are
// known already: known[t][c], when not empty, is used instead of reading chunk c of t.
[[nodiscard]] std::string content_hash_known(const Value& root,
                                             const std::unordered_map<const Tensor*, std::vector<std::string>>& known,
                                             const HashOptions& options);
// enc() of a plain tensor (flags 0) of `dtype` and `shape` whose leaf digest is `leaf`.
[[nodiscard]] std::string encode_plain_tensor(DType dtype, const std::vector<std::int64_t>& shape,
                                              std::string_view leaf);
// leaf(b) from the digests of b's chunks, in order (raw digest bytes).
[[nodiscard]] std::string leaf_digest(HashAlgo algo, std::uint64_t nbytes,
                                      const std::vector<std::string>& chunk_digests);
// Bytes content_hash reads for `root` (each tensor and bare storage once).
[[nodiscard]] std::uint64_t content_hash_bytes(const Value& root);
// content_hash(root, options), counting its bytes on `meter` (options.progress unused).
[[nodiscard]] std::string content_hash(const Value& root, const HashOptions& options, util::ProgressMeter& meter);
// The same, also giving, for each tensor over a streamed storage (Storage::is_streamed:
// an inflated .npz member) that it reads in order, tensor_sha256 of its elements,
// computed in the same pass: inspect needs both, and a stream costs its decoding.
[[nodiscard]] std::string content_hash(const Value& root, const HashOptions& options, util::ProgressMeter& meter,
                                       std::unordered_map<const Tensor*, std::string>& streamed_sha256);
// tensor_sha256_all, counting each tensor's nbytes on `meter`.
[[nodiscard]] std::vector<std::string> tensor_sha256_all(const std::vector<TensorRef>& tensors, unsigned threads,
                                                         util::ProgressMeter& meter);

}  // namespace tensorseal::detail::hash
