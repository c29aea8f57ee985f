// zip: constants and rules (spec: docs/formats/zip.md; PKWARE APPNOTE 6.3.x).
//
//   archive = [prefix] (local_header name extra data [descriptor])*
//             central_header*  [zip64_eocd zip64_locator]  eocd [comment]
//
// Every size below is the fixed part of a record; the variable parts (name, extra,
// comment) follow it. Offsets inside records are listed in reader.cc next to use.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/topic.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::zip {

// Signatures (little-endian u32 "PK\x03\x04" ...).
inline constexpr std::uint32_t kLocalHeaderSig = 0x04034b50;    // "PK\3\4"
inline constexpr std::uint32_t kCentralHeaderSig = 0x02014b50;  // "PK\1\2"
inline constexpr std::uint32_t kEocdSig = 0x06054b50;           // "PK\5\6"
inline constexpr std::uint32_t kZip64EocdSig = 0x06064b50;      // "PK\6\6"
inline constexpr std::uint32_t kZip64LocatorSig = 0x07064b50;   // "PK\6\7"
inline constexpr std::uint32_t kDescriptorSig = 0x08074b50;     // "PK\7\8"

// sig, version needed, flags, method, time, date, crc32, csize, usize, name len, extra len
inline constexpr std::uint64_t kLocalHeaderSize = 4 + 2 + 2 + 2 + 2 + 2 + 4 + 4 + 4 + 2 + 2;  // = 30
// sig, made by, needed, flags, method, time, date, crc32, csize, usize, name len,
// extra len, comment len, disk start, internal attr, external attr, local offset
inline constexpr std::uint64_t kCentralHeaderSize =
    4 + 2 + 2 + 2 + 2 + 2 + 2 + 4 + 4 + 4 + 2 + 2 + 2 + 2 + 2 + 4 + 4;  // = 46
// sig, disk, cd disk, entries on disk, entries, cd size, cd offset, comment len
inline constexpr std::uint64_t kEocdSize = 4 + 2 + 2 + 2 + 2 + 4 + 4 + 2;  // = 22
inline constexpr std::uint64_t kMaxCommentSize = 0xFFFF;
// The EOCD starts within the last 22 + 65535 bytes.
inline constexpr std::uint64_t kEocdSearchSpan = kEocdSize + kMaxCommentSize;  // = 65557
// sig, disk of zip64 eocd, offset of zip64 eocd, total disks
inline constexpr std::uint64_t kZip64LocatorSize = 4 + 4 + 8 + 4;  // = 20
// sig, record size, made by, needed, disk, cd disk, entries on disk, entries, cd size,
// cd offset (the "record size" field counts everything after itself: 56 - 12 = 44)
inline constexpr std::uint64_t kZip64EocdSize = 4 + 8 + 2 + 2 + 4 + 4 + 8 + 8 + 8 + 8;  // = 56
inline constexpr std::uint64_t kZip64EocdRecordSizeField = kZip64EocdSize - 4 - 8;      // = 44
// Data descriptor: [sig] crc32 csize usize, sizes 4 bytes (8 in zip64 entries).
inline constexpr std::uint64_t kDescriptorSize32 = 4 + 4 + 4 + 4;  // = 16
inline constexpr std::uint64_t kDescriptorSize64 = 4 + 4 + 8 + 8;  // = 24
// Extra field: id u16, data size u16, data.
inline constexpr std::uint64_t kExtraHeaderSize = 2 + 2;  // = 4
inline constexpr std::uint16_t kZip64ExtraId = 0x0001;
// torch's alignment padding field: "FB" (0x4246 little-endian), filled with 'Z'.
inline constexpr std::uint16_t kTorchPaddingExtraId = 0x4246;

inline constexpr std::uint32_t kSentinel32 = 0xFFFFFFFF;  // "see the zip64 extra field"
inline constexpr std::uint16_t kSentinel16 = 0xFFFF;

// General purpose flag bits.
inline constexpr std::uint16_t kFlagEncrypted = 1u << 0;
inline constexpr std::uint16_t kFlagDataDescriptor = 1u << 3;
inline constexpr std::uint16_t kFlagStrongEncryption = 1u << 6;
inline constexpr std::uint16_t kFlagUtf8 = 1u << 11;

inline constexpr std::uint16_t kMethodStored = 0;
inline constexpr std::uint16_t kMethodDeflated = 8;
// Read by Python's zipfile (numpy.load), not by torch's miniz: only scan decompresses them.
inline constexpr std::uint16_t kMethodBzip2 = 12;
inline constexpr std::uint16_t kMethodLzma = 14;

// Names longer than this are refused (the format allows 65535; no real checkpoint
// comes near; PATH_MAX on Linux is 4096).
inline constexpr std::uint64_t kMaxNameLength = 4096;
// Deflate cannot expand data more than about 1032:1 (a 258-byte match costs at least
// 2 bits); entries claiming more are corrupt or bombs.
inline constexpr std::uint64_t kMaxDeflateRatio = 1032;

namespace rules {
using K = ErrorKind;
inline constexpr Rule kNoEocd{"zip/no-end-of-central-directory", K::kCorrupt};
inline constexpr Rule kBadEocd{"zip/bad-end-of-central-directory", K::kCorrupt};
inline constexpr Rule kMultiDisk{"zip/multi-disk", K::kUnsupported};
inline constexpr Rule kBadZip64Locator{"zip/bad-zip64-locator", K::kCorrupt};
inline constexpr Rule kBadZip64Eocd{"zip/bad-zip64-end-record", K::kCorrupt};
inline constexpr Rule kZip64Mismatch{"zip/zip64-mismatch", K::kCorrupt};
inline constexpr Rule kCentralOutside{"zip/central-directory-outside-file", K::kCorrupt};
inline constexpr Rule kCentralPosition{"zip/central-directory-position", K::kCorrupt};
inline constexpr Rule kCentralSize{"zip/central-directory-size", K::kCorrupt};
inline constexpr Rule kBadCentralHeader{"zip/bad-central-header", K::kCorrupt};
inline constexpr Rule kTooManyEntries{"zip/too-many-entries", K::kLimit};
inline constexpr Rule kBadExtra{"zip/bad-extra-field", K::kCorrupt};
inline constexpr Rule kBadZip64Extra{"zip/bad-zip64-extra", K::kCorrupt};
inline constexpr Rule kBadName{"zip/bad-name", K::kCorrupt};
inline constexpr Rule kDuplicateName{"zip/duplicate-name", K::kCorrupt};
inline constexpr Rule kCaseCollision{"zip/case-insensitive-duplicate", K::kCorrupt};
inline constexpr Rule kAmbiguousEocd{"zip/ambiguous-end-of-central-directory", K::kCorrupt};
inline constexpr Rule kEncrypted{"zip/encrypted", K::kUnsupported};
inline constexpr Rule kUnsupportedMethod{"zip/unsupported-method", K::kUnsupported};
inline constexpr Rule kLocalMissing{"zip/local-header-missing", K::kCorrupt};
inline constexpr Rule kLocalMismatch{"zip/local-central-mismatch", K::kCorrupt};
inline constexpr Rule kDataPastEnd{"zip/data-past-end", K::kCorrupt};
inline constexpr Rule kBadDescriptor{"zip/bad-data-descriptor", K::kCorrupt};
inline constexpr Rule kOverlap{"zip/overlapping-entries", K::kCorrupt};
inline constexpr Rule kStoredSize{"zip/stored-size-mismatch", K::kCorrupt};
inline constexpr Rule kInflateFailed{"zip/inflate-failed", K::kCorrupt};
inline constexpr Rule kDeflateRatio{"zip/deflate-ratio", K::kCorrupt};
inline constexpr Rule kEntryTooLarge{"zip/entry-too-large", K::kLimit};
inline constexpr Rule kInflateLimit{"zip/inflate-limit", K::kLimit};
inline constexpr Rule kCrcMismatch{"zip/crc-mismatch", K::kCorrupt};
// Writer-side rules.
inline constexpr Rule kWriterMisuse{"zip/writer-misuse", K::kInternal};
inline constexpr Rule kWriterName{"zip/writer-bad-name", K::kInvalidArgument};
}  // namespace rules

// Facts about an archive (zip::describe).
namespace topics {
using detail::core::Topic;
inline constexpr Topic kPrefix{
    "zip.prefix",
    "the folder name inside the zip archive differs; torch.save takes it from the file name, so saving the same "
    "tensors as a.pt and b.pt gives different bytes"};
inline constexpr Topic kRecords{"zip.records",
                                "the archive holds different records, or the same records in a different order"};
inline constexpr Topic kTimestamps{"zip.timestamps", "the zip entries carry different modification times"};
inline constexpr Topic kDataDescriptors{"zip.data_descriptors",
                                        "the zip entries differ in whether a data descriptor follows their data"};
inline constexpr Topic kCreateSystem{"zip.create_system",
                                     "the zip directory records a different 'made by' operating system"};
inline constexpr Topic kExtraFields{
    "zip.extra_fields",
    "the zip entries carry different extra fields (torch's alignment padding or tool-added metadata)"};
inline constexpr Topic kCompression{"zip.compression", "the zip entries are compressed differently"};
inline constexpr Topic kZip64{"zip.zip64",
                              "the archive differs in whether it has zip64 end records (torch always writes them)"};
inline constexpr Topic kUnaccountedBytes{"zip.unaccounted_bytes",
                                         "the archive holds bytes that belong to no entry (prepended data, gaps)"};
inline constexpr Topic kAll[] = {kPrefix,      kRecords,     kTimestamps, kDataDescriptors, kCreateSystem,
                                 kExtraFields, kCompression, kZip64,      kUnaccountedBytes};
}  // namespace topics

}  // namespace tensorseal::detail::zip
