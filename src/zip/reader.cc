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

#include <libdeflate.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <unordered_set>

#include "tensorseal/error.h"
#include "util/checked.h"
#include "util/crc32.h"
#include "util/endian.h"
#include "util/hex.h"
#include "util/parallel.h"
#include "zip/constants.h"

namespace tensorseal::detail::zip {

namespace {

using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

// A name as it appears in messages: quoted, control and non-ASCII bytes escaped,
// bounded length.
std::string show(std::string_view s) {
  std::string out = "'";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (out.size() > 160) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      util::append_hex(out, c);
    }
  }
  return out + "'";
}

std::string hex(u64 v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string num(u64 v) { return std::to_string(v); }

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
                  "entry " + entry + ": " + which + " extra field has " + num(extra.size() - pos) +
                      " stray bytes at its end (a field header needs 4)",
                  file, at + pos);
    const auto* p = reinterpret_cast<const std::byte*>(extra.data() + pos);
    const u16 id = util::load_le<u16>(p);
    const u16 len = util::load_le<u16>(p + 2);
    if (len > extra.size() - pos - zip::kExtraHeaderSize)
      throw Error(rules::kBadExtra,
                  "entry " + entry + ": " + which + " extra field " + hex(id) + " claims " + num(len) +
                      " bytes, only " + num(extra.size() - pos - zip::kExtraHeaderSize) + " remain",
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
         "file of " + num(size_) + " bytes is too small to hold an end-of-central-directory record (22 bytes)", 0);
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
             "two end-of-central-directory records: the one at " + num(pos) +
                 " spans to the end of the file, but torch and Python's zipfile read the last signature, at " + num(*last),
             *last);
      return pos;
    }
    if (!misfit) misfit = pos;
  }
  if (misfit)
    fail(rules::kBadEocd,
         "end-of-central-directory record declares a " + num(le16(*misfit + 20)) + "-byte comment but " +
             num(size_ - *misfit - zip::kEocdSize) + " bytes follow it",
         *misfit);
  fail(rules::kNoEocd, "no end-of-central-directory signature (PK\\5\\6) in the last " + num(size_ - lowest) + " bytes",
       lowest);
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
           "zip64 locator names disk " + num(loc_disk) + " of " + num(total_disks) + "; multi-disk archives are not supported",
           loc);
    if (rec > loc || loc - rec < zip::kZip64EocdSize)
      fail(rules::kBadZip64Locator,
           "zip64 locator points at " + num(rec) + ", which leaves no room for the 56-byte zip64 end record before the locator at " +
               num(loc),
           loc);
    if (le32(rec) != zip::kZip64EocdSig)
      fail(rules::kBadZip64Eocd, "no zip64 end-of-central-directory signature (PK\\6\\6) at " + num(rec) + " (found " + hex(le32(rec)) + ")",
           rec);
    const u64 rec_size = le64(rec + 4);
    if (rec_size < zip::kZip64EocdRecordSizeField || rec_size != loc - rec - 12)
      fail(rules::kBadZip64Eocd,
           "zip64 end record at " + num(rec) + " declares " + num(rec_size) + " bytes, but " + num(loc - rec - 12) +
               " lie between it and the locator",
           rec + 4);
    const u32 z_disk = le32(rec + 16), z_cd_disk = le32(rec + 20);
    const u64 z_n_disk = le64(rec + 24), z_n = le64(rec + 32), z_cd_size = le64(rec + 40), z_cd_off = le64(rec + 48);
    if (z_disk != 0 || z_cd_disk != 0)
      fail(rules::kMultiDisk, "zip64 end record names disk " + num(z_disk) + " / central directory disk " + num(z_cd_disk), rec + 16);
    if (z_n_disk != z_n)
      fail(rules::kBadZip64Eocd, "zip64 end record: " + num(z_n_disk) + " entries on this disk but " + num(z_n) + " in total", rec + 24);
    // Each classic field is either saturated ("see zip64") or equal to the zip64 value.
    auto merge = [&](u64 classic, u64 sentinel, u64 wide, const char* what, u64 at) {
      if (classic != sentinel && classic != wide)
        fail(rules::kZip64Mismatch,
             std::string("end-of-central-directory ") + what + " is " + num(classic) + ", the zip64 end record says " + num(wide),
             at);
      return wide;
    };
    if (!(disk == 0 || disk == zip::kSentinel16) || !(cd_disk == 0 || cd_disk == zip::kSentinel16))
      fail(rules::kMultiDisk, "end-of-central-directory names disk " + num(disk) + " / " + num(cd_disk), e + 4);
    if (n_disk != n) fail(rules::kBadEocd, "end-of-central-directory: " + num(n_disk) + " entries on this disk but " + num(n) + " in total", e + 8);
    entries = merge(n, zip::kSentinel16, z_n, "entry count", e + 10);
    central_size = merge(cd_size, zip::kSentinel32, z_cd_size, "central directory size", e + 12);
    central_offset = merge(cd_off, zip::kSentinel32, z_cd_off, "central directory offset", e + 16);
    central_end_expected = rec;
    a.zip64 = true;
  } else {
    if (disk != 0 || cd_disk != 0)
      fail(rules::kMultiDisk, "end-of-central-directory names disk " + num(disk) + " / " + num(cd_disk) + "; multi-disk archives are not supported",
           e + 4);
    if (n_disk != n) fail(rules::kBadEocd, "end-of-central-directory: " + num(n_disk) + " entries on this disk but " + num(n) + " in total", e + 8);
  }

  if (!inside(central_offset, central_size))
    fail(rules::kCentralOutside,
         "central directory of " + num(central_size) + " bytes at " + num(central_offset) + " lies outside the file (" + num(size_) +
             " bytes)",
         a.zip64 ? central_end_expected : e);
  if (central_offset + central_size != central_end_expected)
    fail(rules::kCentralPosition,
         "central directory at " + num(central_offset) + " of " + num(central_size) + " bytes ends at " +
             num(central_offset + central_size) + ", but the end records start at " + num(central_end_expected),
         central_offset);
  if (entries > limits_.max_entries)
    fail(rules::kTooManyEntries, num(entries) + " entries exceed the limit of " + num(limits_.max_entries), e + 10);
  auto min_size = util::mul(entries, zip::kCentralHeaderSize);
  if (!min_size || *min_size > central_size)
    fail(rules::kCentralSize,
         num(entries) + " entries need at least " + (min_size ? num(*min_size) : std::string("2^64")) +
             " bytes of central directory, it has " + num(central_size),
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
    const std::string which = "#" + num(i);
    if (end - pos < zip::kCentralHeaderSize)
      fail(rules::kCentralSize, "central directory ends inside the header of entry " + which, pos);
    if (le32(pos) != zip::kCentralHeaderSig)
      fail(rules::kBadCentralHeader, "entry " + which + ": no central header signature (PK\\1\\2) at " + num(pos) + " (found " + hex(le32(pos)) + ")",
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
      fail(rules::kCentralSize, "entry " + which + ": name, extra field and comment (" + num(var) + " bytes) run past the central directory",
           pos);
    e.name = bytes(pos + zip::kCentralHeaderSize, name_len);
    const std::string shown = show(e.name);
    if (name_len == 0) fail(rules::kBadName, "entry " + which + " has an empty name", pos + 28);
    if (name_len > zip::kMaxNameLength)
      fail(rules::kBadName, "entry " + which + ": name of " + num(name_len) + " bytes exceeds " + num(zip::kMaxNameLength), pos + 28);
    if (auto nul = e.name.find('\0'); nul != std::string::npos)
      fail(rules::kBadName, "entry " + shown + ": name contains a NUL byte", pos + zip::kCentralHeaderSize + nul);
    const u64 extra_at = pos + zip::kCentralHeaderSize + name_len;
    e.central_extra = bytes(extra_at, extra_len);

    e.size = usize;
    e.compressed_size = csize;
    e.local_offset = local;
    const bool need_u = usize == zip::kSentinel32, need_c = csize == zip::kSentinel32, need_o = local == zip::kSentinel32,
               need_d = disk_start == zip::kSentinel16;
    const auto fields = split_extra(e.central_extra, shown, "central", name_, extra_at);
    if (need_u || need_c || need_o || need_d) {
      const ExtraField* z64 = find_field(fields, zip::kZip64ExtraId);
      if (z64 == nullptr)
        fail(rules::kBadZip64Extra, "entry " + shown + ": central record has 0xFFFFFFFF fields but no zip64 extra field", pos);
      const u64 need = (need_u ? 8 : 0) + (need_c ? 8 : 0) + (need_o ? 8 : 0) + (need_d ? 4 : 0);
      if (z64->size < need)
        fail(rules::kBadZip64Extra,
             "entry " + shown + ": zip64 extra field has " + num(z64->size) + " bytes, the saturated fields need " + num(need),
             extra_at + z64->offset);
      const u64 base = extra_at + z64->offset;
      u64 at = 0;
      if (need_u) e.size = le64(base + at), at += 8;
      if (need_c) e.compressed_size = le64(base + at), at += 8;
      if (need_o) e.local_offset = le64(base + at), at += 8;
    }
    if (disk_start != 0 && !need_d)
      fail(rules::kMultiDisk, "entry " + shown + " starts on disk " + num(disk_start), pos + 34);
    if (e.flags & (zip::kFlagEncrypted | zip::kFlagStrongEncryption))
      fail(rules::kEncrypted, "entry " + shown + " is encrypted (flags " + hex(e.flags) + ")", pos + 8);
    if (e.method != zip::kMethodStored && e.method != zip::kMethodDeflated)
      fail(rules::kUnsupportedMethod,
           "entry " + shown + " uses compression method " + num(e.method) + " (only 0 stored and 8 deflate are supported)", pos + 10);
    if (e.method == zip::kMethodStored && e.size != e.compressed_size)
      fail(rules::kStoredSize,
           "stored entry " + shown + " has compressed size " + num(e.compressed_size) + " but size " + num(e.size), pos + 20);
    a.entries.push_back(std::move(e));
    pos += zip::kCentralHeaderSize + var;
  }
  if (pos != end)
    fail(rules::kCentralSize,
         num(count) + " entries use " + num(pos - a.central_offset) + " bytes, the central directory has " + num(a.central_size), pos);
}

void Parser::read_local(Entry& e, std::size_t index) {
  const std::string shown = show(e.name);
  const u64 lo = e.local_offset;
  if (!inside(lo, zip::kLocalHeaderSize))
    fail(rules::kLocalMissing, "entry " + shown + ": local header at " + num(lo) + " runs past the end of the file (" + num(size_) + " bytes)",
         std::min(lo, size_));
  if (le32(lo) != zip::kLocalHeaderSig)
    fail(rules::kLocalMissing, "entry " + shown + ": no local header signature (PK\\3\\4) at " + num(lo) + " (found " + hex(le32(lo)) + ")", lo);
  const u16 flags = le16(lo + 6), method = le16(lo + 8);
  const u32 crc = le32(lo + 14), csize = le32(lo + 18), usize = le32(lo + 22);
  const u16 name_len = le16(lo + 26), extra_len = le16(lo + 28);
  if (!inside(lo + zip::kLocalHeaderSize, u64{name_len} + extra_len))
    fail(rules::kDataPastEnd, "entry " + shown + ": local header name and extra field run past the end of the file", lo + 26);
  const std::string local_name = bytes(lo + zip::kLocalHeaderSize, name_len);
  if (local_name != e.name)
    fail(rules::kLocalMismatch, "entry #" + num(index) + ": central directory names it " + shown + ", local header " + show(local_name),
         lo + zip::kLocalHeaderSize);
  if (method != e.method)
    fail(rules::kLocalMismatch,
         "entry " + shown + ": method " + num(method) + " in the local header, " + num(e.method) + " in the central directory", lo + 8);
  if (flags & (zip::kFlagEncrypted | zip::kFlagStrongEncryption))
    fail(rules::kEncrypted, "entry " + shown + " is encrypted (local flags " + hex(flags) + ")", lo + 6);
  if ((flags & zip::kFlagDataDescriptor) != (e.flags & zip::kFlagDataDescriptor))
    fail(rules::kLocalMismatch,
         "entry " + shown + ": flags " + hex(flags) + " in the local header, " + hex(e.flags) +
             " in the central directory (data descriptor bit differs)",
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
        fail(rules::kBadZip64Extra, "entry " + shown + ": local header sizes are 0xFFFFFFFF but there is no zip64 extra field with both sizes",
             lo + 18);
      const u64 base = extra_at + z64->offset;
      if (usize == zip::kSentinel32) local_u = le64(base);
      if (csize == zip::kSentinel32) local_c = le64(base + 8);
    }
    if (crc != e.crc32)
      fail(rules::kLocalMismatch, "entry " + shown + ": CRC32 " + hex(crc) + " in the local header, " + hex(e.crc32) + " in the central directory",
           lo + 14);
    if (local_c != e.compressed_size)
      fail(rules::kLocalMismatch,
           "entry " + shown + ": compressed size " + num(local_c) + " in the local header, " + num(e.compressed_size) +
               " in the central directory",
           lo + 18);
    if (local_u != e.size)
      fail(rules::kLocalMismatch,
           "entry " + shown + ": size " + num(local_u) + " in the local header, " + num(e.size) + " in the central directory", lo + 22);
  }

  if (!inside(e.data_offset, e.compressed_size))
    fail(rules::kDataPastEnd,
         "entry " + shown + ": " + num(e.compressed_size) + " bytes of data at " + num(e.data_offset) + " run past the end of the file (" +
             num(size_) + " bytes)",
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
      fail(rules::kBadDescriptor, "entry " + shown + ": data descriptor of " + num(total) + " bytes at " + num(data_end) + " runs past the end of the file",
           data_end);
    const u64 p = data_end + (has_sig ? 4 : 0);
    const u32 d_crc = le32(p);
    const u64 d_c = width == 8 ? le64(p + 4) : le32(p + 4);
    const u64 d_u = width == 8 ? le64(p + 12) : le32(p + 8);
    if (d_crc != e.crc32)
      fail(rules::kBadDescriptor, "entry " + shown + ": CRC32 " + hex(d_crc) + " in the data descriptor, " + hex(e.crc32) + " in the central directory", p);
    if (d_c != e.compressed_size)
      fail(rules::kBadDescriptor,
           "entry " + shown + ": compressed size " + num(d_c) + " in the data descriptor, " + num(e.compressed_size) + " in the central directory",
           p + 4);
    if (d_u != e.size)
      fail(rules::kBadDescriptor,
           "entry " + shown + ": size " + num(d_u) + " in the data descriptor, " + num(e.size) + " in the central directory", p + 4 + width);
    e.descriptor_size = total;
    e.end_offset = data_end + total;
  }
}

void Parser::check_layout(Archive& a) {
  std::vector<const Entry*> order;
  order.reserve(a.entries.size());
  for (const auto& e : a.entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* x, const Entry* y) { return x->local_offset < y->local_offset; });
  u64 cursor = 0, gaps = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Entry& e = *order[i];
    if (i == 0) a.prefix_size = e.local_offset;
    gaps += e.local_offset - cursor;  // local_offset >= cursor, checked below for i > 0
    if (i + 1 < order.size() && e.end_offset > order[i + 1]->local_offset)
      fail(rules::kOverlap,
           "entry " + show(e.name) + " [" + num(e.local_offset) + ", " + num(e.end_offset) + ") overlaps entry " + show(order[i + 1]->name) +
               " at " + num(order[i + 1]->local_offset),
           order[i + 1]->local_offset);
    cursor = e.end_offset;
  }
  if (order.empty()) a.prefix_size = a.central_offset;
  if (cursor > a.central_offset)
    fail(rules::kOverlap,
         "entry " + show(order.back()->name) + " ends at " + num(cursor) + ", inside the central directory at " + num(a.central_offset),
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
      fail(rules::kDuplicateName, "entry " + show(e.name) + " appears twice in the central directory",
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
    throw Error(rules::kDataPastEnd, "entry " + show(e.name) + ": data runs past the end of the file", name, e.data_offset);
  const auto raw = file.subspan(e.data_offset, e.compressed_size);
  if (e.method == zip::kMethodStored) {
    if (e.size != e.compressed_size)
      throw Error(rules::kStoredSize, "stored entry " + show(e.name) + " has compressed size " + num(e.compressed_size) + " but size " + num(e.size),
                  name, e.data_offset);
    return raw;
  }
  if (e.method != zip::kMethodDeflated)
    throw Error(rules::kUnsupportedMethod, "entry " + show(e.name) + " uses compression method " + num(e.method), name, e.local_offset + 8);
  if (e.size > limits.max_alloc)
    throw Error(rules::kEntryTooLarge,
                "entry " + show(e.name) + " inflates to " + num(e.size) + " bytes, over the allocation limit of " + num(limits.max_alloc),
                name, e.data_offset);
  const auto bound = util::mul(e.compressed_size, zip::kMaxDeflateRatio);
  if (bound && e.size > *bound)
    throw Error(rules::kDeflateRatio,
                "entry " + show(e.name) + " claims " + num(e.size) + " bytes from " + num(e.compressed_size) +
                    " compressed bytes, more than deflate can expand (1032:1)",
                name, e.data_offset);
  std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> d(libdeflate_alloc_decompressor());
  if (!d) throw Error(tensorseal::rules::kInternal, "libdeflate_alloc_decompressor failed", name);
  scratch.assign(e.size, std::byte{0});
  std::size_t in_used = 0, out_used = 0;
  const auto r = libdeflate_deflate_decompress_ex(d.get(), raw.data(), raw.size(), scratch.data(), scratch.size(), &in_used, &out_used);
  if (r == LIBDEFLATE_INSUFFICIENT_SPACE)
    throw Error(rules::kInflateFailed, "entry " + show(e.name) + " inflates to more than the declared " + num(e.size) + " bytes", name,
                e.data_offset);
  if (r != LIBDEFLATE_SUCCESS)
    throw Error(rules::kInflateFailed, "entry " + show(e.name) + ": the deflate stream is invalid", name,
                e.data_offset);
  if (out_used != e.size)
    throw Error(rules::kInflateFailed, "entry " + show(e.name) + " inflates to " + num(out_used) + " bytes, the central directory says " + num(e.size),
                name, e.data_offset);
  if (in_used != e.compressed_size)
    throw Error(rules::kInflateFailed,
                "entry " + show(e.name) + ": the deflate stream ends after " + num(in_used) + " of " + num(e.compressed_size) + " bytes",
                name, e.data_offset + in_used);
  return {scratch.data(), scratch.size()};
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
              "entries " + show(x.name) + " and " + show(y.name) +
                  " differ only in case; torch looks names up ignoring case, so either could be the record it loads",
              name, y.local_offset);
}

void check_crc(const Entry& e, std::uint32_t got, const std::string& name) {
  if (!e.crc_recorded) return;
  if (got != e.crc32)
    throw Error(rules::kCrcMismatch, "entry " + show(e.name) + ": CRC32 of the data is " + hex(got) + ", the archive says " + hex(e.crc32), name,
                e.data_offset);
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
