// Hugging Face shard directories: constants and rules (spec: docs/formats/hf-shards.md;
// the producers: huggingface_hub serialization/_base.py and _torch.py,
// transformers modeling_utils.save_pretrained).
//
//   directory = index shard...
//   index     = "<name>.index.json": a JSON object (UTF-8) with
//                 "weight_map": { tensor name: shard file name, ... }   (required)
//                 "metadata":   { "total_size": N, ... }                (optional)
//   shard     = a safetensors file or a torch.save zip (`.bin`) whose root is a flat
//               dict of str -> tensor; the file name is relative to the index's folder
//
// One checkpoint: the tensors of every shard, each exactly once, exactly as the
// weight_map says; total_size (when given) = the bytes of the tensors' storages.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/topic.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::shards {

// Index file names, in the order a directory is searched (transformers prefers
// safetensors shards over .bin shards when both are present).
inline constexpr std::string_view kSafetensorsIndex = "model.safetensors.index.json";
inline constexpr std::string_view kTorchIndex = "pytorch_model.bin.index.json";
inline constexpr std::string_view kIndexSuffix = ".index.json";
// The weight file of an unsharded Hugging Face model directory (transformers'
// SAFE_WEIGHTS_NAME and WEIGHTS_NAME), in the order its loader prefers them.
inline constexpr std::string_view kSafetensorsSingle = "model.safetensors";
inline constexpr std::string_view kTorchSingle = "pytorch_model.bin";
inline constexpr std::string_view kWeightMapKey = "weight_map";
inline constexpr std::string_view kMetadataKey = "metadata";
inline constexpr std::string_view kTotalSizeKey = "total_size";
// An index larger than this is refused (a weight_map line is ~80 bytes: this allows
// over a million tensors).
inline constexpr std::uint64_t kMaxIndexSize = 100'000'000;

// Writer: huggingface_hub's file name pattern "model{suffix}.safetensors" with suffix
// "-{i:05d}-of-{n:05d}", and its default max_shard_size "5GB".
inline constexpr std::string_view kShardPrefix = "model-";
inline constexpr std::string_view kShardSuffix = ".safetensors";
inline constexpr int kShardNumberDigits = 5;
inline constexpr std::uint64_t kDefaultMaxShardSize = 5'000'000'000;
// Size units as huggingface_hub's parse_size_to_int: decimal, two letters.
inline constexpr std::uint64_t kKB = 1'000, kMB = 1'000'000, kGB = 1'000'000'000, kTB = 1'000'000'000'000;

namespace rules {
using K = ErrorKind;
inline constexpr Rule kNoIndex{"shards/no-index", K::kCorrupt};  // directory without a shard index
inline constexpr Rule kAmbiguousIndex{"shards/ambiguous-index", K::kCorrupt};
inline constexpr Rule kIndexTooLarge{"shards/index-too-large", K::kLimit};
inline constexpr Rule kIndexJson{"shards/index-json", K::kCorrupt};              // not JSON, or a duplicate key
inline constexpr Rule kIndexShape{"shards/index-shape", K::kCorrupt};            // weight_map / metadata types
inline constexpr Rule kNotOnDisk{"shards/not-on-disk", K::kInvalidArgument};     // an index read from memory
inline constexpr Rule kShardPath{"shards/shard-path", K::kUnsafe};               // escapes the directory
inline constexpr Rule kShardMissing{"shards/shard-missing", K::kCorrupt};        // listed, absent
inline constexpr Rule kShardFormat{"shards/shard-format", K::kCorrupt};          // not safetensors / torch zip
inline constexpr Rule kShardNotFlat{"shards/shard-not-flat", K::kCorrupt};       // root not str -> tensor
inline constexpr Rule kTensorMissing{"shards/tensor-missing", K::kCorrupt};      // in weight_map, not in its shard
inline constexpr Rule kTensorExtra{"shards/tensor-extra", K::kCorrupt};          // in a shard, not mapped there
inline constexpr Rule kTensorDuplicate{"shards/tensor-duplicate", K::kCorrupt};  // in two shards
inline constexpr Rule kTotalSize{"shards/total-size", K::kCorrupt};
inline constexpr Rule kTooManyShards{"shards/too-many-shards", K::kLimit};
// Writer-side rules.
inline constexpr Rule kNotFlat{"shards/not-flat", K::kInvalidArgument};
inline constexpr Rule kBadSize{"shards/bad-size", K::kInvalidArgument};
inline constexpr Rule kBadSplit{"shards/bad-split", K::kInvalidArgument};
inline constexpr Rule kTarget{"shards/target", K::kInvalidArgument};  // refusing to replace the target
}  // namespace rules

// Facts about a shard directory; each shard's own facts follow with "<file>: " before
// their `where`.
namespace topics {
using detail::core::Topic;
inline constexpr Topic kIndexName{
    "shards.index_name", "the shard index has a different file name (.bin shards use pytorch_model.bin.index.json)"};
inline constexpr Topic kFiles{
    "shards.files",
    "the checkpoint is split into different shard files (another max_shard_size, or another library's default: "
    "huggingface_hub 5GB, transformers 50GB)"};
inline constexpr Topic kBoundaries{
    "shards.boundaries", "the shard boundaries differ: the tensors are distributed differently among the shard files"};
inline constexpr Topic kKeyOrder{
    "shards.index_key_order",
    "the weight_map lists the tensors in a different order (transformers sorts the keys, huggingface_hub keeps "
    "state-dict order)"};
inline constexpr Topic kIndexMetadata{"shards.index_metadata",
                                      "the index carries different metadata keys (transformers adds total_parameters)"};
inline constexpr Topic kIndexFormatting{
    "shards.index_formatting", "the index JSON is formatted differently (indentation, spacing, trailing newline)"};
inline constexpr Topic kAll[] = {kIndexName, kFiles, kBoundaries, kKeyOrder, kIndexMetadata, kIndexFormatting};
}  // namespace topics

}  // namespace tensorseal::detail::shards
