// What a format reader parses: the whole file as one storage (a mapping or an owned
// buffer) so that tensors can be zero-copy slices of it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/memory_copy.h"
#include "tensorseal/checkpoint.h"
#include "tensorseal/error.h"
#include "tensorseal/storage.h"

namespace tensorseal::detail::io {

struct Input;

// Container checksums of tensor data a reader was asked to leave to the consumer
// (Input::checks_later) instead of verifying them while reading. The consumer verifies
// every one before anything computed from the bytes leaves the library.
struct LaterChecks {
  enum class Where : std::uint8_t {
    // Each storage a checksum covers carries it (Storage::pending_checksum), checked
    // as the consumer reads the bytes (hash_file). A reader whose storages do not
    // survive as read (DCP chunks assembled into new storages) verifies instead.
    kOnStorages,
    // Added to `items` (readers of several files may add from several threads), all
    // verified by the consumer before what it wrote is made visible (convert_file).
    kListed,
  };
  explicit LaterChecks(Where w) : where(w) {}
  void add(std::shared_ptr<const Storage::PendingChecksum> c) {
    const std::lock_guard lock(mutex);
    items.push_back(std::move(c));
  }
  const Where where;
  std::mutex mutex;
  std::vector<std::shared_ptr<const Storage::PendingChecksum>> items;
};
// Reads a file embedded in another (torch.storage._load_from_bytes payloads): given by
// the dispatch layer to every reader, so that no format calls back up to detection.
using ReadNested = Checkpoint (*)(const Input&);

struct Input {
  std::shared_ptr<const Storage> whole;  // every byte of the file
  std::string name;                      // for messages
  // The folder of the file when it was read from disk (empty for bytes in memory):
  // formats made of several files (shard directories) find the others beside it.
  std::filesystem::path directory;
  const ReadOptions* options = nullptr;
  std::uint32_t nesting = 0;         // depth of nested files (_load_from_bytes)
  ReadNested read_nested = nullptr;  // null: nested files are refused
  // Null: the reader verifies the container checksums of tensor data while reading.
  // Set: it leaves them to the consumer as LaterChecks::where says. Copies of this
  // Input (shards, npy members, DCP data files) share it.
  std::shared_ptr<LaterChecks> checks_later;

  std::span<const std::byte> bytes() const { return whole->bytes(); }
  std::uint64_t size() const { return whole->size(); }
  // A zero-copy window of the file; throws kTruncated when outside.
  std::shared_ptr<Storage> window(std::uint64_t offset, std::uint64_t size) const {
    return Storage::slice(whole, offset, size);
  }
};

// Throws Error(rule, detail) at byte `offset` of the file `in` names: the Input
// overload of core/fail.h's fail(), for readers that hold the Input.
[[noreturn]] inline void fail(const Rule& rule, std::string detail, const Input& in, std::uint64_t offset = kNoOffset) {
  throw Error(rule, std::move(detail), in.name, offset);
}

// The Input of a whole mapped file, named by its path.
inline Input input_of(const std::shared_ptr<const MappedFile>& file, const ReadOptions& options) {
  Input in;
  in.name = file->path();
  in.directory = std::filesystem::path(file->path()).parent_path();
  if (in.directory.empty()) in.directory = ".";
  in.whole = options.in_memory ? copy_into_memory(*file) : Storage::mapped(file, 0, file->size());
  in.options = &options;
  return in;
}

}  // namespace tensorseal::detail::io
