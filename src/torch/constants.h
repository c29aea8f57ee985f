// torch checkpoint formats: constants and rules (specs: docs/formats/torch-zip.md,
// docs/formats/torch-legacy.md, docs/formats/canonical-pt.md).
#pragma once

#include <cstdint>
#include <string_view>

#include "tensorseal/error.h"

namespace tensorseal::torchfmt {

// ---- zip format -----------------------------------------------------------------
inline constexpr std::string_view kDataPkl = "data.pkl";
inline constexpr std::string_view kDataDir = "data/";
inline constexpr std::string_view kVersionRecord = "version";
inline constexpr std::string_view kDataVersionRecord = ".data/version";
inline constexpr std::string_view kByteOrderRecord = "byteorder";
inline constexpr std::string_view kFormatVersionRecord = ".format_version";
inline constexpr std::string_view kStorageAlignmentRecord = ".storage_alignment";
inline constexpr std::string_view kSerializationIdRecord = ".data/serialization_id";
// TorchScript archives carry these; they are programs, not checkpoints.
inline constexpr std::string_view kTorchScriptMarkers[] = {"constants.pkl", "code/"};
inline constexpr std::uint64_t kMinFileVersion = 1, kMaxFileVersion = 10;

// ---- legacy format --------------------------------------------------------------
// The pickled magic number and protocol version that open a legacy file.
inline constexpr std::string_view kLegacyMagic = "119547037146038801333356";  // 0x1950a86a20f9469cfc6c
inline constexpr std::int64_t kLegacyProtocolVersion = 1001;

namespace rules {
using K = ErrorKind;
inline constexpr Rule kNoDataPkl{"torch-zip/no-data-pkl", K::kCorrupt};
inline constexpr Rule kMixedPrefix{"torch-zip/entry-outside-prefix", K::kCorrupt};
inline constexpr Rule kTorchScript{"torch-zip/torchscript", K::kUnsupported};
inline constexpr Rule kBadVersion{"torch-zip/bad-version", K::kCorrupt};
inline constexpr Rule kBadByteOrder{"torch-zip/bad-byteorder", K::kCorrupt};
inline constexpr Rule kMissingStorage{"torch-zip/missing-storage-record", K::kCorrupt};
inline constexpr Rule kStorageTooSmall{"torch/storage-too-small", K::kCorrupt};
inline constexpr Rule kBadPersistentId{"torch/bad-persistent-id", K::kCorrupt};
inline constexpr Rule kBadRebuildArgs{"torch/bad-rebuild-args", K::kCorrupt};
inline constexpr Rule kUnknownStorageType{"torch/unknown-storage-type", K::kCorrupt};
inline constexpr Rule kUnsupportedRebuild{"torch/unsupported-rebuild", K::kUnsupported};
inline constexpr Rule kNestingTooDeep{"torch/nested-files-too-deep", K::kLimit};
inline constexpr Rule kLegacyMagic{"torch-legacy/bad-magic", K::kCorrupt};
inline constexpr Rule kLegacyProtocol{"torch-legacy/bad-protocol", K::kCorrupt};
inline constexpr Rule kLegacySysInfo{"torch-legacy/bad-sys-info", K::kCorrupt};
inline constexpr Rule kLegacyKeys{"torch-legacy/bad-key-list", K::kCorrupt};
inline constexpr Rule kLegacyStorageHeader{"torch-legacy/bad-storage-record", K::kCorrupt};
inline constexpr Rule kLegacyTrailing{"torch-legacy/trailing-data", K::kCorrupt};
inline constexpr Rule kPickleTrailing{"pickle-file/trailing-data", K::kCorrupt};
// Writer-side.
inline constexpr Rule kCannotWrite{"torch-writer/cannot-write", K::kUnsupported};
}  // namespace rules

}  // namespace tensorseal::torchfmt
