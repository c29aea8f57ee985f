// Internal pieces of `scan` shared by scan(Checkpoint) and scan_file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
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

// scan_file's reading of one image (a file's bytes, or a slice of one a loader reads
// as a file: a DCP item): every interpretation, findings located at `where`. Throws
// the image's error when nothing outside the safe set was seen before it, and
// detect/unknown-format when no loader would read it; else returns the report,
// incomplete when an error came after unsafe findings.
[[nodiscard]] ScanReport scan_image(std::span<const std::byte> data, const std::string& file, const std::string& where,
                                    const ReadOptions& options);
// A DCP data file walked without its metadata: every zip record in it (also inside
// zstd frames), each as torch.load would read it.
[[nodiscard]] ScanReport scan_records(const std::filesystem::path& path, const ReadOptions& options);
// A directory (src/tools/scan_dir.cc): every file a loader could open in it.
[[nodiscard]] ScanReport scan_directory(const std::filesystem::path& path, const ReadOptions& options);

}  // namespace tensorseal::detail::tools
