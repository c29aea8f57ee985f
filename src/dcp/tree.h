// What a DCP checkpoint's items mean together, shared by the directory reader and the
// collective hash of live state (dcp/live.cc): chunks tile their tensor, and flat
// items are nested again along their planner_data paths.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dcp/metadata.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::dcp {

// The value set_element put at e.path (or root[e.fqn] without a path); null if none.
[[nodiscard]] const Value* find_element(const Value& root, const Entry& e);

// The row-major bytes of block [offsets, offsets + sizes) of a tensor of `shape` are
// `count` runs of `bytes` each, in increasing order: with k the last dimension the
// block does not span whole, one run per index of dimensions < k. A block spanning
// the tensor is one run. `item`: bytes per element (sub-byte dtypes: one run of the
// packed bytes, which needs the block to be the whole tensor).
struct BlockRuns {
  std::vector<std::int64_t> shape, offsets, sizes;
  std::uint64_t item = 0, count = 0, bytes = 0;
  std::size_t k = 0;
  // Global byte offset of run r (r < count).
  [[nodiscard]] std::uint64_t start(std::uint64_t r) const;
};
[[nodiscard]] BlockRuns block_runs(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& offsets,
                                   const std::vector<std::int64_t>& sizes, std::uint64_t item, std::uint64_t nbytes);

// The leaf chunks (hash/content_hash.h kLeafChunk) of a tensor of `nbytes` bytes that
// lie inside one run of `runs`: calls f(chunk index, byte offset of the chunk in the
// block's own row-major bytes, chunk length).
void chunks_inside(const BlockRuns& runs, std::uint64_t nbytes,
                   const std::function<void(std::uint64_t, std::uint64_t, std::uint64_t)>& f);

// Chunks must lie inside the tensor, not overlap, and cover it (zero-volume chunks are
// ignored). Throws dcp/chunk-outside, dcp/chunk-overlap or dcp/chunk-gap naming `file`.
void check_tiling(const Entry& e, const std::string& file);

// DCP's set_element: puts `v` at e.path under `root` (a dict): str parts are dict
// keys, int parts list indices (lists grow with None). Paths that DCP itself could not
// have produced together are refused (dcp/path-conflict, naming `file`).
void set_element(Value& root, const Entry& e, Value v, const std::string& file, std::uint64_t max_entries);

}  // namespace tensorseal::detail::dcp
