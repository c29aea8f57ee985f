// tensorseal/storage.h — byte buffers that tensors view.
//
// A Storage is an immutable run of bytes, either owned (heap) or a window of a
// memory-mapped file (zero-copy; the mapping lives as long as any Storage using it).
// The library never writes a storage's bytes. The Python binding lends them to
// torch/numpy as writable buffers (as torch.load(mmap=True) does): file mappings are
// private copy-on-write, so such writes never reach the file.
// Tensors hold std::shared_ptr<const Storage>; several tensors sharing one storage is
// how tied weights and views are represented, exactly as in torch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorseal/dtype.h"
#include "tensorseal/export.h"

namespace tensorseal::detail::core {
struct StorageAccess;  // readers' setters (src/core/storage_access.h); not part of the API
}  // namespace tensorseal::detail::core

TENSORSEAL_API_BEGIN
namespace tensorseal {

// A read-only memory map of a whole file. Empty files map to an empty span.
class MappedFile {
 public:
  [[nodiscard]] static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  std::uint64_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }

 private:
  MappedFile() = default;
  const std::byte* data_ = nullptr;
  std::uint64_t size_ = 0;
  std::string path_;
};

class Storage {
 public:
  // Takes ownership of `bytes`.
  [[nodiscard]] static std::shared_ptr<Storage> owned(std::vector<std::byte> bytes, DType dtype = DType::kUInt8);
  // A window [offset, offset+size) of a mapped file; the range must be inside the file.
  [[nodiscard]] static std::shared_ptr<Storage> mapped(std::shared_ptr<const MappedFile> file, std::uint64_t offset,
                                                       std::uint64_t size, DType dtype = DType::kUInt8);
  // Borrowed memory kept alive by `owner` (e.g. a Python/torch object): no copy. The
  // memory must stay unchanged while any Storage views it.
  [[nodiscard]] static std::shared_ptr<Storage> external(const std::byte* data, std::uint64_t size,
                                                         std::shared_ptr<const void> owner,
                                                         DType dtype = DType::kUInt8);
  // A window of another storage (shares its lifetime, no copy; a window of a pieced
  // storage is pieced).
  [[nodiscard]] static std::shared_ptr<Storage> slice(std::shared_ptr<const Storage> parent, std::uint64_t offset,
                                                      std::uint64_t size);
  // Bytes that are `pieces` one after another (windows of memory `owners` keep alive),
  // not one buffer: a value a reader assembles from parts (a DCP tensor from its
  // chunks). Streaming consumers read pieces() (Tensor::for_each_run) without a copy;
  // the first bytes() call builds one buffer with `join` (once, thread-safe; it must
  // return a storage of exactly the pieces' bytes) and keeps it.
  [[nodiscard]] static std::shared_ptr<Storage> pieced(std::vector<std::span<const std::byte>> pieces,
                                                       std::vector<std::shared_ptr<const void>> owners,
                                                       std::function<std::shared_ptr<const Storage>()> join,
                                                       DType dtype = DType::kUInt8);

  // `size` bytes that `make` computes on first use (once, thread-safe; it must return a
  // storage of exactly `size` bytes, and may throw): values derived from other
  // storages that most consumers never read (Tensor::lazy's applied bits). Pieced with
  // no pieces: for_each_run and bytes() both compute them.
  [[nodiscard]] static std::shared_ptr<Storage> deferred(std::uint64_t size,
                                                         std::function<std::shared_ptr<const Storage>()> make,
                                                         DType dtype = DType::kUInt8);

  // A sink for bytes streamed in order: each span is valid only during the call.
  using Sink = std::function<void(std::span<const std::byte>)>;
  // Reads [offset, offset + size) of a streamed storage's bytes into a Sink, in order.
  using Reader = std::function<void(std::uint64_t offset, std::uint64_t size, const Sink& sink)>;

  // `size` bytes a decoder produces in order (an inflated zip member), never held whole
  // unless a consumer needs one buffer: stream() calls `read`, which may run several
  // times, on several threads at once, and may throw (a checksum or a decoding error,
  // raised before it returns). The first bytes() call builds one buffer with `join`
  // (once, thread-safe; exactly `size` bytes; it may throw, e.g. over a limit) and keeps
  // it; stream() then reads that buffer.
  [[nodiscard]] static std::shared_ptr<Storage> streamed(std::uint64_t size, Reader read,
                                                         std::function<std::shared_ptr<const Storage>()> join,
                                                         DType dtype = DType::kUInt8);

  // The bytes as one buffer (for a pieced or streamed storage: joined on first use,
  // which may throw the join's error).
  std::span<const std::byte> bytes() const { return pieced_ ? joined() : std::span<const std::byte>{data_, size_}; }
  // Calls `sink` with the bytes [offset, offset + size) in order without joining: one
  // span of a storage in memory, one per piece of a pieced one, the decoder's windows
  // of a streamed one (valid only during the call; the joined buffer once there is
  // one). A deferred storage is joined. The range must lie inside the storage.
  void stream(std::uint64_t offset, std::uint64_t size, const Sink& sink) const;
  // True for a streamed storage: stream() may hand out spans that die with the call.
  bool is_streamed() const noexcept;
  // The pieces of a pieced storage, in order; empty for every other storage.
  std::span<const std::span<const std::byte>> pieces() const noexcept;
  std::uint64_t size() const noexcept { return size_; }
  bool is_mapped() const noexcept { return file_ != nullptr; }
  // The file this storage maps, or null when owned.
  const std::shared_ptr<const MappedFile>& file() const noexcept { return file_; }
  // Offset of the first byte inside file() when mapped.
  std::uint64_t file_offset() const noexcept { return file_offset_; }

  // CRC-32 (zip polynomial) of exactly bytes(), when it is known to be right: a
  // reader computed it over these very bytes and it agreed with the container's
  // checksum (torch zip records). Writers of zip records reuse it instead of computing
  // it again. Never inherited by slice() or copies; nullopt when unknown.
  std::optional<std::uint32_t> verified_crc32() const noexcept { return verified_crc32_; }

  // A container checksum its reader was asked not to verify while reading (only for a
  // consumer that verifies it as it reads the bytes). `covered` starts at bytes().data()
  // and may reach past size() (slack a container keeps after a storage). Whoever reads
  // the bytes of a storage carrying one must compute CRC-32 of `covered` and call
  // check() with it before anything computed from them leaves the library. Several
  // storages cut from one record share one PendingChecksum. Never inherited by slice().
  struct PendingChecksum {
    std::span<const std::byte> covered;
    std::function<void(std::uint32_t crc32)> check;  // throws the reader's own error on a mismatch
  };
  const std::shared_ptr<const PendingChecksum>& pending_checksum() const noexcept { return pending_; }

  // Element type the producer declared (typed storages in torch; uint8 when untyped).
  // Data is always little-endian: readers convert big-endian data on read.
  DType dtype = DType::kUInt8;

 private:
  // Lets the factories use std::make_shared (one allocation for the storage and its
  // count) while nothing else can construct one.
  struct Key {
    explicit Key() = default;
  };
  static std::shared_ptr<Storage> make() { return std::make_shared<Storage>(Key{}); }

 public:
  explicit Storage(Key) {}

 private:
  friend struct detail::core::StorageAccess;
  struct Pieced;
  std::span<const std::byte> joined() const;
  std::shared_ptr<Pieced> pieced_;         // set for pieced storages only
  std::shared_ptr<const void> keepalive_;  // owner of the bytes (vector, file or parent)
  std::shared_ptr<const MappedFile> file_;
  const std::byte* data_ = nullptr;
  std::uint64_t size_ = 0;
  std::uint64_t file_offset_ = 0;
  std::optional<std::uint32_t> verified_crc32_;
  std::shared_ptr<const PendingChecksum> pending_;
};

}  // namespace tensorseal
TENSORSEAL_API_END
