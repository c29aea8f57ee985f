// A validating, read-only zip reader for the archives tensorseal meets: torch zip
// checkpoints (STORED records, 64-byte aligned, zip64) and numpy .npz (STORED or
// DEFLATED). Spec and rules: docs/formats/zip.md.
//
// Validation (each with its own rule): end-of-central-directory found exactly, zip64
// records consistent, every central entry's local header present and agreeing (name,
// method, sizes, CRC unless a data descriptor defers them), no duplicate names, no
// entry overlapping another or running past the file, encrypted entries and unknown
// methods refused, entry count and name length limits.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/limits.h"

namespace tensorseal::detail::zip {

struct Entry {
  std::string name;
  std::uint16_t method = 0;  // 0 stored, 8 deflated
  std::uint16_t flags = 0;   // general purpose bit flag (local header)
  std::uint32_t crc32 = 0;   // from the central directory
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;          // uncompressed
  std::uint64_t local_offset = 0;  // of the local header
  std::uint64_t data_offset = 0;   // of the first data byte
  std::uint16_t dos_time = 0, dos_date = 0;
  std::uint16_t version_made_by = 0;  // high byte: create_system
  std::string local_extra;            // raw extra field of the local header
  std::string central_extra;          // raw extra field of the central header
  bool has_data_descriptor = false;
  std::uint64_t descriptor_size = 0;  // bytes of the data descriptor (0 when none)
  std::uint64_t end_offset = 0;       // first byte after data (and descriptor)
  // False when the archive records no CRCs (see Archive::crcs_recorded): checks pass.
  bool crc_recorded = true;
};

struct Archive {
  std::vector<Entry> entries;  // central directory order
  bool zip64 = false;          // zip64 end records present
  std::string comment;
  std::uint64_t central_offset = 0;
  std::uint64_t central_size = 0;
  std::uint64_t eocd_offset = 0;  // of the end-of-central-directory record
  // Bytes before the first local header (the whole span up to the central directory
  // when there are no entries). Zip allows a prefix (self-extractors); a non-zero
  // value is how a zip + pickle/npy polyglot shows, so callers may refuse it.
  std::uint64_t prefix_size = 0;
  // Bytes that belong to nothing: the prefix plus gaps between entries and before the
  // central directory. 0 for every archive torch, numpy and python write.
  std::uint64_t unaccounted_bytes = 0;
  // False when every record's CRC field is 0: what torch.save writes after
  // torch.serialization.set_crc32_options(False). Such CRCs are "not recorded", not
  // mismatches (torch reads these files); one zero CRC among real ones is checked.
  bool crcs_recorded = true;
};

// Parses and validates the archive structure (not CRCs: see verify_crc). Throws
// Error{zip/...} with `name` as the file and the byte offset of the broken record;
// messages name the entry.
[[nodiscard]] Archive read(std::span<const std::byte> file, const std::string& name, const Limits& limits);

// The entry's bytes: a zero-copy view for STORED entries; for DEFLATED ones, inflated
// into `scratch` (size checked against limits.max_alloc and the deflate ratio first;
// the stream must inflate to exactly e.size bytes using exactly e.compressed_size).
std::span<const std::byte> entry_bytes(std::span<const std::byte> file, const Entry& e, std::vector<std::byte>& scratch,
                                       const std::string& name, const Limits& limits);

// Refuses an archive whose DEFLATED entries declare more inflated bytes, all together,
// than the limits allow (zip/inflate-limit): more than limits.max_inflate and more than
// limits.max_inflate_ratio times their compressed bytes. Checked on the declared sizes
// before anything is inflated (inflate_entry refuses a stream that gives more than its
// entry declares). The error names the entry that crosses the limit, at its data.
void check_inflate(const Archive& a, const std::string& name, const Limits& limits);

// Throws unless `e` is DEFLATED (zip/unsupported-method) and declares at most what
// deflate can expand its compressed bytes to, 1032:1 (zip/deflate-ratio).
void check_deflated(const Entry& e, const std::string& name);

// Two entries whose names are equal ignoring ASCII case (indices in central directory
// order), if any. torch's zip reader (miniz) looks names up ignoring case, so in a
// torch archive either could be the record torch loads.
[[nodiscard]] std::optional<std::pair<std::size_t, std::size_t>> find_case_collision(const Archive& a);
// Throws Error{zip/case-insensitive-duplicate} naming both entries when find_case_collision
// finds a pair (for archives torch reads).
void refuse_case_collision(const Archive& a, const std::string& name);

// Throws Error{zip/crc-mismatch} naming the entry when CRC32 of `data` != e.crc32
// (never when the entry's CRC is not recorded).
void verify_crc(const Entry& e, std::span<const std::byte> data, const std::string& name);
// The same check when the CRC32 of the entry's data was computed elsewhere (`got`).
void check_crc(const Entry& e, std::uint32_t got, const std::string& name);

// Verification of many records at once (docs/formats/zip.md, "When CRCs are checked").
// Each record's data is cut into pieces of at most kCrcPiece bytes (and at `cut`), the
// pieces are checksummed on up to `threads` threads (0: all cores) and combined per
// record, so one huge record uses every core as well as many small ones. Throws
// Error{zip/crc-mismatch} for the record of lowest index that fails (after all pieces
// finished). Returns, per record, the CRC32 of data[0, cut): a checksum computed over
// verified bytes, which callers may keep (e.g. core::StorageAccess::set_verified_crc32).
inline constexpr std::uint64_t kCrcPiece = std::uint64_t{8} << 20;
struct CrcCheck {
  Entry entry;                      // expected CRC, name and offset for the message
  std::span<const std::byte> data;  // the entry's (stored) data
  std::uint64_t cut = 0;            // also report the CRC of data[0, cut); <= data.size()
};
std::vector<std::uint32_t> verify_crcs(const std::vector<CrcCheck>& checks, const std::string& name,
                                       unsigned threads = 0);

}  // namespace tensorseal::detail::zip
