// safetensors: constants and rules (spec: docs/formats/safetensors.md).
//
//   file   = u64le(N) header(N bytes) buffer
//   header = UTF-8 JSON object, padded with spaces to a multiple of 8 by writers
#pragma once

#include <cstdint>
#include <string_view>

#include "core/topic.h"
#include "tensorseal/dtype.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::safetensors {

inline constexpr std::uint64_t kLengthPrefixSize = 8;         // u64 little-endian
inline constexpr std::uint64_t kMaxHeaderSize = 100'000'000;  // safetensors' own cap
inline constexpr std::uint64_t kHeaderAlignment = 8;          // writers pad with ' '
inline constexpr std::string_view kMetadataKey = "__metadata__";
// JSON nesting allowed in a header: serde_json's recursion limit (128) as safetensors
// applies it, i.e. at most 127 nested objects/arrays.
inline constexpr std::uint64_t kMaxJsonDepth = 128;

// Writer order: safetensors sorts tensors by dtype, descending in this enum order
// (safetensors/src/tensor.rs `Dtype`), then by name bytewise.
inline constexpr std::string_view kDtypeOrder[] = {
    "BOOL", "F4",  "F6_E2M3", "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
    "I16",  "U16", "F16",     "BF16",    "I32", "U32", "F32",     "C64",     "F64",     "I64",         "U64"};

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

// Facts about a safetensors file.
namespace topics {
using detail::core::Topic;
inline constexpr Topic kHeaderLength{"safetensors.header_length", "the safetensors header has a different length"};
inline constexpr Topic kHeaderPadding{"safetensors.header_padding",
                                      "the safetensors header is padded with a different number of spaces"};
inline constexpr Topic kKeyOrder{"safetensors.key_order",
                                 "the tensors are listed in a different order in the safetensors header"};
inline constexpr Topic kMetadataOrder{
    "safetensors.metadata_order",
    "the __metadata__ keys are in a different order; safetensors writes them from a hash map, so the order "
    "changes between runs"};
inline constexpr Topic kStructure{"safetensors.structure",
                                  "the safetensors file stores the checkpoint's structure in its metadata differently"};
inline constexpr Topic kAll[] = {kHeaderLength, kHeaderPadding, kKeyOrder, kMetadataOrder, kStructure};
}  // namespace topics

}  // namespace tensorseal::detail::safetensors
