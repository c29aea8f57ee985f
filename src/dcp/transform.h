// DCP's stream transforms (FileSystemWriter(_extensions=[...]), torch's
// checkpoint/_extension.py): an item written through them records their descriptors
// in _StorageInfo.transform_descriptors, and its bytes in the file are the transformed
// stream. The one extension torch has is ZStandard ("stream.zstd/1").
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorseal/storage.h"

namespace tensorseal::detail::dcp {

// True for a descriptor tensorseal can undo: "stream.zstd/1" or "stream.zstd/1.<minor>"
// (torch's ZStandard.from_descriptor accepts major version 1 only).
bool known_transform(std::string_view descriptor) noexcept;

// The size of the complete zstd frame starting at data[0], or 0 when none starts there.
std::size_t zstd_frame_size(std::span<const std::byte> data) noexcept;

// The item's bytes with `transforms` (known ones, in recorded order) undone: each zstd
// stream decompressed in full (every frame; nothing may follow the last), at most
// `max_alloc` bytes (dcp/max-alloc). Corrupt or truncated data: dcp/transform-data.
// `file` and `offset` name the item in errors.
std::shared_ptr<const Storage> undo_transforms(std::span<const std::byte> raw,
                                               const std::vector<std::string>& transforms, std::uint64_t max_alloc,
                                               const std::string& file, std::uint64_t offset);

}  // namespace tensorseal::detail::dcp
