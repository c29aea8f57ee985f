// tensorseal/scan.h — what a file's pickles would import, and how dangerous that is.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tensorseal/checkpoint.h"

namespace tensorseal {

enum class Verdict : std::uint8_t { kSafe, kUnknown, kDangerous };
std::string_view verdict_name(Verdict v) noexcept;  // "safe", "unknown", "dangerous"

struct ScanFinding {
  std::string module, name;
  std::string where;    // first place it is referenced
  std::size_t count = 0;  // how many references
  Verdict verdict = Verdict::kUnknown;
  std::string reason;   // why it is classed so
};

struct ScanReport {
  std::string file;
  Format format = Format::kUnknown;
  Verdict verdict = Verdict::kSafe;   // the worst finding
  std::vector<ScanFinding> findings;  // unique globals, in first-reference order
};

// Classifies one global name. Known-safe: what torch's weights_only loader allows plus
// numpy's array reconstruction; dangerous: code execution, imports, I/O, processes,
// attribute access tricks; everything else (user classes...) is unknown.
Verdict classify_global(std::string_view module, std::string_view name, std::string* reason = nullptr);

// Scans a checkpoint already read (outer and nested pickles alike).
[[nodiscard]] ScanReport scan(const Checkpoint& c);
// Reads and scans a file. Never executes anything.
[[nodiscard]] ScanReport scan_file(const std::filesystem::path& path, const ReadOptions& options = {});

}  // namespace tensorseal
