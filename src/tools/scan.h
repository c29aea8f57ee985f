// Internal pieces of `scan` shared by scan(Checkpoint) and scan_file.
#pragma once

#include <string>
#include <vector>

#include "tensorseal/scan.h"

namespace tensorseal::detail::tools {

// The report for `globals` (in reference order): unique globals in first-reference
// order with counts, each classified, and the worst verdict.
[[nodiscard]] ScanReport summarize(const std::string& file, Format format, const std::vector<GlobalRef>& globals);

}  // namespace tensorseal::detail::tools
