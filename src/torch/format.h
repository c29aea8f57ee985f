// The torch formats' entry points, one row each in the format table (src/api/formats.cc):
// torch zip (torch.save), torch legacy (_use_new_zipfile_serialization=False), torch
// tar (torch.save of torch 0.1) and plain pickle streams (pickle.dumps of tensors,
// storages, modules).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "io/input.h"
#include "io/sink.h"
#include "tensorseal/write.h"
#include "zip/writer.h"

namespace tensorseal::detail::torch {

// Recognisers: look at the first bytes only, never throw.
bool detect_torch_zip(std::span<const std::byte> head) noexcept;
bool detect_torch_legacy(std::span<const std::byte> head) noexcept;
bool detect_torch_tar(std::span<const std::byte> head) noexcept;
bool detect_pickle(std::span<const std::byte> head) noexcept;

// Readers: fill a Checkpoint or throw Error with the file name and byte offset set.
Checkpoint read_torch_zip(const io::Input& in);
Checkpoint read_torch_legacy(const io::Input& in);
Checkpoint read_torch_tar(const io::Input& in);
Checkpoint read_pickle_file(const io::Input& in);

// Writers: stream canonical bytes into `sink`.
void write_torch_zip(const Value& root, const WriteOptions& options, io::Sink& sink);
// The records of a canonical .pt through `z` (a torch-profile zip::Writer), in file
// order: the constructor writes data.pkl holding `pkl` and the small records; then the
// caller writes each planned storage's record, named storage_name(key) for keys 0, 1,
// ..., and calls add_storage() after each; finish() writes version, serialization_id
// (over every record's name, size and CRC32) and the central directory.
class Archive {
 public:
  Archive(zip::Writer& z, std::string_view pkl);
  static std::string storage_name(std::size_t key);
  std::size_t storages() const noexcept { return storages_; }
  void add_storage();
  // The CRC32 of storage `key`'s bytes, for a record written with zip::Writer::skip
  // (its bytes written elsewhere): serialization_id and the central directory use it
  // (zip::Writer::set_crc). Before finish().
  void set_crc(std::size_t key, std::uint32_t crc);
  void finish();

 private:
  void small(std::string_view name, std::string_view data);
  zip::Writer& z_;
  std::size_t first_storage_ = 0;  // z_'s record index of storage 0 (storage k: first_storage_ + k)
  std::size_t storages_ = 0;
};
void write_torch_legacy(const Value& root, const WriteOptions& options, io::Sink& sink);
// The canonical pickle of a numpy object array's value (what np.save writes after the
// header with allow_pickle): numpy objects inline, no persistent ids. A torch tensor
// inside is torch/cannot-write (np.load could not read it).
std::string pickle_without_storages(const Value& root);

}  // namespace tensorseal::detail::torch
