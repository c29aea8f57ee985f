// The format table's naming columns: each format's name, the other names users may
// give it and its file extensions. Below every format folder and src/api (whose rows
// add the recogniser, reader and writer), so that any layer can name a format.
#pragma once

#include <span>
#include <string_view>

#include "tensorseal/format.h"

namespace tensorseal::detail::core {

struct FormatNames {
  Format format = Format::kUnknown;
  std::string_view name;                         // "torch-zip", "safetensors", ...
  std::span<const std::string_view> aliases;     // other accepted names ("pt", "legacy")
  std::span<const std::string_view> extensions;  // lower case with the dot; first = preferred
};

// Every format's names, one entry per Format value but kUnknown.
std::span<const FormatNames> format_names() noexcept;
// The names of `f`; null for kUnknown.
const FormatNames* names_of(Format f) noexcept;
// The table's name of `f` ("unknown" for kUnknown): tensorseal::format_name.
std::string_view format_name(Format f) noexcept;

}  // namespace tensorseal::detail::core
