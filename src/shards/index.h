// The shard index (model.safetensors.index.json / pytorch_model.bin.index.json):
// parsed and checked for shape, nothing else. Cross-checks against the shards are the
// reader's (reader.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tensorseal::detail::shards {

struct ShardIndex {
  // weight_map in file order: tensor name -> shard file name (keys unique).
  std::vector<std::pair<std::string, std::string>> weight_map;
  std::optional<std::uint64_t> total_size;  // metadata.total_size when present
  // The other metadata entries, in file order, values as compact JSON.
  std::vector<std::pair<std::string, std::string>> other_metadata;
  std::string formatting;  // "indent 2, trailing newline", "compact", ...
};

// Parses `bytes` (the index file `name`). Throws Error shards/index-json (with the
// byte offset of a syntax error or the duplicate key's name) or shards/index-shape.
ShardIndex parse_index(std::span<const std::byte> bytes, const std::string& name);

}  // namespace tensorseal::detail::shards
