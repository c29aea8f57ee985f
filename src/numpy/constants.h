// numpy .npy / .npz: constants and rules (spec: docs/formats/npy.md; numpy's own:
// numpy/lib/_format_impl.py, numpy/lib/_npyio_impl.py).
//
//   npy    = "\x93NUMPY" major minor hlen header data
//   hlen   = u16 le (1.0) | u32 le (2.0, 3.0)
//   header = Python dict literal {'descr': D, 'fortran_order': B, 'shape': (N, ...), }
//            then spaces and '\n' so that data starts on a multiple of 64
//   npz    = zip of "<key>.npy" members (STORED by savez, DEFLATED by savez_compressed)
#pragma once

#include <cstdint>
#include <string_view>

#include "core/topic.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::numpy {

inline constexpr std::string_view kMagic{"\x93NUMPY", 6};
inline constexpr std::uint64_t kPrefixSizeV1 = 6 + 1 + 1 + 2;  // magic, major, minor, u16 hlen = 10
inline constexpr std::uint64_t kPrefixSizeV2 = 6 + 1 + 1 + 4;  // magic, major, minor, u32 hlen = 12
// numpy pads the header so data starts on a multiple of this (ARRAY_ALIGN).
inline constexpr std::uint64_t kArrayAlign = 64;
// numpy leaves room to grow the first (C order) or last (Fortran) dimension in place:
// the header gets 21 - len(repr(dim)) extra spaces (GROWTH_AXIS_MAX_DIGITS).
inline constexpr std::uint64_t kGrowthAxisMaxDigits = 21;
// Headers larger than this are refused (numpy's own default cap is 10,000 bytes; the
// largest header a supported array can need is under 2 KiB).
inline constexpr std::uint64_t kMaxHeaderSize = 1u << 20;
inline constexpr std::string_view kMemberSuffix = ".npy";

namespace rules {
using K = ErrorKind;
inline constexpr Rule kBadMagic{"npy/bad-magic", K::kCorrupt};
inline constexpr Rule kBadVersion{"npy/unsupported-version", K::kUnsupported};
inline constexpr Rule kTruncatedHeader{"npy/truncated-header", K::kCorrupt};
inline constexpr Rule kHeaderTooLarge{"npy/header-too-large", K::kLimit};
inline constexpr Rule kBadHeader{"npy/bad-header", K::kCorrupt};
inline constexpr Rule kBadShape{"npy/bad-shape", K::kCorrupt};
inline constexpr Rule kTooManyDims{"npy/too-many-dims", K::kLimit};
inline constexpr Rule kShapeOverflow{"npy/shape-overflow", K::kCorrupt};
inline constexpr Rule kObjectArray{"npy/object-array", K::kUnsupported};
inline constexpr Rule kStructured{"npy/structured-dtype", K::kUnsupported};
inline constexpr Rule kDtypeUnsupported{"npy/dtype-unsupported", K::kUnsupported};
inline constexpr Rule kTruncatedData{"npy/truncated-data", K::kCorrupt};
inline constexpr Rule kTrailingData{"npy/trailing-data", K::kCorrupt};
inline constexpr Rule kTooLarge{"npy/too-large", K::kLimit};
// npz
inline constexpr Rule kMemberName{"npz/member-not-npy", K::kUnsupported};
// Writer-side rules.
inline constexpr Rule kNotTensor{"npy/not-a-tensor", K::kInvalidArgument};
inline constexpr Rule kNotFlat{"npz/not-flat", K::kInvalidArgument};
inline constexpr Rule kWriteDtype{"npy/dtype-not-writable", K::kUnsupported};
}  // namespace rules

// Facts about a .npy image (alone, or as an .npz member).
namespace topics {
using detail::core::Topic;
inline constexpr Topic kVersion{"npy.version", "the .npy format version differs (1.0, 2.0, 3.0)"};
inline constexpr Topic kHeaderPadding{"npy.header_padding", "the .npy header is padded differently"};
inline constexpr Topic kFortranOrder{"npy.fortran_order",
                                     "the array is stored in a different memory order (C vs Fortran)"};
inline constexpr Topic kByteOrder{"npy.byte_order", "the array is stored in a different byte order"};
inline constexpr Topic kAll[] = {kVersion, kHeaderPadding, kFortranOrder, kByteOrder};
}  // namespace topics

}  // namespace tensorseal::detail::numpy
