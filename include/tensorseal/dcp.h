// tensorseal/dcp.h — torch.distributed.checkpoint directories as data (the typed
// .metadata), and the core of the storage plugin tensorseal.dcp (Python): each rank
// writes its items into a staging directory beside the target, the coordinator writes
// .metadata and the integrity manifest and swaps the whole directory into place;
// readers get one item at a time, checked against the manifest.
//
// Layout the plugin writes (docs/formats/dcp.md, "tensorseal.dcp"):
//   <target>/.metadata          canonical pickle (protocol 2) of DCP's Metadata: entries
//                               and planner_data by fqn, chunks by offsets, storage_data
//                               by (rank, file, offset); no path, save_id derived from
//                               the manifest (no uuid)
//   <target>/.tensorseal.json   the manifest: every item's file, offset, length,
//                               checksum of its bytes and content digest
//   <target>/__<rank>_<n>.distcp  per rank: its BYTE_IO items by fqn, then its tensor
//                               chunks by (fqn, offsets), each a canonical torch.save zip
// The bytes depend only on the items each rank is given (the planner's plan), never on
// time, paths, thread counts or which rank finishes first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/dtype.h"
#include "tensorseal/export.h"
#include "tensorseal/hash.h"
#include "tensorseal/limits.h"
#include "tensorseal/value.h"
#include "tensorseal/write.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

struct DcpChunk {
  std::vector<std::int64_t> offsets, sizes;  // in elements, one per dimension
};

struct DcpStorage {
  std::string relative_path;
  std::uint64_t offset = 0, length = 0;  // of the bytes in the file (compressed, if so)
  // _StorageInfo.transform_descriptors as recorded (DCP extensions: "stream.zstd/1"
  // for FileSystemWriter(_extensions=[ZStandard()])); empty for plain items.
  std::vector<std::string> transforms;
};

// One state_dict_metadata entry.
struct DcpEntry {
  std::string fqn;
  bool is_tensor = false;  // else a BYTE_IO item (BytesStorageMetadata)
  DType dtype = DType::kFloat32;
  bool requires_grad = false, pin_memory = false;  // TensorProperties, as recorded
  std::int64_t memory_format = 0;                  // _MEM_FORMAT_ENCODING value
  std::vector<std::int64_t> size;
  std::vector<DcpChunk> chunks;
  // storage_data of each chunk (tensors, same order as chunks) or of the item (bytes).
  std::vector<DcpStorage> storage;
  std::vector<Value> path;  // planner_data's path (str / int parts); empty: none given
};

// A storage_data key and its value, in pickled order.
struct DcpStored {
  std::string fqn;
  std::optional<std::vector<std::int64_t>> offset;  // MetadataIndex.offset
  std::optional<std::int64_t> index;                // MetadataIndex.index (a hint)
  DcpStorage storage;
};

struct DcpMetadata {
  std::vector<DcpEntry> entries;         // state_dict_metadata's order
  std::vector<DcpStored> storage_order;  // storage_data in pickled order
  std::optional<std::string> save_id, checkpoint_id, version;
  std::vector<GlobalRef> globals;
};

// What the plugin records for one item (the manifest's row).
struct DcpRecord {
  std::string fqn;
  std::optional<std::vector<std::int64_t>> offsets;  // tensor chunks; none for BYTE_IO
  std::vector<std::int64_t> sizes;                   // the chunk's shape (tensors)
  DType dtype = DType::kFloat32;                     // (tensors)
  DcpStorage storage;
  std::string checksum;  // "xxh3:<hex>" of the item's bytes in the file
  std::string digest;    // content digest (content_hash, XXH3) of what the item holds
  // The whole tensor's leaf chunks that lie inside this chunk's contiguous runs, with
  // their raw XXH3-128 digests, made while writing (for the manifest's content_hash;
  // not in the manifest). Empty when the global size was not given.
  std::vector<std::pair<std::uint64_t, std::string>> leaf_chunks;
};

// One item a rank writes: a tensor chunk (value is a tensor, offsets set) or a BYTE_IO
// item (value holds the torch.save bytes the planner made, as bytes; re-emitted
// canonically).
struct DcpWriteItem {
  std::string fqn;
  std::optional<std::vector<std::int64_t>> offsets;
  Value value;
  std::vector<std::int64_t> global_size;  // tensor chunks: the whole tensor's shape (optional)
};

// The staging directory of `target`: "<parent>/.<name>.tseal-staging".
[[nodiscard]] std::filesystem::path dcp_staging_dir(const std::filesystem::path& target);

// Coordinator, before any rank writes: refuses a target that is not a checkpoint
// directory tensorseal may replace (or, without `overwrite`, any existing checkpoint),
// removes a stale staging directory and creates a fresh one. Throws dcp/write-target.
void dcp_prepare(const std::filesystem::path& target, bool overwrite);

// Every rank: writes its items (canonical order, see above) into the staging directory
// of `target` as "__<rank>_0.distcp" (one_file) or one file per item
// "__<rank>_<k>.distcp", fsynced when options.fsync. Returns one record per item.
[[nodiscard]] std::vector<DcpRecord> dcp_write_items(const std::filesystem::path& target, std::uint32_t rank,
                                                     std::vector<DcpWriteItem> items, bool one_file,
                                                     const WriteOptions& options);

// Coordinator, after every rank's write: `planned` is the planner's metadata (entries
// with their chunks and paths; storage ignored), `records` every rank's records. Checks
// they match one to one, writes .metadata and the manifest into the staging directory
// and swaps it into place (renameat2 RENAME_EXCHANGE), then removes the old tree. The
// manifest records the checkpoint's content hash (XXH3, `tseal hash --fast`), made
// from the records' leaf_chunks; only chunks no record covers (pieces of chunks that
// straddle items) are read back from the staged files.
// `content_hash` false: the manifest records none (nothing is read back).
void dcp_commit(const std::filesystem::path& target, const DcpMetadata& planned, std::vector<DcpRecord> records,
                bool fsync, bool content_hash = true);

// A DCP directory opened for item-by-item reading (the plugin's StorageReader):
// .metadata parsed by the restricted VM, the manifest (when present) checked against it,
// data files mapped on first use.
class DcpReader {
 public:
  // `check_manifest` false: items are not checked against the manifest (a reader that
  // gathers bytes another one checks).
  DcpReader(const std::filesystem::path& dir, const ReadOptions& options, bool check_manifest = true);
  ~DcpReader();
  DcpReader(DcpReader&&) noexcept;
  DcpReader& operator=(DcpReader&&) noexcept;

  [[nodiscard]] const DcpMetadata& metadata() const;
  // True when the directory carries a tensorseal manifest (checksums are checked).
  [[nodiscard]] bool has_manifest() const;
  // The content hash the manifest records ("" for none).
  [[nodiscard]] const std::string& recorded_hash() const;
  // The stored chunk of tensor `fqn` at `offsets` (zero-copy view of the data file),
  // its bytes checked against the manifest's checksum and its content against the
  // digest. Throws Error dcp/checksum, dcp/digest, dcp/storage-missing, ...
  [[nodiscard]] std::shared_ptr<const Tensor> chunk(const std::string& fqn, const std::vector<std::int64_t>& offsets);
  // The bytes of BYTE_IO item `fqn` (a torch.save file), checksum-checked; with
  // `weights_only` every global it references must be in the known-safe set
  // (UnsafePickleError otherwise) before the bytes are handed out.
  [[nodiscard]] std::string bytes_item(const std::string& fqn, bool weights_only);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- Collective verification of a DCP directory (tensorseal.dcp.verify) ----
//
// Rank `rank` of `world` checks its share of the items (contiguous by bytes in
// storage_data order: manifest checksum and digest, or zip CRC) and hashes the leaf
// chunks inside them, plus its share of the chunks that straddle items (round robin),
// read from any file. Its result goes to every rank; dcp_verify_finish then gives the
// content hash on every rank, and checks the manifest's recorded hash when there is one
// (dcp/content-hash). Every rank reads about 1/world of the bytes.
[[nodiscard]] std::string dcp_verify_part(const std::filesystem::path& dir, std::uint32_t rank, std::uint32_t world,
                                          HashAlgo algo, const ReadOptions& options, unsigned threads);
[[nodiscard]] std::string dcp_verify_finish(const std::filesystem::path& dir, const std::vector<std::string>& parts,
                                            HashAlgo algo, const ReadOptions& options);

// ---- The content hash of live sharded state (tensorseal.dcp.content_hash) ----
//
// The ranks of a job hash the state they hold together, without gathering tensors;
// the digest equals content_hash of what dcp.save of that state writes (definition and
// protocol: src/dcp/live.cc, docs/content-hash.md "Sharded state"). The caller moves
// bytes between ranks: summary() of every rank to every rank, then each Round's
// send/recv (an all-to-all), then partial() of every rank to every rank.

// A block of a tensor this rank holds: its place in the global tensor and its data
// (a tensor of shape `sizes` and the tensor's dtype).
struct LiveBox {
  std::vector<std::int64_t> offsets, sizes;
  std::shared_ptr<const Tensor> data;
};

// One leaf of the state as DCP flattens it (fqn = the path joined by ".").
struct LiveItem {
  std::string fqn;
  std::vector<Value> path;  // str / int parts, as DCP's flatten_state_dict gives
  bool is_tensor = false;
  DType dtype = DType::kFloat32;  // tensors: the global dtype and shape
  std::vector<std::int64_t> shape;
  std::vector<LiveBox> local;  // tensors: the blocks this rank holds (may be none)
  Value value;                 // other leaves: the value (every holder's must agree)
};

class LiveHash {
 public:
  struct Round {
    std::vector<std::byte> send;                         // to ranks 0..N-1, concatenated
    std::vector<std::int64_t> send_counts, recv_counts;  // bytes to / from each rank
  };
  struct Stats {
    std::uint64_t hashed_bytes = 0, sent_bytes = 0, received_bytes = 0, rounds = 0;
  };

  // This rank's part of the plan, for every rank: fqns, paths, shapes and blocks, and
  // the encoding of every non-tensor leaf. Throws for local data that does not fit.
  [[nodiscard]] static std::string summary(const std::vector<LiveItem>& items, HashAlgo algo, unsigned threads);
  // `summaries[r]`: rank r's summary. Throws the same Error on every rank for states
  // the ranks disagree about (dcp/live-state, dcp/replica-mismatch, dcp/chunk-*).
  LiveHash(std::vector<LiveItem> items, const std::vector<std::string>& summaries, std::uint32_t rank, HashAlgo algo,
           unsigned threads, std::uint64_t round_bytes = std::uint64_t{16} << 20);
  ~LiveHash();
  LiveHash(LiveHash&&) noexcept;
  LiveHash& operator=(LiveHash&&) noexcept;

  // The next exchange of chunk pieces (the same number of rounds on every rank), or
  // nullopt when none is left; then receive() with what the other ranks sent, in rank order.
  [[nodiscard]] std::optional<Round> next_round();
  void receive(std::span<const std::byte> bytes);
  // After the last round: hashes the chunks this rank holds whole; its result for all.
  [[nodiscard]] std::string partial();
  // The content hash from every rank's partial(). Throws dcp/replica-mismatch naming
  // the tensor and the ranks when replicas differ (the same on every rank).
  [[nodiscard]] std::string finish(const std::vector<std::string>& partials) const;
  [[nodiscard]] Stats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorseal
TENSORSEAL_API_END
