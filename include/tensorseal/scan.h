// tensorseal/scan.h — what a file's pickles would import, and how dangerous that is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/error.h"
#include "tensorseal/export.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

enum class Verdict : std::uint8_t { kSafe, kUnknown, kDangerous };
std::string_view verdict_name(Verdict v) noexcept;  // "safe", "unknown", "dangerous"

struct ScanFinding {
  std::string module, name;
  Verdict verdict = Verdict::kUnknown;
  std::size_t count = 0;  // how many references
  std::string where;      // first place it is referenced
  std::string reason;     // why it is classed so
};

struct ScanReport {
  std::string file;
  Format format = Format::kUnknown;
  Verdict verdict = Verdict::kSafe;   // the worst finding
  std::vector<ScanFinding> findings;  // unique globals, in first-reference order
  // How standard loaders could read the file (scan_file only): "pickle",
  // "torch-legacy", "zip", "npy", "tar", "safetensors". More than one: a polyglot.
  std::vector<std::string> interpretations;
  // Parsing stopped at an error after a global outside the safe set was seen: the
  // findings are those seen before it (a loader runs them before reaching the error).
  bool incomplete = false;
  std::string error;  // the error's one-line message, when incomplete
};

// Classifies one global name. Known-safe: what torch's weights_only loader allows plus
// numpy's array reconstruction; dangerous: code execution, imports, I/O, processes,
// attribute access tricks; everything else (user classes...) is unknown.
Verdict classify_global(std::string_view module, std::string_view name, std::string* reason = nullptr);

// Scans a checkpoint already read (outer and nested pickles alike).
[[nodiscard]] ScanReport scan(const Checkpoint& c);
// Scans a file under every interpretation a standard loader could take (pickle.load,
// torch.load's zip, legacy and tar paths, numpy.load, zipfile), nested payloads
// included; reads no tensor data and never executes anything. Throws Error when the
// file cannot be read and nothing outside the safe set was seen; when something was,
// returns the report marked incomplete instead.
[[nodiscard]] ScanReport scan_file(const std::filesystem::path& path, const ReadOptions& options = {});

namespace rules {
// A global outside the known-safe set, refused by require_safe (the first such
// finding's verdict picks the rule).
inline constexpr Rule kUnknownGlobal{"scan/unknown-global", ErrorKind::kUnsafe};
inline constexpr Rule kDangerousGlobal{"scan/dangerous-global", ErrorKind::kUnsafe};
// A directory scan met more than Limits::max_entries files and folders.
inline constexpr Rule kTooManyFiles{"scan/too-many-files", ErrorKind::kLimit};
}  // namespace rules

// What torch.load(weights_only=True) does with the report: returns when every finding
// is known-safe, else throws Error(kUnknownGlobal or kDangerousGlobal) naming the file,
// the globals outside the safe set and where the first one is referenced.
void require_safe(const ScanReport& report);

// The report as JSON (schema: docs/cli.md, "tseal scan --json").
[[nodiscard]] std::string to_json(const ScanReport& report);

}  // namespace tensorseal
TENSORSEAL_API_END
