// tar: constants and rules (spec: docs/formats/tar.md; POSIX.1-2008 "pax" and "ustar",
// GNU tar's format notes, and CPython's Lib/tarfile.py, which is the reader that
// matters: torch.load opens its oldest format with tarfile).
//
//   archive = member* end
//   member  = [extension]* header(512) data padding      extension = x | L | K header + data
//   end     = zero block (512 zero bytes), then only zero bytes to the end of the file
//
// Every number a header holds is a field at a fixed offset of its 512-byte block.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/topic.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::tar {

// Every header and every run of data occupies whole blocks of this size.
inline constexpr std::uint64_t kBlock = 512;

// A field of a header: `length` bytes at `offset` (POSIX.1-2008, ustar Header Block).
struct Field {
  std::uint64_t offset, length;
};
inline constexpr Field kName{0, 100};
inline constexpr Field kMode{100, 8};
inline constexpr Field kUid{108, 8};
inline constexpr Field kGid{116, 8};
inline constexpr Field kSize{124, 12};
inline constexpr Field kMtime{136, 12};
inline constexpr Field kChecksum{148, 8};
inline constexpr Field kTypeflag{156, 1};
inline constexpr Field kLinkname{157, 100};
inline constexpr Field kMagic{257, 8};  // magic (6) + version (2)
inline constexpr Field kUname{265, 32};
inline constexpr Field kGname{297, 32};
inline constexpr Field kDevmajor{329, 8};
inline constexpr Field kDevminor{337, 8};
inline constexpr Field kPrefix{345, 155};
// name + mode + uid + gid + size + mtime + chksum + typeflag + linkname + magic +
// uname + gname + devmajor + devminor + prefix, then 12 unused bytes.
static_assert(kPrefix.offset + kPrefix.length + 12 == kBlock);

// The numeric fields tarfile parses (nti) in every header: one it cannot parse is an
// invalid header to it, which (past the first header) silently ends the archive.
inline constexpr Field kNumericFields[] = {kMode, kUid, kGid, kSize, kMtime, kChecksum, kDevmajor, kDevminor};

// The checksum is the sum of the header's bytes with the checksum field read as eight
// spaces: 8 * ' ' = 256 more than the sum of the other 504 bytes. tarfile accepts the
// sum of the bytes read as unsigned or as signed chars (old Sun and NeXT tars).
inline constexpr std::uint64_t kChecksumSpaces = 8 * ' ';

// magic + version: POSIX ustar (Python's USTAR_FORMAT and PAX_FORMAT) and GNU tar
// (Python's GNU_FORMAT).
inline constexpr std::string_view kUstarMagic{
    "ustar\0"
    "00",
    8};
inline constexpr std::string_view kGnuMagic{"ustar  \0", 8};

// Base-256 numbers (GNU): a first byte of 0x80 (positive) or 0xFF (negative, two's
// complement), then the value big-endian in the field's other bytes.
inline constexpr unsigned char kBase256Positive = 0x80, kBase256Negative = 0xFF;

// Type flags tensorseal reads. Everything else (symlinks, directories, devices, FIFOs,
// contiguous files, GNU sparse files, pax global headers, vendor types) is refused.
inline constexpr char kRegular = '0';
inline constexpr char kRegularOld = '\0';  // pre-POSIX regular file (AREGTYPE)
inline constexpr char kHardLink = '1';
inline constexpr char kPaxHeader = 'x';    // pax extended header for the next member
inline constexpr char kGnuLongName = 'L';  // GNU: data is the next member's name
inline constexpr char kGnuLongLink = 'K';  // GNU: data is the next member's link target

// Names longer than this are refused (PATH_MAX on Linux; as zip/constants.h).
inline constexpr std::uint64_t kMaxNameLength = 4096;
// A pax extended header's records: paths, sizes and times need far less.
inline constexpr std::uint64_t kMaxPaxSize = 64 << 10;
// The pax keywords read: the name, link target and size of the member, and the
// metadata tarfile and torch ignore (times, owner). Any other keyword is refused.
inline constexpr std::string_view kPaxPath = "path", kPaxLinkpath = "linkpath", kPaxSize = "size";
inline constexpr std::string_view kPaxIgnored[] = {"mtime", "atime", "ctime", "uid", "gid", "uname", "gname"};

namespace rules {
using K = ErrorKind;
inline constexpr Rule kTruncated{"tar/truncated", K::kCorrupt};
inline constexpr Rule kBadChecksum{"tar/bad-checksum", K::kCorrupt};
inline constexpr Rule kBadNumber{"tar/bad-number", K::kCorrupt};
inline constexpr Rule kNegativeSize{"tar/negative-size", K::kCorrupt};
inline constexpr Rule kBadMagic{"tar/bad-magic", K::kUnsupported};
inline constexpr Rule kAmbiguousPrefix{"tar/ambiguous-prefix", K::kCorrupt};
inline constexpr Rule kUnsupportedType{"tar/unsupported-type", K::kUnsupported};
inline constexpr Rule kUnsafeName{"tar/unsafe-name", K::kUnsafe};
inline constexpr Rule kDuplicateMember{"tar/duplicate-member", K::kCorrupt};
inline constexpr Rule kBadLink{"tar/bad-link", K::kCorrupt};
inline constexpr Rule kBadPax{"tar/bad-pax", K::kCorrupt};
inline constexpr Rule kPaxSizeMismatch{"tar/pax-size-mismatch", K::kCorrupt};
inline constexpr Rule kBadLongName{"tar/bad-long-name", K::kCorrupt};
inline constexpr Rule kTrailingData{"tar/trailing-data", K::kCorrupt};
inline constexpr Rule kTooManyMembers{"tar/too-many-members", K::kLimit};
}  // namespace rules

namespace topics {
using detail::core::Topic;
inline constexpr Topic kDialect{
    "tar.dialect",
    "the tar archives are written in different dialects (ustar, GNU, pax): header bytes differ, members do not"};
inline constexpr Topic kAll[] = {kDialect};
}  // namespace topics

}  // namespace tensorseal::detail::tar
