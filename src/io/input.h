// What a format reader parses: the whole file as one storage (a mapping or an owned
// buffer) so that tensors can be zero-copy slices of it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/storage.h"

namespace tensorseal::detail {

namespace zip {
struct CrcCheck;
}

struct Input {
  std::shared_ptr<const Storage> whole;  // every byte of the file
  std::string name;                      // for messages
  const ReadOptions* options = nullptr;
  std::uint32_t nesting = 0;             // depth of nested files (_load_from_bytes)
  // Set only by tensorseal::hash_file (src/hash/content_hash.cc): the torch zip reader
  // then leaves the CRC32 of the storage records (not of data.pkl and the small
  // records, which it parses) to the caller, which must verify them before anything
  // computed from their bytes leaves the library. Never set for nested files.
  std::vector<zip::CrcCheck>* deferred_crcs = nullptr;

  std::span<const std::byte> bytes() const { return whole->bytes(); }
  std::uint64_t size() const { return whole->size(); }
  // A zero-copy window of the file; throws kTruncated when outside.
  std::shared_ptr<Storage> window(std::uint64_t offset, std::uint64_t size) const {
    return Storage::slice(whole, offset, size);
  }
};

// The Input of a whole mapped file, named by its path (read_file, read_safetensors_index
// and hash_file all read a file this way).
inline Input input_of(const std::shared_ptr<const MappedFile>& file, const ReadOptions& options) {
  Input in;
  in.name = file->path();
  in.whole = Storage::mapped(file, 0, file->size());
  in.options = &options;
  return in;
}

// Detects the format of `in` and runs its reader (also used for nested files).
Checkpoint read_input(const Input& in);

// Per-format readers (src/<format>/). Each fills a Checkpoint or throws Error with
// the file name and byte offset set.
Checkpoint read_safetensors(const Input& in);
Checkpoint read_torch_zip(const Input& in);
Checkpoint read_torch_legacy(const Input& in);
Checkpoint read_pickle_file(const Input& in);
Checkpoint read_npy(const Input& in);
Checkpoint read_npz(const Input& in);

}  // namespace tensorseal::detail
