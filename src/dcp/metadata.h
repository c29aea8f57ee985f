// A DCP .metadata file as typed values, parsed by the restricted pickle VM: the DCP
// dataclasses become the structs below; nothing is imported or run.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/dtype.h"
#include "tensorseal/limits.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::dcp {

struct Chunk {
  std::vector<std::int64_t> offsets, sizes;  // in elements, one per dimension
};

struct StorageInfo {
  std::string relative_path;
  std::uint64_t offset = 0, length = 0;
};

struct Entry {
  std::string fqn;
  bool is_tensor = false;  // else a BYTE_IO item (BytesStorageMetadata)
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> size;
  std::vector<Chunk> chunks;
  // storage_data of each chunk (tensors, same order as chunks) or of the item (bytes).
  std::vector<StorageInfo> storage;
  std::vector<Value> path;  // planner_data's path (str / int parts); empty: none given
};

struct Metadata {
  std::vector<Entry> entries;  // state_dict_metadata's order
  std::vector<StorageInfo> storage_order;  // storage_data in pickled order
  std::optional<std::string> save_id, checkpoint_id, version;
  std::vector<GlobalRef> globals;
};

// True when `head` starts like a .metadata pickle: a protocol >= 2 pickle whose first
// global is torch.distributed.checkpoint.metadata.Metadata. Never throws.
bool looks_like_metadata(std::span<const std::byte> head) noexcept;

// Parses and checks a .metadata stream: every global must be one of
// dcp::kMetadataGlobals or a torch dtype (dcp/metadata-global), every field typed as
// DCP writes it (dcp/metadata-shape), every tensor chunk and bytes item must have its
// storage_data entry (dcp/storage-missing). Throws tensorseal::Error.
Metadata parse_metadata(std::span<const std::byte> bytes, const std::string& name, const Limits& limits);

}  // namespace tensorseal::detail::dcp
