// Validating zip reader. Grammar (docs/formats/zip.md, PKWARE APPNOTE 6.3.x):
//
//   archive    = [prefix] entry* central* [zip64_eocd zip64_locator] eocd
//   entry      = local_header(30) name extra data [descriptor]
//   descriptor = ["PK\7\8"] crc32 csize usize       (sizes u64 when the local header
//                                                      carries a zip64 extra field)
//   central    = central_header(46) name extra comment
//   eocd       = "PK\5\6" ... comment_len comment    (ends exactly at end of file)
//
// The reader finds the EOCD (searching the last 65557 bytes), follows the zip64
// locator when present, walks the central directory, then checks every entry's local
// header against its central record. Nothing is trusted that was not checked: every
// offset and size is bounds-checked with overflow-checked arithmetic before use.
#include "zip/reader.h"

#include <fmt/format.h>
#include <libdeflate.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <unordered_set>

#include "tensorseal/error.h"
#include "util/checked.h"
#include "util/crc32.h"
#include "util/endian.h"
#include "util/parallel.h"
#include "util/text.h"
#include "zip/constants.h"

namespace tensorseal::detail::zip {

namespace {

using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

class Parser {
 public:
  Parser(std::span<const std::byte> file, const std::string& name, const Limits& limits)
      : f_(file), name_(name), limits_(limits), size_(file.size()) {}

  Archive run();

 private:
  [[noreturn]] void fail(const Rule& r, std::string detail, u64 offset) const {
    throw Error(r, std::move(detail), name_, offset);
  }
  // Callers check bounds first; these only load.
  u16 le16(u64 off) const { return util::load_le<u16>(f_.data() + off); }
  u32 le32(u64 off) const { return util::load_le<u32>(f_.data() + off); }
  u64 le64(u64 off) const { return util::load_le<u64>(f_.data() + off); }
  std::string bytes(u64 off, u64 n) const { return std::string(reinterpret_cast<const char*>(f_.data() + off), n); }
  // True when [off, off+n) lies inside the file.
  bool inside(u64 off, u64 n) const { return off <= size_ && n <= size_ - off; }

  u64 find_eocd();
  void read_end_records(Archive& a);
  void read_central(Archive& a, u64 count);
  void read_local(Entry& e, std::size_t index);
  void check_layout(Archive& a);

  std::span<const std::byte> f_;
  const std::string& name_;
  const Limits& limits_;
  const u64 size_;
};

// One extra field: id and the byte range of its data inside `extra`.
struct ExtraField {
  u16 id;
  std::size_t offset, size;
};

// Splits an extra block into its fields; throws zip/bad-extra-field when a field's
// length runs past the block. `at` is the block's offset in the file.
std::vector<ExtraField> split_extra(std::string_view extra, const std::string& entry, const char* which,
                                    const std::string& file, u64 at) {
  std::vector<ExtraField> out;
  std::size_t pos = 0;
  while (pos < extra.size()) {
    if (extra.size() - pos < zip::kExtraHeaderSize)
      throw Error(rules::kBadExtra,
                  fmt::format("entry {}: {} extra field has {} stray bytes at its end (a field header needs 4)", entry,
                              which, extra.size() - pos),
                  file, at + pos);
    const auto* p = reinterpret_cast<const std::byte*>(extra.data() + pos);
    const u16 id = util::load_le<u16>(p);
    const u16 len = util::load_le<u16>(p + 2);
    if (len > extra.size() - pos - zip::kExtraHeaderSize)
      throw Error(rules::kBadExtra,
                  fmt::format("entry {}: {} extra field 0x{:x} claims {} bytes, only {} remain", entry, which, id, len,
                              extra.size() - pos - zip::kExtraHeaderSize),
                  file, at + pos);
    out.push_back({id, pos + zip::kExtraHeaderSize, len});
    pos += zip::kExtraHeaderSize + len;
  }
  return out;
}

const ExtraField* find_field(const std::vector<ExtraField>& fields, u16 id) {
  for (const auto& f : fields)
    if (f.id == id) return &f;
  return nullptr;
}

u64 Parser::find_eocd() {
  if (size_ < zip::kEocdSize)
    fail(rules::kNoEocd,
         fmt::format("file of {} bytes is too small to hold an end-of-central-directory record (22 bytes)", size_), 0);
  const u64 lowest = size_ > zip::kEocdSearchSpan ? size_ - zip::kEocdSearchSpan : 0;
  // torch (miniz) and Python's zipfile take the last signature in the file; the record
  // whose comment ends exactly at the end of the file is the only well-formed one. When
  // they are not the same record, loaders disagree on the directory: refused.
  std::optional<u64> misfit, last;
  for (u64 pos = size_ - zip::kEocdSize + 1; pos-- > lowest;) {
    if (le32(pos) != zip::kEocdSig) continue;
    if (!last) last = pos;
    const u16 comment_len = le16(pos + 20);
    if (pos + zip::kEocdSize + comment_len == size_) {
      if (*last != pos)
        fail(rules::kAmbiguousEocd,
             fmt::format("two end-of-central-directory records: the one at {} spans to the end of the file, "
                         "but torch and Python's zipfile read the last signature, at {}",
                         pos, *last),
             *last);
      return pos;
    }
    if (!misfit) misfit = pos;
  }
  if (misfit)
    fail(rules::kBadEocd,
         fmt::format("end-of-central-directory record declares a {}-byte comment but {} bytes follow it",
                     le16(*misfit + 20), size_ - *misfit - zip::kEocdSize),
         *misfit);
  fail(rules::kNoEocd,
       fmt::format("no end-of-central-directory signature (PK\\5\\6) in the last {} bytes", size_ - lowest), lowest);
}

void Parser::read_end_records(Archive& a) {
  const u64 e = find_eocd();
  a.eocd_offset = e;
  const u16 disk = le16(e + 4), cd_disk = le16(e + 6), n_disk = le16(e + 8), n = le16(e + 10);
  const u32 cd_size = le32(e + 12), cd_off = le32(e + 16);
  const u16 comment_len = le16(e + 20);
  a.comment = bytes(e + zip::kEocdSize, comment_len);

  u64 entries = n, central_size = cd_size, central_offset = cd_off;
  u64 central_end_expected = e;  // the central directory is followed by the end records

  const bool has_locator = e >= zip::kZip64LocatorSize && le32(e - zip::kZip64LocatorSize) == zip::kZip64LocatorSig;
  if (has_locator) {
    const u64 loc = e - zip::kZip64LocatorSize;
    const u32 loc_disk = le32(loc + 4);
    const u64 rec = le64(loc + 8);
    const u32 total_disks = le32(loc + 16);
    if (loc_disk != 0 || total_disks > 1)
      fail(rules::kMultiDisk,
           fmt::format("zip64 locator names disk {} of {}; multi-disk archives are not supported", loc_disk,
                       total_disks),
           loc);
    if (rec > loc || loc - rec < zip::kZip64EocdSize)
      fail(rules::kBadZip64Locator,
           fmt::format("zip64 locator points at {}, "
                       "which leaves no room for the 56-byte zip64 end record before the locator at {}",
                       rec, loc),
           loc);
    if (le32(rec) != zip::kZip64EocdSig)
      fail(rules::kBadZip64Eocd,
           fmt::format("no zip64 end-of-central-directory signature (PK\\6\\6) at {} (found 0x{:x})", rec, le32(rec)),
           rec);
    const u64 rec_size = le64(rec + 4);
    if (rec_size < zip::kZip64EocdRecordSizeField || rec_size != loc - rec - 12)
      fail(rules::kBadZip64Eocd,
           fmt::format("zip64 end record at {} declares {} bytes, but {} lie between it and the locator", rec, rec_size,
                       loc - rec - 12),
           rec + 4);
    const u32 z_disk = le32(rec + 16), z_cd_disk = le32(rec + 20);
    const u64 z_n_disk = le64(rec + 24), z_n = le64(rec + 32), z_cd_size = le64(rec + 40), z_cd_off = le64(rec + 48);
    if (z_disk != 0 || z_cd_disk != 0)
      fail(rules::kMultiDisk,
           fmt::format("zip64 end record names disk {} / central directory disk {}", z_disk, z_cd_disk), rec + 16);
    if (z_n_disk != z_n)
      fail(rules::kBadZip64Eocd,
           fmt::format("zip64 end record: {} entries on this disk but {} in total", z_n_disk, z_n), rec + 24);
    // Each classic field is either saturated ("see zip64") or equal to the zip64 value.
    auto merge = [&](u64 classic, u64 sentinel, u64 wide, const char* what, u64 at) {
      if (classic != sentinel && classic != wide)
        fail(rules::kZip64Mismatch,
             fmt::format("end-of-central-directory {} is {}, the zip64 end record says {}", what, classic, wide), at);
      return wide;
    };
    if (!(disk == 0 || disk == zip::kSentinel16) || !(cd_disk == 0 || cd_disk == zip::kSentinel16))
      fail(rules::kMultiDisk, fmt::format("end-of-central-directory names disk {} / {}", disk, cd_disk), e + 4);
    if (n_disk != n)
      fail(rules::kBadEocd, fmt::format("end-of-central-directory: {} entries on this disk but {} in total", n_disk, n),
           e + 8);
    entries = merge(n, zip::kSentinel16, z_n, "entry count", e + 10);
    central_size = merge(cd_size, zip::kSentinel32, z_cd_size, "central directory size", e + 12);
    central_offset = merge(cd_off, zip::kSentinel32, z_cd_off, "central directory offset", e + 16);
    central_end_expected = rec;
    a.zip64 = true;
  } else {
    if (disk != 0 || cd_disk != 0)
      fail(rules::kMultiDisk,
           fmt::format("end-of-central-directory names disk {} / {}; multi-disk archives are not supported", disk,
                       cd_disk),
           e + 4);
    if (n_disk != n)
      fail(rules::kBadEocd, fmt::format("end-of-central-directory: {} entries on this disk but {} in total", n_disk, n),
           e + 8);
  }

  if (!inside(central_offset, central_size))
    fail(rules::kCentralOutside,
         fmt::format("central directory of {} bytes at {} lies outside the file ({} bytes)", central_size,
                     central_offset, size_),
         a.zip64 ? central_end_expected : e);
  if (central_offset + central_size != central_end_expected)
    fail(rules::kCentralPosition,
         fmt::format("central directory at {} of {} bytes ends at {}, but the end records start at {}", central_offset,
                     central_size, central_offset + central_size, central_end_expected),
         central_offset);
  if (entries > limits_.max_entries)
    fail(rules::kTooManyEntries, fmt::format("{} entries exceed the limit of {}", entries, limits_.max_entries),
         e + 10);
  auto min_size = util::mul(entries, zip::kCentralHeaderSize);
  if (!min_size || *min_size > central_size)
    fail(rules::kCentralSize,
         fmt::format("{} entries need at least {} bytes of central directory, it has {}", entries,
                     min_size ? fmt::to_string(*min_size) : "2^64", central_size),
         central_offset);
  a.central_offset = central_offset;
  a.central_size = central_size;
  read_central(a, entries);
}

void Parser::read_central(Archive& a, u64 count) {
  const u64 end = a.central_offset + a.central_size;
  u64 pos = a.central_offset;
  a.entries.reserve(count);
  for (u64 i = 0; i < count; ++i) {
    const std::string which = fmt::format("#{}", i);
    if (end - pos < zip::kCentralHeaderSize)
      fail(rules::kCentralSize, "central directory ends inside the header of entry " + which, pos);
    if (le32(pos) != zip::kCentralHeaderSig)
      fail(rules::kBadCentralHeader,
           fmt::format("entry {}: no central header signature (PK\\1\\2) at {} (found 0x{:x})", which, pos, le32(pos)),
           pos);
    Entry e;
    e.version_made_by = le16(pos + 4);
    e.flags = le16(pos + 8);
    e.method = le16(pos + 10);
    e.dos_time = le16(pos + 12);
    e.dos_date = le16(pos + 14);
    e.crc32 = le32(pos + 16);
    const u32 csize = le32(pos + 20), usize = le32(pos + 24);
    const u16 name_len = le16(pos + 28), extra_len = le16(pos + 30), comment_len = le16(pos + 32);
    const u16 disk_start = le16(pos + 34);
    const u32 local = le32(pos + 42);
    const u64 var = u64{name_len} + extra_len + comment_len;
    if (end - pos - zip::kCentralHeaderSize < var)
      fail(rules::kCentralSize,
           fmt::format("entry {}: name, extra field and comment ({} bytes) run past the central directory", which, var),
           pos);
    e.name = bytes(pos + zip::kCentralHeaderSize, name_len);
    const std::string shown = util::quoted(e.name);
    if (name_len == 0) fail(rules::kBadName, "entry " + which + " has an empty name", pos + 28);
    if (name_len > zip::kMaxNameLength)
      fail(rules::kBadName, fmt::format("entry {}: name of {} bytes exceeds {}", which, name_len, zip::kMaxNameLength),
           pos + 28);
    if (auto nul = e.name.find('\0'); nul != std::string::npos)
      fail(rules::kBadName, "entry " + shown + ": name contains a NUL byte", pos + zip::kCentralHeaderSize + nul);
    const u64 extra_at = pos + zip::kCentralHeaderSize + name_len;
    e.central_extra = bytes(extra_at, extra_len);

    e.size = usize;
    e.compressed_size = csize;
    e.local_offset = local;
    const bool need_u = usize == zip::kSentinel32, need_c = csize == zip::kSentinel32,
               need_o = local == zip::kSentinel32, need_d = disk_start == zip::kSentinel16;
    const auto fields = split_extra(e.central_extra, shown, "central", name_, extra_at);
    if (need_u || need_c || need_o || need_d) {
      const ExtraField* z64 = find_field(fields, zip::kZip64ExtraId);
      if (z64 == nullptr)
        fail(rules::kBadZip64Extra,
             fmt::format("entry {}: central record has 0xFFFFFFFF fields but no zip64 extra field", shown), pos);
      const u64 need = (need_u ? 8 : 0) + (need_c ? 8 : 0) + (need_o ? 8 : 0) + (need_d ? 4 : 0);
      if (z64->size < need)
        fail(rules::kBadZip64Extra,
             fmt::format("entry {}: zip64 extra field has {} bytes, the saturated fields need {}", shown, z64->size,
                         need),
             extra_at + z64->offset);
      const u64 base = extra_at + z64->offset;
      u64 at = 0;
      if (need_u) e.size = le64(base + at), at += 8;
      if (need_c) e.compressed_size = le64(base + at), at += 8;
      if (need_o) e.local_offset = le64(base + at), at += 8;
    }
    if (disk_start != 0 && !need_d)
      fail(rules::kMultiDisk, fmt::format("entry {} starts on disk {}", shown, disk_start), pos + 34);
    if (e.flags & (zip::kFlagEncrypted | zip::kFlagStrongEncryption))
      fail(rules::kEncrypted, fmt::format("entry {} is encrypted (flags 0x{:x})", shown, e.flags), pos + 8);
    // bzip2 and LZMA entries are archives Python's zipfile reads (scan decompresses
    // them); readers refuse them when they extract (only stored and deflate).
    if (e.method != zip::kMethodStored && e.method != zip::kMethodDeflated && e.method != zip::kMethodBzip2 &&
        e.method != zip::kMethodLzma)
      fail(rules::kUnsupportedMethod,
           fmt::format("entry {} uses compression method {} (zip archives use 0 stored, 8 deflate, 12 bzip2, 14 "
                       "LZMA)",
                       shown, e.method),
           pos + 10);
    if (e.method == zip::kMethodStored && e.size != e.compressed_size)
      fail(rules::kStoredSize,
           fmt::format("stored entry {} has compressed size {} but size {}", shown, e.compressed_size, e.size),
           pos + 20);
    a.entries.push_back(std::move(e));
    pos += zip::kCentralHeaderSize + var;
  }
  if (pos != end)
    fail(rules::kCentralSize,
         fmt::format("{} entries use {} bytes, the central directory has {}", count, pos - a.central_offset,
                     a.central_size),
         pos);
}

void Parser::read_local(Entry& e, std::size_t index) {
  const std::string shown = util::quoted(e.name);
  const u64 lo = e.local_offset;
  if (!inside(lo, zip::kLocalHeaderSize))
    fail(rules::kLocalMissing,
         fmt::format("entry {}: local header at {} runs past the end of the file ({} bytes)", shown, lo, size_),
         std::min(lo, size_));
  if (le32(lo) != zip::kLocalHeaderSig)
    fail(rules::kLocalMissing,
         fmt::format("entry {}: no local header signature (PK\\3\\4) at {} (found 0x{:x})", shown, lo, le32(lo)), lo);
  const u16 flags = le16(lo + 6), method = le16(lo + 8);
  const u32 crc = le32(lo + 14), csize = le32(lo + 18), usize = le32(lo + 22);
  const u16 name_len = le16(lo + 26), extra_len = le16(lo + 28);
  if (!inside(lo + zip::kLocalHeaderSize, u64{name_len} + extra_len))
    fail(rules::kDataPastEnd,
         fmt::format("entry {}: local header name and extra field run past the end of the file", shown), lo + 26);
  const std::string local_name = bytes(lo + zip::kLocalHeaderSize, name_len);
  if (local_name != e.name)
    fail(rules::kLocalMismatch,
         fmt::format("entry #{}: central directory names it {}, local header {}", index, shown,
                     util::quoted(local_name)),
         lo + zip::kLocalHeaderSize);
  if (method != e.method)
    fail(rules::kLocalMismatch,
         fmt::format("entry {}: method {} in the local header, {} in the central directory", shown, method, e.method),
         lo + 8);
  if (flags & (zip::kFlagEncrypted | zip::kFlagStrongEncryption))
    fail(rules::kEncrypted, fmt::format("entry {} is encrypted (local flags 0x{:x})", shown, flags), lo + 6);
  if ((flags & zip::kFlagDataDescriptor) != (e.flags & zip::kFlagDataDescriptor))
    fail(rules::kLocalMismatch,
         fmt::format("entry {}: flags 0x{:x} in the local header, 0x{:x} in the central directory "
                     "(data descriptor bit differs)",
                     shown, flags, e.flags),
         lo + 6);
  e.flags = flags;
  e.has_data_descriptor = (flags & zip::kFlagDataDescriptor) != 0;
  const u64 extra_at = lo + zip::kLocalHeaderSize + name_len;
  e.local_extra = bytes(extra_at, extra_len);
  const auto fields = split_extra(e.local_extra, shown, "local", name_, extra_at);
  const ExtraField* z64 = find_field(fields, zip::kZip64ExtraId);
  e.data_offset = extra_at + extra_len;

  if (!e.has_data_descriptor) {
    u64 local_u = usize, local_c = csize;
    if (usize == zip::kSentinel32 || csize == zip::kSentinel32) {
      // APPNOTE 4.5.3: in a local header the zip64 field holds both sizes.
      if (z64 == nullptr || z64->size < 16)
        fail(rules::kBadZip64Extra,
             fmt::format("entry {}: local header sizes are 0xFFFFFFFF "
                         "but there is no zip64 extra field with both sizes",
                         shown),
             lo + 18);
      const u64 base = extra_at + z64->offset;
      if (usize == zip::kSentinel32) local_u = le64(base);
      if (csize == zip::kSentinel32) local_c = le64(base + 8);
    }
    if (crc != e.crc32)
      fail(rules::kLocalMismatch,
           fmt::format("entry {}: CRC32 0x{:x} in the local header, 0x{:x} in the central directory", shown, crc,
                       e.crc32),
           lo + 14);
    if (local_c != e.compressed_size)
      fail(rules::kLocalMismatch,
           fmt::format("entry {}: compressed size {} in the local header, {} in the central directory", shown, local_c,
                       e.compressed_size),
           lo + 18);
    if (local_u != e.size)
      fail(rules::kLocalMismatch,
           fmt::format("entry {}: size {} in the local header, {} in the central directory", shown, local_u, e.size),
           lo + 22);
  }

  if (!inside(e.data_offset, e.compressed_size))
    fail(rules::kDataPastEnd,
         fmt::format("entry {}: {} bytes of data at {} run past the end of the file ({} bytes)", shown,
                     e.compressed_size, e.data_offset, size_),
         e.data_offset);
  const u64 data_end = e.data_offset + e.compressed_size;
  e.end_offset = data_end;
  if (e.has_data_descriptor) {
    // Sizes are 8 bytes when the local header carries a zip64 field (APPNOTE 4.3.9.1;
    // what miniz, i.e. torch, and python's zipfile do).
    const u64 width = z64 != nullptr ? 8 : 4;
    const bool has_sig = inside(data_end, 4) && le32(data_end) == zip::kDescriptorSig;
    const u64 total = (has_sig ? 4 : 0) + 4 + 2 * width;
    if (!inside(data_end, total))
      fail(rules::kBadDescriptor,
           fmt::format("entry {}: data descriptor of {} bytes at {} runs past the end of the file", shown, total,
                       data_end),
           data_end);
    const u64 p = data_end + (has_sig ? 4 : 0);
    const u32 d_crc = le32(p);
    const u64 d_c = width == 8 ? le64(p + 4) : le32(p + 4);
    const u64 d_u = width == 8 ? le64(p + 12) : le32(p + 8);
    if (d_crc != e.crc32)
      fail(rules::kBadDescriptor,
           fmt::format("entry {}: CRC32 0x{:x} in the data descriptor, 0x{:x} in the central directory", shown, d_crc,
                       e.crc32),
           p);
    if (d_c != e.compressed_size)
      fail(rules::kBadDescriptor,
           fmt::format("entry {}: compressed size {} in the data descriptor, {} in the central directory", shown, d_c,
                       e.compressed_size),
           p + 4);
    if (d_u != e.size)
      fail(rules::kBadDescriptor,
           fmt::format("entry {}: size {} in the data descriptor, {} in the central directory", shown, d_u, e.size),
           p + 4 + width);
    e.descriptor_size = total;
    e.end_offset = data_end + total;
  }
}

void Parser::check_layout(Archive& a) {
  std::vector<const Entry*> order;
  order.reserve(a.entries.size());
  for (const auto& e : a.entries) order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const Entry* x, const Entry* y) { return x->local_offset < y->local_offset; });
  u64 cursor = 0, gaps = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Entry& e = *order[i];
    if (i == 0) a.prefix_size = e.local_offset;
    gaps += e.local_offset - cursor;  // local_offset >= cursor, checked below for i > 0
    if (i + 1 < order.size() && e.end_offset > order[i + 1]->local_offset)
      fail(rules::kOverlap,
           fmt::format("entry {} [{}, {}) overlaps entry {} at {}", util::quoted(e.name), e.local_offset, e.end_offset,
                       util::quoted(order[i + 1]->name), order[i + 1]->local_offset),
           order[i + 1]->local_offset);
    cursor = e.end_offset;
  }
  if (order.empty()) a.prefix_size = a.central_offset;
  if (cursor > a.central_offset)
    fail(rules::kOverlap,
         fmt::format("entry {} ends at {}, inside the central directory at {}", util::quoted(order.back()->name),
                     cursor, a.central_offset),
         a.central_offset);
  gaps += a.central_offset - cursor;
  a.unaccounted_bytes = gaps;
}

Archive Parser::run() {
  Archive a;
  read_end_records(a);
  std::unordered_set<std::string_view> names;
  names.reserve(a.entries.size());
  for (const auto& e : a.entries)
    if (!names.insert(e.name).second)
      fail(rules::kDuplicateName, fmt::format("entry {} appears twice in the central directory", util::quoted(e.name)),
           a.central_offset);
  for (std::size_t i = 0; i < a.entries.size(); ++i) read_local(a.entries[i], i);
  check_layout(a);
  // torch.save with set_crc32_options(False) writes 0 in every record's CRC field.
  a.crcs_recorded = std::any_of(a.entries.begin(), a.entries.end(), [](const Entry& e) { return e.crc32 != 0; });
  if (!a.crcs_recorded)
    for (auto& e : a.entries) e.crc_recorded = false;
  return a;
}

struct DecompressorDeleter {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

}  // namespace

Archive read(std::span<const std::byte> file, const std::string& name, const Limits& limits) {
  return Parser(file, name, limits).run();
}

std::span<const std::byte> entry_bytes(std::span<const std::byte> file, const Entry& e, std::vector<std::byte>& scratch,
                                       const std::string& name, const Limits& limits) {
  if (e.data_offset > file.size() || e.compressed_size > file.size() - e.data_offset)
    throw Error(rules::kDataPastEnd, fmt::format("entry {}: data runs past the end of the file", util::quoted(e.name)),
                name, e.data_offset);
  const auto raw = file.subspan(e.data_offset, e.compressed_size);
  if (e.method == zip::kMethodStored) {
    if (e.size != e.compressed_size)
      throw Error(rules::kStoredSize,
                  fmt::format("stored entry {} has compressed size {} but size {}", util::quoted(e.name),
                              e.compressed_size, e.size),
                  name, e.data_offset);
    return raw;
  }
  if (e.method != zip::kMethodDeflated) check_deflated(e, name);
  if (e.size > limits.max_alloc)
    throw Error(rules::kEntryTooLarge,
                fmt::format("entry {} inflates to {} bytes, over the allocation limit of {}", util::quoted(e.name),
                            e.size, limits.max_alloc),
                name, e.data_offset);
  check_deflated(e, name);
  std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> d(libdeflate_alloc_decompressor());
  if (!d) throw Error(tensorseal::rules::kInternal, "libdeflate_alloc_decompressor failed", name);
  scratch.assign(e.size, std::byte{0});
  std::size_t in_used = 0, out_used = 0;
  const auto r = libdeflate_deflate_decompress_ex(d.get(), raw.data(), raw.size(), scratch.data(), scratch.size(),
                                                  &in_used, &out_used);
  if (r == LIBDEFLATE_INSUFFICIENT_SPACE)
    throw Error(rules::kInflateFailed,
                fmt::format("entry {} inflates to more than the declared {} bytes", util::quoted(e.name), e.size), name,
                e.data_offset);
  if (r != LIBDEFLATE_SUCCESS)
    throw Error(rules::kInflateFailed, fmt::format("entry {}: the deflate stream is invalid", util::quoted(e.name)),
                name, e.data_offset);
  if (out_used != e.size)
    throw Error(rules::kInflateFailed,
                fmt::format("entry {} inflates to {} bytes, the central directory says {}", util::quoted(e.name),
                            out_used, e.size),
                name, e.data_offset);
  if (in_used != e.compressed_size)
    throw Error(rules::kInflateFailed,
                fmt::format("entry {}: the deflate stream ends after {} of {} bytes", util::quoted(e.name), in_used,
                            e.compressed_size),
                name, e.data_offset + in_used);
  return {scratch.data(), scratch.size()};
}

void check_deflated(const Entry& e, const std::string& name) {
  if (e.method != zip::kMethodDeflated)
    throw Error(rules::kUnsupportedMethod,
                fmt::format("entry {} uses compression method {} (tensorseal reads 0 stored and 8 deflate)",
                            util::quoted(e.name), e.method),
                name, e.local_offset + 8);
  const auto bound = util::mul(e.compressed_size, zip::kMaxDeflateRatio);
  if (bound && e.size > *bound)
    throw Error(rules::kDeflateRatio,
                fmt::format("entry {} claims {} bytes from {} compressed bytes, more than deflate can expand (1032:1)",
                            util::quoted(e.name), e.size, e.compressed_size),
                name, e.data_offset);
}

void check_inflate(const Archive& a, const std::string& name, const Limits& limits) {
  u64 inflated = 0, compressed = 0;
  for (const auto& e : a.entries)
    if (e.method == kMethodDeflated) compressed += e.compressed_size;  // <= the file size: no overflow
  // Past max_inflate, the most the ratio allows (no bound when the product overflows).
  const auto by_ratio = util::mul(compressed, limits.max_inflate_ratio);
  for (const auto& e : a.entries) {
    if (e.method != kMethodDeflated) continue;
    const auto sum = util::add(inflated, e.size);
    inflated = sum ? *sum : std::numeric_limits<u64>::max();
    if (inflated <= limits.max_inflate || !by_ratio || inflated <= *by_ratio) continue;
    throw Error(rules::kInflateLimit,
                fmt::format("entry {} brings the archive's deflated entries to {} inflated bytes from {} compressed "
                            "({}:1), over --max-inflate {} and --max-inflate-ratio {}",
                            util::quoted(e.name), inflated, compressed, compressed ? inflated / compressed : inflated,
                            limits.max_inflate, limits.max_inflate_ratio),
                name, e.data_offset);
  }
}

void verify_crc(const Entry& e, std::span<const std::byte> data, const std::string& name) {
  check_crc(e, util::crc32(0, data), name);
}

std::optional<std::pair<std::size_t, std::size_t>> find_case_collision(const Archive& a) {
  std::map<std::string, std::size_t> folded;
  for (std::size_t i = 0; i < a.entries.size(); ++i) {
    std::string f = a.entries[i].name;
    for (char& c : f)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    auto [it, fresh] = folded.emplace(std::move(f), i);
    if (!fresh) return std::pair(it->second, i);
  }
  return std::nullopt;
}

void refuse_case_collision(const Archive& a, const std::string& name) {
  const auto clash = find_case_collision(a);
  if (!clash) return;
  const Entry &x = a.entries[clash->first], &y = a.entries[clash->second];
  throw Error(rules::kCaseCollision,
              fmt::format("entries {} and {} differ only in case; "
                          "torch looks names up ignoring case, so either could be the record it loads",
                          util::quoted(x.name), util::quoted(y.name)),
              name, y.local_offset);
}

void check_crc(const Entry& e, std::uint32_t got, const std::string& name) {
  if (!e.crc_recorded) return;
  if (got != e.crc32)
    throw Error(rules::kCrcMismatch,
                fmt::format("entry {}: CRC32 of the data is 0x{:x}, the archive says 0x{:x}", util::quoted(e.name), got,
                            e.crc32),
                name, e.data_offset);
}

std::vector<std::uint32_t> verify_crcs(const std::vector<CrcCheck>& checks, const std::string& name, unsigned threads) {
  struct Piece {
    std::size_t check;
    u64 begin, end;
    u32 crc = 0;
  };
  std::vector<Piece> pieces;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const u64 size = checks[i].data.size(), cut = std::min<u64>(checks[i].cut, size);
    for (u64 pos = 0; pos < size;) {
      u64 end = std::min(size, pos + kCrcPiece);
      if (pos < cut && cut < end) end = cut;
      pieces.push_back({i, pos, end});
      pos = end;
    }
  }
  util::parallel_for(pieces.size(), threads, [&](std::size_t j) {
    Piece& p = pieces[j];
    p.crc = util::crc32(0, checks[p.check].data.subspan(p.begin, p.end - p.begin));
  });
  std::vector<u32> full(checks.size(), 0), prefix(checks.size(), 0);
  for (const Piece& p : pieces) {  // in order within each check
    if (p.end <= checks[p.check].cut) prefix[p.check] = util::crc32_combine(full[p.check], p.crc, p.end - p.begin);
    full[p.check] = util::crc32_combine(full[p.check], p.crc, p.end - p.begin);
  }
  for (std::size_t i = 0; i < checks.size(); ++i) check_crc(checks[i].entry, full[i], name);
  return prefix;
}

}  // namespace tensorseal::detail::zip
