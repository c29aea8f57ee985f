// The naming columns of the format table (core/format_names.h), and the public
// lookups by name and extension (tensorseal/format.h) that need nothing else.
#include "core/format_names.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace tensorseal {
namespace detail::core {
namespace {

using Names = std::string_view;
constexpr std::array<Names, 3> kTorchZipAliases{"pt", "pth", "torch"};
constexpr std::array<Names, 4> kTorchZipExtensions{".pt", ".pth", ".bin", ".ckpt"};
constexpr std::array<Names, 1> kTorchLegacyAliases{"legacy"};
constexpr std::array<Names, 1> kTorchTarAliases{"tar"};
constexpr std::array<Names, 1> kSafetensorsExtensions{".safetensors"};
constexpr std::array<Names, 1> kNpyExtensions{".npy"};
constexpr std::array<Names, 1> kNpzExtensions{".npz"};
constexpr std::array<Names, 1> kHfShardsAliases{"shards"};
constexpr std::array<Names, 2> kDcpAliases{"distcp", "torch-dcp"};

constexpr std::array kNames{
    FormatNames{Format::kNpz, "npz", {}, kNpzExtensions},
    FormatNames{Format::kTorchZip, "torch-zip", kTorchZipAliases, kTorchZipExtensions},
    FormatNames{Format::kTorchTar, "torch-tar", kTorchTarAliases, {}},
    FormatNames{Format::kNpy, "npy", {}, kNpyExtensions},
    FormatNames{Format::kTorchLegacy, "torch-legacy", kTorchLegacyAliases, {}},
    FormatNames{Format::kSafetensors, "safetensors", {}, kSafetensorsExtensions},
    FormatNames{Format::kDcp, "dcp", kDcpAliases, {}},
    FormatNames{Format::kPickle, "pickle", {}, {}},
    FormatNames{Format::kHfShards, "hf-shards", kHfShardsAliases, {}},
};

}  // namespace

std::span<const FormatNames> format_names() noexcept { return kNames; }

const FormatNames* names_of(Format f) noexcept {
  for (const auto& n : kNames)
    if (n.format == f) return &n;
  return nullptr;
}

std::string_view format_name(Format f) noexcept {
  const auto* n = names_of(f);
  return n ? n->name : std::string_view("unknown");
}

}  // namespace detail::core

std::string_view format_name(Format f) noexcept { return detail::core::format_name(f); }

std::optional<Format> format_from_name(std::string_view name) noexcept {
  for (const auto& n : detail::core::format_names()) {
    if (n.name == name) return n.format;
    if (std::find(n.aliases.begin(), n.aliases.end(), name) != n.aliases.end()) return n.format;
  }
  return std::nullopt;
}

std::string_view option_value(const FormatOptions& options, std::string_view name) noexcept {
  for (const auto& [k, v] : options)
    if (k == name) return v;
  return {};
}

Format format_for_extension(const std::filesystem::path& path) noexcept {
  std::string ext = path.extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& n : detail::core::format_names())
    if (std::find(n.extensions.begin(), n.extensions.end(), ext) != n.extensions.end()) return n.format;
  return Format::kUnknown;
}

}  // namespace tensorseal
