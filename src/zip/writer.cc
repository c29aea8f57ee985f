// Deterministic zip writer (profiles in writer.h, spec in docs/formats/zip.md).
//
// torch profile, per record (miniz mz_zip_writer_add_mem_ex_v2 as torch calls it):
//   "PK\3\4" u16 0 u16 flags u16 0 u16 0 u16 0 u32 0 u32 0 u32 0 u16 n u16 x
//   name[n] [zip64: u16 1 u16 len u64 usize u64 0 [u64 offset]] "FB" u16 pad 'Z'*pad
//   data "PK\7\8" u32 crc (u32 size u32 size | u64 size u64 size)
// numpy profile, per record (CPython zipfile, force_zip64, seekable):
//   "PK\3\4" u16 45 u16 flags u16 0 u16 0 u16 0x21 u32 crc u32 ~0 u32 ~0 u16 n u16 20
//   name[n] u16 1 u16 16 u64 usize u64 csize  data
// then central headers, [zip64 end record, locator], end record.
#include "zip/writer.h"

#include <fmt/format.h>

#include "tensorseal/error.h"
#include "util/crc32.h"
#include "util/endian.h"
#include "util/text.h"
#include "zip/constants.h"
#include "zip/reader.h"

namespace tensorseal::detail::zip {

namespace {

using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

// miniz compares against MZ_UINT32_MAX with >=; python's zipfile uses
// ZIP64_LIMIT = 2^31 - 1 with >.
constexpr u64 kMinizLimit = 0xFFFFFFFF;
constexpr u64 kPythonZip64Limit = (u64{1} << 31) - 1;
constexpr u64 kPythonFileCountLimit = 0xFFFF;
constexpr u16 kPythonVersion = 45;                       // ZIP64_VERSION: force_zip64 raises 20 to 45
constexpr u16 kPythonMadeBy = (3u << 8) | 45;            // create_system 3 (unix) on non-Windows
constexpr u32 kPythonExternalAttr = 0600u << 16;         // ?rw------- for ZipFile.open(name, 'w')
constexpr u16 kPythonDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01
constexpr u16 kMinizZip64MadeBy = 0x031E;
constexpr u16 kZip64Needed = 45;

void put16(std::string& s, u16 v) { util::append_le<u16>(s, v); }
void put32(std::string& s, u32 v) { util::append_le<u32>(s, v); }
void put64(std::string& s, u64 v) { util::append_le<u64>(s, v); }
u32 sat32(u64 v) { return v >= kMinizLimit ? zip::kSentinel32 : static_cast<u32>(v); }

[[noreturn]] void misuse(std::string what) { throw Error(rules::kWriterMisuse, std::move(what)); }

}  // namespace

Writer::Writer(io::Sink& sink, Profile profile, std::uint32_t alignment)
    : sink_(sink), profile_(profile), alignment_(alignment), base_(sink.position()) {
  // The padding (< alignment) plus a zip64 field (<= 28) and the "FB" header must fit
  // the u16 extra length.
  if (profile_ == Profile::kTorch && (alignment_ == 0 || alignment_ > 32768))
    throw Error(rules::kWriterMisuse, fmt::format("alignment {} must be in 1..32768", alignment_));
}

void Writer::begin_record(std::string name, std::uint64_t size, std::optional<std::uint32_t> crc) {
  if (open_ || finished_) misuse("begin_record while a record is open or after finish");
  if (name.empty() || name.size() > zip::kMaxNameLength || name.find('\0') != std::string::npos || name[0] == '/')
    throw Error(rules::kWriterName, fmt::format("record name of {} bytes is not a valid zip name", name.size()));
  if (profile_ == Profile::kNumpy && !crc) misuse("the numpy profile needs the record's CRC32 up front");
  const u64 offset = sink_.position() - base_;
  std::string& h = scratch_;  // reused: no allocation per record
  h.clear();
  u16 flags = 0;
  if (profile_ == Profile::kTorch) {
    // Flags: UTF-8 always; data descriptor only when there is data (miniz sets
    // MZ_ZIP_LDH_BIT_FLAG_HAS_LOCATOR for buf_size > 0 and writes the descriptor
    // only when uncomp_size != 0).
    flags = zip::kFlagUtf8 | (size > 0 ? zip::kFlagDataDescriptor : 0);
    const bool zip64 = size >= kMinizLimit || offset >= kMinizLimit;
    std::string& extra = extra_;
    extra.clear();
    if (zip64) {
      // Local zip64 field: usize and csize when the size needs it (csize is still 0
      // when miniz writes the header), then the header offset when that needs it.
      const bool big_size = size >= kMinizLimit, big_offset = offset >= kMinizLimit;
      put16(extra, zip::kZip64ExtraId);
      put16(extra, static_cast<u16>((big_size ? 16 : 0) + (big_offset ? 8 : 0)));
      if (big_size) {
        put64(extra, size);
        put64(extra, 0);
      }
      if (big_offset) put64(extra, offset);
    }
    // getPadding(): data starts at offset + 30 + name + (zip64 field) + 4 + pad.
    const u64 start = offset + zip::kLocalHeaderSize + name.size() + extra.size() + zip::kExtraHeaderSize;
    const u64 pad = (alignment_ - start % alignment_) % alignment_;
    put16(extra, zip::kTorchPaddingExtraId);
    put16(extra, static_cast<u16>(pad));
    extra.append(pad, 'Z');
    put32(h, zip::kLocalHeaderSig);
    put16(h, 0);  // version needed: method ? 20 : 0
    put16(h, flags);
    put16(h, zip::kMethodStored);
    put16(h, 0);  // DOS time (torch builds miniz with MINIZ_NO_TIME)
    put16(h, 0);  // DOS date
    put32(h, 0);  // crc32, sizes: in the data descriptor
    put32(h, 0);
    put32(h, 0);
    put16(h, static_cast<u16>(name.size()));
    put16(h, static_cast<u16>(extra.size()));
    h += name;
    h += extra;
  } else {
    flags = util::is_ascii(name) ? 0 : zip::kFlagUtf8;
    put32(h, zip::kLocalHeaderSig);
    put16(h, kPythonVersion);
    put16(h, flags);
    put16(h, zip::kMethodStored);
    put16(h, 0);  // 00:00:00
    put16(h, kPythonDosDate);
    put32(h, *crc);
    put32(h, zip::kSentinel32);  // force_zip64: sizes live in the zip64 field
    put32(h, zip::kSentinel32);
    put16(h, static_cast<u16>(name.size()));
    put16(h, 20);  // zip64 field: 4 + 8 + 8
    h += name;
    put16(h, zip::kZip64ExtraId);
    put16(h, 16);
    put64(h, size);  // file_size
    put64(h, size);  // compress_size (stored)
  }
  sink_.write(h);
  current_ = Done{std::move(name), offset, size, 0, flags};
  written_ = 0;
  crc_ = 0;
  expected_crc_ = crc;
  known_crc_ = false;
  open_ = true;
}

void Writer::begin_record_known_crc(std::string name, std::uint64_t size, std::uint32_t crc) {
  begin_record(std::move(name), size, crc);
  crc_ = crc;
  known_crc_ = true;
}

void Writer::checksum(std::span<const std::byte> data) {
  if (!open_) misuse("write without begin_record");
  if (data.size() > current_.size - written_)
    misuse(fmt::format("record '{}' declared {} bytes, got more", current_.name, current_.size));
  if (!known_crc_) crc_ = util::crc32(crc_, data);
  written_ += data.size();
}

void Writer::write(std::span<const std::byte> data) {
  checksum(data);
  sink_.write(data);
}

void Writer::write_borrowed(std::span<const std::byte> data) {
  checksum(data);
  sink_.write_borrowed(data);
}

void Writer::skip(std::uint64_t n) {
  if (!open_ || !known_crc_) misuse("skip needs a record begun with begin_record_known_crc");
  if (n > current_.size - written_)
    misuse(fmt::format("record '{}' declared {} bytes, got more", current_.name, current_.size));
  written_ += n;
  current_.skipped = true;
  sink_.skip(n);
}

void Writer::set_crc(std::size_t index, std::uint32_t crc) {
  if (finished_ || index >= done_.size() || !done_[index].skipped)
    misuse("set_crc needs an ended record whose data was skipped, before finish");
  done_[index].crc = crc;
}

void Writer::end_record() {
  if (!open_) misuse("end_record without begin_record");
  if (written_ != current_.size)
    misuse(fmt::format("record '{}' declared {} bytes, got {}", current_.name, current_.size, written_));
  if (expected_crc_ && *expected_crc_ != crc_)
    misuse("record '" + current_.name + "': CRC32 given up front differs from the data's");
  current_.crc = crc_;
  if (profile_ == Profile::kTorch && current_.size > 0) {
    std::string& d = scratch_;
    d.clear();
    put32(d, zip::kDescriptorSig);
    put32(d, crc_);
    const bool zip64 = current_.size >= kMinizLimit || current_.local_offset >= kMinizLimit;
    if (zip64) {
      put64(d, current_.size);
      put64(d, current_.size);
    } else {
      put32(d, static_cast<u32>(current_.size));
      put32(d, static_cast<u32>(current_.size));
    }
    sink_.write(d);
  }
  done_.push_back(std::move(current_));
  open_ = false;
}

void Writer::record(std::string name, std::string_view data) {
  const auto bytes = util::as_bytes(data);
  begin_record(std::move(name), data.size(),
               profile_ == Profile::kNumpy ? std::optional<u32>(util::crc32(0, bytes)) : std::nullopt);
  write(bytes);
  end_record();
}

void Writer::record_deflated(std::string name, std::uint64_t size, std::uint32_t crc,
                             std::span<const std::byte> compressed) {
  if (profile_ != Profile::kNumpy) misuse("DEFLATED records are written in the numpy profile only");
  if (open_ || finished_) misuse("record_deflated while a record is open or after finish");
  if (name.empty() || name.size() > zip::kMaxNameLength || name.find('\0') != std::string::npos || name[0] == '/')
    throw Error(rules::kWriterName, fmt::format("record name of {} bytes is not a valid zip name", name.size()));
  const u64 offset = sink_.position() - base_;
  const u16 flags = util::is_ascii(name) ? 0 : zip::kFlagUtf8;
  std::string h;
  put32(h, zip::kLocalHeaderSig);
  put16(h, kPythonVersion);
  put16(h, flags);
  put16(h, zip::kMethodDeflated);
  put16(h, 0);  // 00:00:00
  put16(h, kPythonDosDate);
  put32(h, crc);
  put32(h, zip::kSentinel32);  // force_zip64: sizes live in the zip64 field
  put32(h, zip::kSentinel32);
  put16(h, static_cast<u16>(name.size()));
  put16(h, 20);
  h += name;
  put16(h, zip::kZip64ExtraId);
  put16(h, 16);
  put64(h, size);               // file_size
  put64(h, compressed.size());  // compress_size
  sink_.write(h);
  sink_.write(compressed);
  Done d{std::move(name), offset, size, crc, flags};
  d.method = zip::kMethodDeflated;
  d.compressed = compressed.size();
  done_.push_back(std::move(d));
}

void Writer::finish() {
  if (open_ || finished_) misuse("finish while a record is open or twice");
  finished_ = true;
  const u64 cd_offset = sink_.position() - base_;
  std::string cd;
  std::size_t names = 0;
  for (const Done& r : done_) names += r.name.size();
  cd.reserve(done_.size() * (zip::kCentralHeaderSize + 28) + names);
  for (const Done& r : done_) {
    std::string& extra = extra_;
    extra.clear();
    u16 made_by = 0, needed = 0;
    u32 ext_attr = 0, csize32, usize32, offset32;
    u16 date = 0;
    if (profile_ == Profile::kTorch) {
      const bool big_size = r.size >= kMinizLimit, big_offset = r.local_offset >= kMinizLimit;
      if (big_size || big_offset) {
        put16(extra, zip::kZip64ExtraId);
        put16(extra, static_cast<u16>((big_size ? 16 : 0) + (big_offset ? 8 : 0)));
        if (big_size) {
          put64(extra, r.size);
          put64(extra, r.size);
        }
        if (big_offset) put64(extra, r.local_offset);
      }
      csize32 = usize32 = sat32(r.size);
      offset32 = sat32(r.local_offset);
    } else {
      made_by = kPythonMadeBy;
      needed = kPythonVersion;
      ext_attr = kPythonExternalAttr;
      date = kPythonDosDate;
      const u64 csize = r.method == zip::kMethodDeflated ? r.compressed : r.size;
      const bool big_size = r.size > kPythonZip64Limit || csize > kPythonZip64Limit,
                 big_offset = r.local_offset > kPythonZip64Limit;
      const u16 n = static_cast<u16>((big_size ? 2 : 0) + (big_offset ? 1 : 0));
      if (n) {
        put16(extra, zip::kZip64ExtraId);
        put16(extra, static_cast<u16>(8 * n));
        if (big_size) {
          put64(extra, r.size);
          put64(extra, csize);
        }
        if (big_offset) put64(extra, r.local_offset);
      }
      usize32 = big_size ? zip::kSentinel32 : static_cast<u32>(r.size);
      csize32 = big_size ? zip::kSentinel32 : static_cast<u32>(csize);
      offset32 = big_offset ? zip::kSentinel32 : static_cast<u32>(r.local_offset);
    }
    put32(cd, zip::kCentralHeaderSig);
    put16(cd, made_by);
    put16(cd, needed);
    put16(cd, r.flags);
    put16(cd, r.method);
    put16(cd, 0);  // time
    put16(cd, date);
    put32(cd, r.crc);
    put32(cd, csize32);
    put32(cd, usize32);
    put16(cd, static_cast<u16>(r.name.size()));
    put16(cd, static_cast<u16>(extra.size()));
    put16(cd, 0);  // comment
    put16(cd, 0);  // disk start
    put16(cd, 0);  // internal attributes
    put32(cd, ext_attr);
    put32(cd, offset32);
    cd += r.name;
    cd += extra;
  }
  const u64 count = done_.size();
  // miniz writes central directory offset 0 for an empty archive.
  const u64 cd_ofs_field = (profile_ == Profile::kTorch && count == 0) ? 0 : cd_offset;
  const u64 cd_size = cd.size();
  std::string end;
  bool zip64 = profile_ == Profile::kTorch || count > kPythonFileCountLimit || cd_offset > kPythonZip64Limit ||
               cd_size > kPythonZip64Limit;
  if (zip64) {
    const u64 rec = cd_offset + cd_size;
    put32(end, zip::kZip64EocdSig);
    put64(end, zip::kZip64EocdRecordSizeField);
    put16(end, profile_ == Profile::kTorch ? kMinizZip64MadeBy : kZip64Needed);
    put16(end, kZip64Needed);
    put32(end, 0);
    put32(end, 0);
    put64(end, count);
    put64(end, count);
    put64(end, cd_size);
    put64(end, cd_ofs_field);
    put32(end, zip::kZip64LocatorSig);
    put32(end, 0);
    put64(end, rec);
    put32(end, 1);
  }
  put32(end, zip::kEocdSig);
  put16(end, 0);
  put16(end, 0);
  put16(end, static_cast<u16>(std::min<u64>(count, 0xFFFF)));
  put16(end, static_cast<u16>(std::min<u64>(count, 0xFFFF)));
  put32(end, static_cast<u32>(std::min<u64>(cd_size, 0xFFFFFFFF)));
  put32(end, static_cast<u32>(std::min<u64>(cd_ofs_field, 0xFFFFFFFF)));
  put16(end, 0);  // comment length
  sink_.write(cd);
  sink_.write(end);
}

}  // namespace tensorseal::detail::zip
