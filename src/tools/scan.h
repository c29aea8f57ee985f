// Internal pieces of `scan` shared by scan(Checkpoint) and scan_file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tensorseal/scan.h"

namespace tensorseal::detail::tools {

// GlobalRef::module of findings that are not globals (scan_file): an unpickling
// callable (torch.storage._load_from_bytes) reached where its payload cannot be
// followed, and a shape that crashes or corrupts older loaders (CVE-2026-24747).
inline constexpr std::string_view kUnfollowedModule = "<unfollowed>";
inline constexpr std::string_view kLatentModule = "<latent>";

// The report for `globals` (in reference order): unique globals in first-reference
// order with counts, each classified, and the worst verdict.
[[nodiscard]] ScanReport summarize(const std::string& file, Format format, const std::vector<GlobalRef>& globals);

}  // namespace tensorseal::detail::tools
