// A DCP .metadata file as typed values, parsed by the restricted pickle VM: the DCP
// dataclasses become the structs below; nothing is imported or run.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/dcp.h"
#include "tensorseal/dtype.h"
#include "tensorseal/limits.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::dcp {

using Chunk = DcpChunk;
using StorageInfo = DcpStorage;
using Entry = DcpEntry;
using Stored = DcpStored;
using Metadata = DcpMetadata;

// True when `head` starts like a .metadata pickle: a protocol >= 2 pickle whose first
// global is torch.distributed.checkpoint.metadata.Metadata. Never throws.
bool looks_like_metadata(std::span<const std::byte> head) noexcept;

// Parses and checks a .metadata stream: every global must be one of
// dcp::kMetadataGlobals or a torch dtype (dcp/metadata-global), every field typed as
// DCP writes it (dcp/metadata-shape), every tensor chunk and bytes item must have its
// storage_data entry (dcp/storage-missing). Throws tensorseal::Error.
Metadata parse_metadata(std::span<const std::byte> bytes, const std::string& name, const Limits& limits);

// The canonical .metadata pickle (protocol 2) of `md`, the inverse of parse_metadata:
// entries (state_dict_metadata, then planner_data for entries with a path) and
// storage_data in the order given, each dataclass as DCP pickles it, StorageMeta with
// save_id / checkpoint_id when set (no load_id, no modules), version when set.
std::string encode_metadata(const Metadata& md);
// The key of a storage_data entry: MetadataIndex(fqn, offset) without the index hint
// (chunk offsets for tensor chunks, none for BYTE_IO items).
std::string item_key(const std::string& fqn, const std::optional<std::vector<std::int64_t>>& offsets);
// A save_id derived from content instead of uuid4: the first 128 bits of `digest`
// ("algo:hex") in UUID text form (8-4-4-4-12).
std::string save_id_of(const std::string& digest);

}  // namespace tensorseal::detail::dcp
