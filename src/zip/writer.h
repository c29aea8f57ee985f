// Deterministic zip writer, with the exact profile torch 2.x's writer uses
// (caffe2/serialize/inline_container.cc via miniz) so torch.load accepts and mmaps
// it, and so torch's getRecordOffsetNoRead arithmetic holds:
//   local header (30 + name + extra), extra = "FB" u16 len + 'Z' padding so that data
//   starts on a multiple of `alignment` (64); STORED; flags 0x0808 (UTF-8, data
//   descriptor); DOS time/date 0; then the data; then a data descriptor
//   (PK\7\8, crc32, sizes: 4-byte sizes (16 bytes total) or 8-byte sizes past 4 GiB
//   (24 bytes)). Central directory entries have no extra field unless zip64 needs it.
//   A zip64 end-of-central-directory record and locator are always written.
// Data is streamed to the sink with its CRC32 computed on the way.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/sink.h"

namespace tensorseal::detail::zip {

class Writer {
 public:
  explicit Writer(Sink& sink, std::uint32_t alignment = 64);
  // Starts a record; then call write() any number of times, then end_record().
  void begin_record(std::string name);
  void write(std::span<const std::byte> data);
  void end_record();
  // Convenience: a whole small record.
  void record(std::string name, std::string_view data);
  // Writes the central directory and end records. Call once.
  void finish();

 private:
  struct Done { std::string name; std::uint64_t local_offset, size; std::uint32_t crc; };
  Sink& sink_;
  std::uint32_t alignment_;
  std::vector<Done> done_;
  std::string current_;
  std::uint64_t current_offset_ = 0, current_size_ = 0;
  std::uint32_t current_crc_ = 0;
  bool open_ = false;
};

}  // namespace tensorseal::detail::zip
