// tensorseal/format.h — the formats tensorseal reads and writes.
//
// Every format is one row of one table (src/api/formats.cc; its names in
// src/core/format_names.cc): its name, the other names users may give it, its file
// extensions, how it is recognised, its reader and writer with the writer's options
// (FormatParam: the CLI's flags and Python's keywords), and the format `canon` writes
// for it. Everything that names, detects,
// reads or writes a format — read_file/write_file, `tseal canon`/`convert --to`, the
// Python `format=` argument — goes through this table; nothing else lists formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorseal/export.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

enum class Format : std::uint8_t {
  kUnknown,
  kTorchZip,
  kTorchLegacy,
  kPickle,
  kSafetensors,
  kNpy,
  kNpz,
  kHfShards,
  kDcp,
  kTorchTar,
};

// Options of a format's writer by name, values as text (WriteOptions::format_options),
// and a checkpoint's layout in the same terms (Checkpoint::layout): what canon keeps.
using FormatOptions = std::vector<std::pair<std::string, std::string>>;

// One named option of a format's writer (FormatInfo::params), declared by the format's
// folder. The CLI's flags, Python's keywords and the keys of FormatOptions are these.
struct FormatParam {
  std::string_view name;  // the FormatOptions key and the Python keyword ("max_shard_size")
  // The CLI flag without "--" ("shards"; it implies the format); empty: a layout only
  // `canon` sets (read from a checkpoint), neither a flag nor a keyword.
  std::string_view flag;
  std::string_view value;  // the value's name in help texts ("SIZE", "N")
  std::string_view help;   // one line
  // The value as the writer reads it, checked ("5GB" -> "5000000000"). Throws Error
  // (api/invalid-argument, or a rule of the format).
  std::string (*parse)(std::string_view text) = nullptr;
  // Another parameter of the format this one overrides when given: `convert` drops the
  // kept layout it names (a new shard size replaces the input's split).
  std::string_view replaces;
};

struct FormatInfo {
  Format format = Format::kUnknown;
  std::string_view name;                         // "torch-zip", "safetensors", ...
  std::span<const std::string_view> aliases;     // other accepted names ("pt", "legacy")
  std::span<const std::string_view> extensions;  // lower case with the dot; first = preferred
                                                 // (none: a directory, e.g. hf-shards)
  std::string_view description;                  // one line, for help texts
  bool writable = false;                         // write_file can produce it
  Format canonical = Format::kUnknown;           // what `canon` writes for a file of this format
  bool directory = false;                        // a directory of files (read and written whole)
  std::span<const FormatParam> params;           // its writer's options (none for most)
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
// The option `name` of format `f`'s writer; null when it has none of that name.
[[nodiscard]] const FormatParam* format_param(Format f, std::string_view name) noexcept;
// The value of `name` in `options` ("" when absent).
[[nodiscard]] std::string_view option_value(const FormatOptions& options, std::string_view name) noexcept;
// Sets option `name` of format `f` to `text` as its FormatParam::parse reads it,
// replacing an earlier value. Throws Error api/invalid-argument for a name `f` has no
// option of, or the parser's error.
void set_option(FormatOptions& options, Format f, std::string_view name, std::string_view text);

// Recognises a file by its first bytes (never by its name); kUnknown when no row does.
[[nodiscard]] Format detect_format(std::span<const std::byte> head) noexcept;

}  // namespace tensorseal
TENSORSEAL_API_END
