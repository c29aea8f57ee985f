// torch.distributed.checkpoint (DCP) directories: constants and rules (spec:
// docs/formats/dcp.md; the producer: torch/distributed/checkpoint/filesystem.py,
// metadata.py, default_planner.py, _nested_dict.py, _traverse.py).
//
//   directory = ".metadata" data-file...
//             | rank-metadata... data-file...      dcp.save(..., use_collectives=False)
//   rank-metadata = "__<rank>.metadata", one per rank 0..n-1: a .metadata of only the
//               items that rank wrote (its own chunks and replicas, its own save_id)
//   .metadata = pickle of metadata.Metadata(
//                 state_dict_metadata: {fqn: TensorStorageMetadata | BytesStorageMetadata},
//                 planner_data: {fqn: (str | int, ...)} | None,     the fqn's nested path
//                 storage_data: {MetadataIndex(fqn, offset, index): _StorageInfo(
//                                 relative_path, offset, length, transform_descriptors)},
//                 storage_meta: StorageMeta(checkpoint_id, save_id, load_id, modules) | None,
//                 version: str | None)
//   TensorStorageMetadata = (properties: TensorProperties, size: torch.Size,
//                            chunks: [ChunkStorageMetadata(offsets: Size, sizes: Size)])
//   data-file = "__<rank>_<n>.distcp": items at the offsets storage_data gives, each
//               a torch.save zip (a tensor chunk, or a BYTE_IO item: any torch.save'd
//               object), or, in the safetensors serialization format, the BYTE_IO items
//               followed by one safetensors file holding the file's chunks by fqn.
//
// One checkpoint: every fqn's value; each tensor assembled from its chunks, which tile
// its global shape exactly; the nesting restored from planner_data like DCP's
// unflatten_state_dict (str component: dict key, int component: list index).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "core/topic.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::dcp {

inline constexpr std::string_view kMetadataFile = ".metadata";
inline constexpr std::string_view kDataSuffix = ".distcp";
// "__<rank>" + kMetadataFile: the per-rank metadata of the use_collectives=False layout.
inline constexpr std::string_view kRankPrefix = "__";
inline constexpr std::string_view kMetadataModule = "torch.distributed.checkpoint.metadata";
inline constexpr std::string_view kFilesystemModule = "torch.distributed.checkpoint.filesystem";
// The first global of every .metadata: what detection looks for in a file's first bytes.
inline constexpr std::string_view kMetadataClass = "Metadata";
inline constexpr std::size_t kDetectWindow = 256;
// tensorseal.dcp's integrity manifest beside .metadata (grammar: dcp/manifest.h) and
// the staging directory a plugin save is written into before it is swapped in.
inline constexpr std::string_view kManifestFile = ".tensorseal.json";
inline constexpr std::string_view kManifestFormat = "tensorseal.dcp";
inline constexpr std::int64_t kManifestVersion = 1;
inline constexpr std::string_view kStagingSuffix = ".tseal-staging";
// The one DCP extension (torch/distributed/checkpoint/_extension.py): ZStandard, whose
// descriptor is "stream.zstd/<version>" with major version 1; the item's bytes in the
// file are one zstd stream (one or more frames) of what would otherwise be there.
inline constexpr std::string_view kZstdTransform = "stream.zstd";

// The only globals a .metadata may reference (anything else is refused: DCP's own
// reader would import and run it with pickle.load).
// torch < 2.2 pickled TensorProperties and its memory-format enum from
// torch.distributed._shard.sharded_tensor.metadata (kLegacyPropertiesModule) and
// the layout as the global torch.strided.
inline constexpr std::string_view kLegacyPropertiesModule = "torch.distributed._shard.sharded_tensor.metadata";
inline constexpr std::array<std::string_view, 16> kMetadataGlobals = {
    "torch.distributed.checkpoint.metadata.Metadata",
    "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata",
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
    "torch.distributed.checkpoint.metadata.TensorProperties",
    "torch.distributed.checkpoint.metadata.MetadataIndex",
    "torch.distributed.checkpoint.metadata.StorageMeta",
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
    "torch.distributed.checkpoint.filesystem._StorageInfo",
    "torch.Size",
    "torch.serialization._get_layout",
    "pathlib.PosixPath",
    "pathlib.WindowsPath",
    "torch.distributed._shard.sharded_tensor.metadata.TensorProperties",
    "torch.distributed._shard.sharded_tensor.metadata.MEM_FORMAT_ENCODING",
    "torch.strided",
};

namespace rules {
using K = ErrorKind;
inline constexpr Rule kNotOnDisk{"dcp/not-on-disk", K::kInvalidArgument};  // .metadata read from memory
inline constexpr Rule kMetadataGlobal{"dcp/metadata-global", K::kUnsafe};  // outside kMetadataGlobals
inline constexpr Rule kMetadataShape{"dcp/metadata-shape", K::kCorrupt};   // a field missing or mistyped
inline constexpr Rule kTransform{"dcp/transform", K::kUnsupported};        // an unknown transform_descriptor
inline constexpr Rule kTransformData{"dcp/transform-data", K::kCorrupt};   // a compressed item that does not decompress
inline constexpr Rule kStoragePath{"dcp/storage-path", K::kUnsafe};        // leaves the directory
inline constexpr Rule kStorageMissing{"dcp/storage-missing", K::kCorrupt};  // no entry / no file
inline constexpr Rule kStorageBounds{"dcp/storage-bounds", K::kCorrupt};    // past the file's end
inline constexpr Rule kItemFormat{"dcp/item-format", K::kCorrupt};          // not a torch.save / safetensors item
inline constexpr Rule kChunkMismatch{"dcp/chunk-mismatch", K::kCorrupt};    // dtype / shape / length disagree
inline constexpr Rule kChunkOutside{"dcp/chunk-outside", K::kCorrupt};      // beyond the global shape
inline constexpr Rule kChunkOverlap{"dcp/chunk-overlap", K::kCorrupt};
inline constexpr Rule kChunkGap{"dcp/chunk-gap", K::kCorrupt};          // elements no chunk covers
inline constexpr Rule kPathConflict{"dcp/path-conflict", K::kCorrupt};  // planner_data paths collide
inline constexpr Rule kRankMetadata{"dcp/rank-metadata", K::kCorrupt};  // a rank's file missing / ranks disagree
inline constexpr Rule kTooMany{"dcp/too-many", K::kLimit};              // entries / chunks / files
inline constexpr Rule kMaxAlloc{"dcp/max-alloc", K::kLimit};            // an assembled tensor > max_alloc
inline constexpr Rule kManifest{"dcp/manifest", K::kCorrupt};           // malformed / disagrees with .metadata
inline constexpr Rule kChecksum{"dcp/checksum", K::kCorrupt};           // an item's bytes changed
inline constexpr Rule kDigest{"dcp/digest", K::kCorrupt};               // an item's content changed
// The live hash of sharded state (dcp/live.cc).
inline constexpr Rule kLiveState{"dcp/live-state", K::kInvalidArgument};      // ranks disagree / blocks do not fit
inline constexpr Rule kReplicaMismatch{"dcp/replica-mismatch", K::kCorrupt};  // replicas on ranks differ
inline constexpr Rule kContentHash{"dcp/content-hash", K::kCorrupt};          // the manifest's content_hash differs
// Writer-side rules.
inline constexpr Rule kWriteUnrepresentable{"dcp/write-unrepresentable", K::kInvalidArgument};  // DCP would change it
inline constexpr Rule kWriteTarget{"dcp/write-target", K::kInvalidArgument};  // refusing to replace the target
inline constexpr Rule kWritePlan{"dcp/write-plan", K::kInvalidArgument};      // written items != the planned ones
}  // namespace rules

// Facts about a DCP directory; each item's own facts follow with "<file>@<offset>: "
// before their `where`.
namespace topics {
using detail::core::Topic;
inline constexpr Topic kSaveId{"dcp.save_id", "each dcp.save pickles a random save_id (uuid4) into .metadata"};
inline constexpr Topic kCheckpointPath{
    "dcp.checkpoint_path",
    "each dcp.save pickles the checkpoint directory's path (storage_meta.checkpoint_id) into .metadata"};
inline constexpr Topic kFiles{
    "dcp.files",
    "the items are assigned to different data files (world size, ranks, single_file_per_rank, thread count)"};
inline constexpr Topic kItemOrder{
    "dcp.item_order", "the items are laid out in a different order (storage_data follows ranks and thread completion)"};
inline constexpr Topic kChunks{"dcp.chunks",
                               "the tensors are split into different chunks (another world size or sharding)"};
inline constexpr Topic kSerialization{
    "dcp.serialization_format",
    "the items are serialized differently (torch_save zips or one safetensors file per data file, "
    "compressed through DCP extensions or not)"};
inline constexpr Topic kVersion{"dcp.version", "the checkpoint was written by another DCP version"};
inline constexpr Topic kMetadataFiles{
    "dcp.metadata_files",
    "the metadata is one .metadata, or one __<rank>.metadata per rank (dcp.save with use_collectives=False)"};
inline constexpr Topic kAll[] = {kSaveId, kCheckpointPath, kFiles,   kItemOrder,
                                 kChunks, kSerialization,  kVersion, kMetadataFiles};
}  // namespace topics

}  // namespace tensorseal::detail::dcp
