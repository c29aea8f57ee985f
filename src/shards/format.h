// Hugging Face shard directories' entry points (their row in src/api/formats.cc).
// A directory is found through its index file; the index is what detection sees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>

#include "io/input.h"
#include "tensorseal/write.h"

namespace tensorseal::detail::shards {

// A JSON object ('{' after optional whitespace) that names "weight_map" in its first
// bytes. Never throws.
bool detect_hf_shards(std::span<const std::byte> head) noexcept;
// Reads the index `in` (a file on disk: in.directory is set) and every shard it lists,
// each through in.read_nested; validates them against each other (constants.h rules).
Checkpoint read_hf_shards(const io::Input& in);
// The index file of shard directory `dir`: model.safetensors.index.json, else
// pytorch_model.bin.index.json, else the one "*.index.json" whose content is an index;
// in a directory with no index, its unsharded model.safetensors, else pytorch_model.bin.
// Throws shards/no-index or shards/ambiguous-index.
std::filesystem::path find_shard_index(const std::filesystem::path& dir);
// Writes `root` (a flat dict of str -> tensor) as safetensors shards plus
// model.safetensors.index.json into directory `dir`, atomically as a whole.
void write_hf_shards(const Value& root, const WriteOptions& options, const std::filesystem::path& dir);

}  // namespace tensorseal::detail::shards
