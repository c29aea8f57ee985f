// safetensors: constants and rules (spec: docs/formats/safetensors.md).
//
//   file   = u64le(N) header(N bytes) buffer
//   header = UTF-8 JSON object, padded with spaces to a multiple of 8 by writers
#pragma once

#include <cstdint>
#include <string_view>

#include "tensorseal/dtype.h"
#include "tensorseal/error.h"

namespace tensorseal::safetensors {

inline constexpr std::uint64_t kLengthPrefixSize = 8;        // u64 little-endian
inline constexpr std::uint64_t kMaxHeaderSize = 100'000'000;  // safetensors' own cap
inline constexpr std::uint64_t kHeaderAlignment = 8;          // writers pad with ' '
inline constexpr std::string_view kMetadataKey = "__metadata__";
// JSON nesting allowed in a header: serde_json's recursion limit (128) as safetensors
// applies it, i.e. at most 127 nested objects/arrays.
inline constexpr std::uint64_t kMaxJsonDepth = 128;

// Writer order: safetensors sorts tensors by dtype, descending in this enum order
// (safetensors/src/tensor.rs `Dtype`), then by name bytewise.
inline constexpr std::string_view kDtypeOrder[] = {
    "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
    "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
    "C64", "F64", "I64", "U64"};

namespace rules {
using K = ErrorKind;
inline constexpr Rule kFileTooSmall{"safetensors/file-too-small", K::kCorrupt};
inline constexpr Rule kHeaderTooLarge{"safetensors/header-too-large", K::kLimit};
inline constexpr Rule kHeaderLength{"safetensors/header-length", K::kCorrupt};
inline constexpr Rule kHeaderUtf8{"safetensors/header-utf8", K::kCorrupt};
inline constexpr Rule kHeaderJson{"safetensors/header-json", K::kCorrupt};
inline constexpr Rule kHeaderNotObject{"safetensors/header-not-object", K::kCorrupt};
inline constexpr Rule kDuplicateKey{"safetensors/duplicate-key", K::kCorrupt};
inline constexpr Rule kMetadataType{"safetensors/metadata-type", K::kCorrupt};
inline constexpr Rule kEntryType{"safetensors/entry-type", K::kCorrupt};
inline constexpr Rule kUnknownDtype{"safetensors/unknown-dtype", K::kCorrupt};
inline constexpr Rule kBadShape{"safetensors/bad-shape", K::kCorrupt};
inline constexpr Rule kBadOffsets{"safetensors/bad-offsets", K::kCorrupt};
inline constexpr Rule kSizeOverflow{"safetensors/size-overflow", K::kCorrupt};
inline constexpr Rule kSizeMismatch{"safetensors/size-mismatch", K::kCorrupt};
inline constexpr Rule kMisaligned{"safetensors/misaligned-sub-byte", K::kCorrupt};
inline constexpr Rule kTiling{"safetensors/offsets-tiling", K::kCorrupt};
inline constexpr Rule kBufferLength{"safetensors/buffer-length", K::kCorrupt};
inline constexpr Rule kTooManyTensors{"safetensors/too-many-tensors", K::kLimit};
inline constexpr Rule kBadStructure{"safetensors/bad-structure", K::kCorrupt};
// Writer-side rules.
inline constexpr Rule kNotFlat{"safetensors/not-flat", K::kInvalidArgument};
inline constexpr Rule kDtypeUnsupported{"safetensors/dtype-unsupported", K::kUnsupported};
inline constexpr Rule kReservedName{"safetensors/reserved-name", K::kInvalidArgument};
}  // namespace rules

}  // namespace tensorseal::safetensors
