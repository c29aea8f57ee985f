// Hugging Face shard directories' entry points (their row in src/api/formats.cc).
// A directory is found through its index file; the index is what detection sees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/input.h"
#include "tensorseal/write.h"

namespace tensorseal::detail::shards {

// The writer's options (WriteOptions::format_options), parsed.
struct WriteParams {
  // The most tensor bytes per shard file (0: huggingface_hub's default, 5GB); a tensor
  // larger than this gets a shard of its own. The split runs over the tensors sorted
  // by name (bytewise), never the root's order.
  std::uint64_t max_shard_size = 0;
  // This split instead (entries per shard, in root order): the layout the reader gives
  // (Checkpoint::layout), which `canon` keeps.
  std::vector<std::uint64_t> shard_counts;
};
// Parses options.format_options (values as the parsers below gave them).
WriteParams write_params(const WriteOptions& options);
// "5GB" -> "5000000000" (tensorseal::parse_shard_size; shards/bad-size).
std::string parse_max_shard_size(std::string_view text);
// "1,2,2": entries per shard file; api/invalid-argument when not a list of counts.
std::string parse_shard_counts(std::string_view text);

inline constexpr FormatParam kWriteParams[] = {
    {.name = "max_shard_size",
     .flag = "shards",
     .value = "SIZE",
     .help = "write OUT as a directory of Hugging Face safetensors shards of at most SIZE tensor bytes each "
             "(5GB, 500MB, ...: decimal units as huggingface_hub)",
     .parse = parse_max_shard_size,
     .replaces = "shard_counts"},
    {.name = "shard_counts",
     .flag = "",
     .value = "N,N,...",
     .help = "entries per shard file, in root order",
     .parse = parse_shard_counts,
     .replaces = ""},
};

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
