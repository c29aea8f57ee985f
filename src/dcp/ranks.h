// DCP's per-rank metadata layout: dcp.save(..., use_collectives=False) makes every
// rank r write only its own items into __<r>_<n>.distcp and describe them in its own
// __<r>.metadata; no .metadata is written. The directory is one checkpoint: the union
// of ranks 0..n-1 (dcp/constants.h, docs/formats/dcp.md "Per-rank metadata").
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "dcp/metadata.h"
#include "tensorseal/limits.h"

namespace tensorseal::detail::dcp {

// The rank r of a file named "__<r>.metadata" (r: 1 to 9 decimal digits), else nullopt.
std::optional<std::uint32_t> metadata_rank(std::string_view file_name) noexcept;

// Parses every __<r>.metadata in `dir` and merges them, in rank order, into one
// Metadata: ranks 0..n-1 must all be there, and nothing else may claim to be a rank's
// metadata. Entries are merged by fqn in first-seen order; a tensor's chunks are the
// union of its ranks' chunks, where a chunk at the same offsets and sizes on several
// ranks is a replica and the lowest rank's is read (what that rank's own load reads);
// a bytes item several ranks wrote is read from the lowest rank. Ranks must agree on
// each fqn's kind, dtype, size and nested path (dcp/rank-metadata). storage_order is
// the ranks' storage_data concatenated; save_id joins the ranks' distinct ids.
// `name` (the path the caller gave) is the file errors name when no rank file is at fault.
// `ranks` (when given) receives n.
Metadata read_rank_metadata(const std::filesystem::path& dir, const std::string& name, const Limits& limits,
                            std::uint32_t* ranks = nullptr);

}  // namespace tensorseal::detail::dcp
