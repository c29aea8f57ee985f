// Deterministic zip writer with two exact profiles (docs/formats/zip.md):
//
// Profile::kTorch — what torch 2.x's PyTorchStreamWriter (caffe2/serialize/
// inline_container.cc) writes through its miniz (third_party/miniz-3.0.2,
// mz_zip_writer_add_mem_ex_v2 / mz_zip_writer_finalize_archive), so torch.load accepts
// and mmaps it and torch's getRecordOffsetNoRead arithmetic holds:
//   local header (30 + name + extra): version needed 0, flags 0x0808 (UTF-8 + data
//   descriptor; 0x0800 for an empty record, which also has no descriptor), STORED,
//   DOS time/date 0, CRC and sizes 0; extra = [zip64 field when size or offset
//   >= 0xFFFFFFFF: usize, csize=0, offset] + "FB" u16 len + 'Z' padding so that the
//   data starts on a multiple of `alignment` (64); the data; a data descriptor
//   (PK\7\8, crc32, sizes: 4 bytes each (16 total), or 8 bytes (24 total) when the
//   local header has a zip64 field). Central entries: version made by 0, needed 0,
//   external attributes 0, extra = the zip64 field only when needed. A zip64
//   end-of-central-directory record (made by 0x031E, needed 45) and locator are
//   always written, then the classic record with saturated values.
//
// Profile::kNumpy — what numpy's savez writes through CPython's zipfile
// (ZipFile(allowZip64=True).open(name, 'w', force_zip64=True), seekable output):
//   local header: version needed 45, flags 0 (0x0800 for non-ASCII names), STORED,
//   DOS date 1980-01-01 00:00, CRC, sizes 0xFFFFFFFF + zip64 extra (usize, csize);
//   no descriptor; no alignment. Central entries: made by 0x032D (unix, 4.5), needed
//   45, external attributes 0o600 << 16, zip64 extra only past 2^31-1 (python's
//   ZIP64_LIMIT). Zip64 end records only when python would write them.
//   The local header holds the CRC, so begin_record() needs it up front.
//   record_deflated(): the same with method 8 and the compressed size as csize
//   (np.savez_compressed's members; the stream is tensorseal's, zip/deflate.h).
//
// Data is streamed to the sink; the CRC32 is computed on the way (and checked against
// the one given up front in the numpy profile), unless the caller already holds the
// CRC32 of exactly those bytes (begin_record_known_crc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/sink.h"

namespace tensorseal::detail::zip {

enum class Profile : std::uint8_t { kTorch, kNumpy };

class Writer {
 public:
  explicit Writer(io::Sink& sink, Profile profile = Profile::kTorch, std::uint32_t alignment = 64);
  // Starts a record of exactly `size` bytes (the torch profile's header layout depends
  // on it); then call write() until `size` bytes were given, then end_record().
  // `crc` (CRC32 of the whole record) is required by Profile::kNumpy.
  void begin_record(std::string name, std::uint64_t size, std::optional<std::uint32_t> crc = std::nullopt);
  // Same, for bytes whose CRC32 the caller already holds because it was computed over
  // exactly these bytes (Storage::verified_crc32): write() then does not checksum
  // them again. Never pass a CRC read from a file without computing it.
  void begin_record_known_crc(std::string name, std::uint64_t size, std::uint32_t crc);
  void write(std::span<const std::byte> data);
  // The same from memory that stays valid until the caller flushes the sink
  // (io::Sink::write_borrowed): storage bytes, written without a copy.
  void write_borrowed(std::span<const std::byte> data);
  // The next `n` bytes of the open record are written by the caller itself, at the
  // sink's position (the sink leaves the gap: io::Sink::skip). Only in a record begun
  // with begin_record_known_crc: the CRC of bytes not seen here must be known.
  void skip(std::uint64_t n);
  void end_record();
  // Records ended so far, and record `index`'s name, size and CRC32 (0-based, ended:
  // what its descriptor and central entry say).
  std::uint64_t records() const noexcept { return done_.size(); }
  struct Ended {
    std::string_view name;
    std::uint64_t size;
    std::uint32_t crc;
  };
  Ended ended(std::size_t index) const { return {done_.at(index).name, done_[index].size, done_[index].crc}; }
  // Record `index` (0-based, ended, its data skipped) has CRC32 `crc` after all: the
  // central directory says so. Its data descriptor, written already with the CRC given
  // at begin_record_known_crc, is the caller's to correct in the file
  // (kDescriptorCrcOffset). Before finish().
  void set_crc(std::size_t index, std::uint32_t crc);
  // Profile::kTorch: a record's data descriptor ("PK\7\8", CRC32, sizes) follows its
  // data; its CRC32 (little-endian) lies this many bytes in.
  static constexpr std::size_t kDescriptorCrcOffset = 4;
  // Convenience: a whole small record.
  void record(std::string name, std::string_view data);
  // Profile::kNumpy only: a whole DEFLATED record (method 8), as CPython's zipfile
  // writes one for np.savez_compressed: `compressed` is the raw deflate stream of
  // `size` bytes whose CRC32 is `crc` (the caller computed both from the data).
  void record_deflated(std::string name, std::uint64_t size, std::uint32_t crc, std::span<const std::byte> compressed);
  // Writes the central directory and end records. Call once.
  void finish();

 private:
  struct Done {
    std::string name;
    std::uint64_t local_offset, size;
    std::uint32_t crc;
    std::uint16_t flags;
    std::uint16_t method = 0;      // zip::kMethodStored or kMethodDeflated
    std::uint64_t compressed = 0;  // DEFLATED: the stream's size (STORED: `size`)
    bool skipped = false;          // its data was written elsewhere (skip)
  };
  io::Sink& sink_;
  Profile profile_;
  std::uint32_t alignment_;
  std::uint64_t base_;  // sink position of the archive's first byte
  std::vector<Done> done_;
  Done current_{};
  std::uint64_t written_ = 0;
  std::uint32_t crc_ = 0;
  std::optional<std::uint32_t> expected_crc_;
  bool known_crc_ = false;  // crc_ was given (begin_record_known_crc), not computed
  bool open_ = false, finished_ = false;
  std::string scratch_, extra_;  // a record's header bytes and extra field, reused
  void checksum(std::span<const std::byte> data);
};

}  // namespace tensorseal::detail::zip
