// tensorseal/format.h — the formats tensorseal reads and writes.
//
// Every format is one row of one table (src/api/formats.cc): its name, the other
// names users may give it, its file extensions, how it is recognised, its reader and
// writer, and the format `canon` writes for it. Everything that names, detects,
// reads or writes a format — read_file/write_file, `tseal canon`/`convert --to`, the
// Python `format=` argument — goes through this table; nothing else lists formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>

#include "tensorseal/export.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

enum class Format : std::uint8_t {
  kUnknown, kTorchZip, kTorchLegacy, kPickle, kSafetensors, kNpy, kNpz, kHfShards, kDcp, kTorchTar,
};

struct FormatInfo {
  Format format = Format::kUnknown;
  std::string_view name;                          // "torch-zip", "safetensors", ...
  std::span<const std::string_view> aliases;      // other accepted names ("pt", "legacy")
  std::span<const std::string_view> extensions;   // lower case with the dot; first = preferred
                                                  // (none: a directory, e.g. hf-shards)
  std::string_view description;                  // one line, for help texts
  bool writable = false;                          // write_file can produce it
  Format canonical = Format::kUnknown;            // what `canon` writes for a file of this format
  bool directory = false;                         // a directory of files (read and written whole)
};

// Every format, in detection order: detect_format returns the first row whose
// recogniser accepts the bytes.
[[nodiscard]] std::span<const FormatInfo> formats() noexcept;
// The row of `f`; null for kUnknown.
[[nodiscard]] const FormatInfo* format_info(Format f) noexcept;

// The table's name of `f` ("unknown" for kUnknown).
[[nodiscard]] std::string_view format_name(Format f) noexcept;
// A format by its name or one of its aliases; nullopt when none matches.
[[nodiscard]] std::optional<Format> format_from_name(std::string_view name) noexcept;
// The format a file name's extension implies (case-insensitive), or kUnknown.
[[nodiscard]] Format format_for_extension(const std::filesystem::path& path) noexcept;
// Recognises a file by its first bytes (never by its name); kUnknown when no row does.
[[nodiscard]] Format detect_format(std::span<const std::byte> head) noexcept;

}  // namespace tensorseal
TENSORSEAL_API_END
