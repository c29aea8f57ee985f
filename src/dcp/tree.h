// What a DCP checkpoint's items mean together, shared by the directory reader and the
// collective hash of live state (dcp/live.cc): chunks tile their tensor, and flat
// items are nested again along their planner_data paths.
#pragma once

#include <cstdint>
#include <string>

#include "dcp/metadata.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::dcp {

// Chunks must lie inside the tensor, not overlap, and cover it (zero-volume chunks are
// ignored). Throws dcp/chunk-outside, dcp/chunk-overlap or dcp/chunk-gap naming `file`.
void check_tiling(const Entry& e, const std::string& file);

// DCP's set_element: puts `v` at e.path under `root` (a dict): str parts are dict
// keys, int parts list indices (lists grow with None). Paths that DCP itself could not
// have produced together are refused (dcp/path-conflict, naming `file`).
void set_element(Value& root, const Entry& e, Value v, const std::string& file, std::uint64_t max_entries);

}  // namespace tensorseal::detail::dcp
