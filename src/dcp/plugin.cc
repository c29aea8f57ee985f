// The storage plugin of torch.distributed.checkpoint (dcp/plugin.h).
#include "dcp/plugin.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "dcp/constants.h"
#include "dcp/format.h"
#include "dcp/items.h"
#include "dcp/manifest.h"
#include "dcp/metadata.h"
#include "dcp/tree.h"
#include "hash/content_hash.h"
#include "hash/digest.h"
#include "io/atomic_dir.h"
#include "io/sink.h"
#include "torch/format.h"
#include "util/hex.h"
#include "util/text.h"

namespace tensorseal::detail::dcp {
namespace fs = std::filesystem;
using io::AtomicFileSink;

namespace {

fs::path normal_target(const fs::path& target) {
  return target.filename().empty() ? target.parent_path() : target;  // "out/" names "out"
}

std::string value_digest(const Value& v) {
  HashOptions o;
  o.algo = HashAlgo::kXxh3;
  o.threads = 1;
  return content_hash(v, o);
}

// (rank, n) of "__<rank>_<n>.distcp"; other names sort after, by name.
std::pair<std::uint64_t, std::uint64_t> file_rank(const std::string& name) {
  std::uint64_t r = UINT64_MAX, n = UINT64_MAX;
  if (name.starts_with("__")) {
    char* end = nullptr;
    r = std::strtoull(name.c_str() + 2, &end, 10);
    if (end && *end == '_') n = std::strtoull(end + 1, nullptr, 10);
  }
  return {r, n};
}

// XXH3 digests of the whole tensor's leaf chunks that lie inside this chunk's runs
// (dcp/tree.h chunks_inside): the writer's part of the manifest's content hash. A chunk
// that is one run starting on a leaf chunk boundary (row shards at aligned rows: the
// usual FSDP case) has the whole tensor's leaf chunks as its own, which the item's
// digest hashed already (`own`); others are hashed here.
std::vector<std::pair<std::uint64_t, std::string>> leaf_chunks_of(const Tensor& t,
                                                                  const std::vector<std::int64_t>& offsets,
                                                                  const std::vector<std::int64_t>& global,
                                                                  const std::vector<std::string>& own) {
  std::vector<std::pair<std::uint64_t, std::string>> out;
  const std::uint64_t item = itemsize(t.dtype);
  if (global.size() != t.shape.size() || item == 0) return out;
  std::uint64_t n = item;
  for (auto d : global) n *= static_cast<std::uint64_t>(d);
  const auto runs = block_runs(global, offsets, t.shape, item, n);
  constexpr std::uint64_t M = hash::kLeafChunk;
  const bool aligned = runs.count == 1 && runs.start(0) % M == 0;
  std::vector<std::byte> scratch;
  std::span<const std::byte> bytes;
  chunks_inside(runs, n, [&](std::uint64_t c, std::uint64_t at, std::uint64_t len) {
    if (aligned && at % M == 0 && at / M < own.size()) {
      out.emplace_back(c, own[at / M]);
      return;
    }
    if (bytes.empty()) bytes = t.contiguous_bytes(scratch);
    out.emplace_back(c, hash::Digest::oneshot(HashAlgo::kXxh3, bytes.subspan(at, len)));
  });
  return out;
}

// The content hash (XXH3) of the staged checkpoint: leaf chunks the writers hashed
// are taken from `records`; the others (pieces of chunks straddling items) are read
// from the staged files, without the manifest's item checks (not written yet).
std::string staged_content_hash(const fs::path& staging, const Metadata& md, const std::vector<DcpRecord>& records,
                                io::ReadNested read_nested) {
  ReadOptions ro;
  ro.verify_checksums = false;
  io::Input in = io::input_of(MappedFile::open(staging / kMetadataFile), ro);
  in.read_nested = read_nested;
  const Checkpoint c = read_dcp(in);
  std::map<std::string, std::vector<const DcpRecord*>> by_fqn;
  for (const auto& r : records) by_fqn[r.fqn].push_back(&r);
  std::unordered_map<const Tensor*, std::vector<std::string>> known;
  for (const auto& e : md.entries) {
    if (!e.is_tensor) continue;
    const Value* v = find_element(c.root, e);
    if (v == nullptr || !v->is(Value::Kind::kTensor))
      throw Error(tensorseal::rules::kInternal, "staged tensor '" + e.fqn + "' not found", staging.string());
    const Tensor* t = v->as_tensor().get();
    auto& digests = known[t];
    digests.resize((t->nbytes() + hash::kLeafChunk - 1) / hash::kLeafChunk);
    for (const DcpRecord* r : by_fqn[e.fqn])
      for (const auto& [chunk, d] : r->leaf_chunks)
        if (chunk < digests.size()) digests[chunk] = d;
  }
  HashOptions o;
  o.algo = HashAlgo::kXxh3;
  return hash::content_hash_known(c.root, known, o);
}

// The value of a BYTE_IO item's bytes (a torch.save file), read as any format.
Value read_item_bytes(std::string_view b, const std::string& name, io::ReadNested read_nested) {
  const ReadOptions options;
  io::Input in;
  in.name = name;
  in.whole = Storage::owned(std::vector<std::byte>(reinterpret_cast<const std::byte*>(b.data()),
                                                   reinterpret_cast<const std::byte*>(b.data()) + b.size()));
  in.options = &options;
  in.read_nested = read_nested;
  return read_nested(in).root;
}

std::string item_text(const std::string& fqn, const std::optional<std::vector<std::int64_t>>& offsets) {
  return offsets ? "chunk at " + shape_text(*offsets) + " of tensor '" + fqn + "'" : "item '" + fqn + "'";
}

}  // namespace

fs::path staging_dir(const fs::path& target) {
  const fs::path t = normal_target(target);
  fs::path parent = t.parent_path();
  if (parent.empty()) parent = ".";
  return parent / ("." + t.filename().string() + std::string(kStagingSuffix));
}

void prepare(const fs::path& target_in, bool overwrite) {
  const fs::path target = normal_target(target_in);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(target, ec))) {
    check_dcp_target(target);
    if (!overwrite && fs::exists(target / kMetadataFile, ec))
      throw Error(rules::kWriteTarget, "a checkpoint exists here and overwrite is False", target.string());
  }
  const fs::path staging = staging_dir(target);
  fs::remove_all(staging, ec);
  if (ec)
    throw Error(tensorseal::rules::kIoWrite, "cannot remove the stale staging directory: " + ec.message(),
                staging.string());
  if (!target.parent_path().empty()) fs::create_directories(target.parent_path(), ec);
  if (!fs::create_directory(staging, ec) || ec)
    throw Error(tensorseal::rules::kIoOpen, "cannot create the staging directory: " + ec.message(), staging.string());
}

std::vector<DcpRecord> write_items(const fs::path& target, std::uint32_t rank, std::vector<DcpWriteItem> items,
                                   bool one_file, const WriteOptions& options, io::ReadNested read_nested) {
  const fs::path staging = staging_dir(target);
  std::error_code ec;
  if (!fs::is_directory(staging, ec))
    throw Error(rules::kWriteTarget,
                "the staging directory is missing (the coordinator prepares it in prepare_global_plan)",
                staging.string());
  // BYTE_IO items by fqn, then tensor chunks by (fqn, offsets): the plan's order and the
  // state dict's never reach the bytes.
  std::sort(items.begin(), items.end(), [](const DcpWriteItem& a, const DcpWriteItem& b) {
    if (a.offsets.has_value() != b.offsets.has_value()) return !a.offsets.has_value();
    if (a.fqn != b.fqn) return a.fqn < b.fqn;
    return a.offsets < b.offsets;
  });
  for (std::size_t i = 1; i < items.size(); ++i)
    if (items[i].fqn == items[i - 1].fqn && items[i].offsets == items[i - 1].offsets)
      throw Error(rules::kWritePlan,
                  fmt::format("rank {} was given {} twice", rank, item_text(items[i].fqn, items[i].offsets)),
                  target.string());

  std::vector<DcpRecord> out;
  std::unique_ptr<AtomicFileSink> sink;
  std::string name;
  for (std::size_t i = 0; i < items.size(); ++i) {
    DcpWriteItem& it = items[i];
    if (!sink || !one_file) {
      if (sink) sink->commit();
      name = "__" + std::to_string(rank) + "_" + std::to_string(one_file ? 0 : i) + std::string(kDataSuffix);
      sink = std::make_unique<AtomicFileSink>(staging / name, options.fsync);
    }
    DcpRecord r;
    r.fqn = it.fqn;
    r.offsets = it.offsets;
    if (it.offsets) {
      if (!it.value.is(Value::Kind::kTensor))
        throw Error(rules::kWritePlan, item_text(it.fqn, it.offsets) + " is not a tensor", target.string());
      const Tensor& t = *it.value.as_tensor();
      if (t.shape.size() != it.offsets->size())
        throw Error(rules::kWritePlan,
                    fmt::format("{} has {} dimensions", item_text(it.fqn, it.offsets), t.shape.size()),
                    target.string());
      r.sizes = t.shape;
      r.dtype = t.dtype;
      // DCP hands chunks back as plain tensors.
      if (t.requires_grad || t.is_parameter) {
        auto plain = std::make_shared<Tensor>(t);
        plain->requires_grad = false;
        plain->is_parameter = false;
        it.value = Value(std::shared_ptr<const Tensor>(std::move(plain)));
      }
    } else if (it.value.is(Value::Kind::kBytes)) {
      // The planner's torch.save bytes carry a random serialization_id: their value is
      // written instead, canonically.
      const auto& b = it.value.as_bytes();
      it.value = read_item_bytes(b, "BYTE_IO item '" + it.fqn + "'", read_nested);
    }
    const std::uint64_t offset = sink->position();
    hash::Digest checksum(HashAlgo::kXxh3);
    io::ItemSink item(*sink, [&](std::span<const std::byte> b) { checksum.update(b); });
    torch::write_torch_zip(it.value, options, item);
    r.storage = {name, offset, item.position()};
    r.checksum = "xxh3:" + util::to_hex(checksum.finish());
    if (it.offsets && !it.global_size.empty()) {
      HashOptions o;
      o.algo = HashAlgo::kXxh3;
      o.threads = 1;
      std::unordered_map<const Tensor*, std::vector<std::string>> chunks;
      r.digest = hash::content_hash_chunks(it.value, o, chunks);
      const Tensor& t = *it.value.as_tensor();
      r.leaf_chunks = leaf_chunks_of(t, *it.offsets, it.global_size, chunks[&t]);
    } else {
      r.digest = value_digest(it.value);
    }
    out.push_back(std::move(r));
  }
  if (sink) sink->commit();
  if (options.fsync) io::fsync_directory(staging);
  return out;
}

namespace {

void commit_staged(const fs::path& target, const DcpMetadata& planned, std::vector<DcpRecord> records, bool fsync,
                   bool content_hash, io::ReadNested read_nested);

}  // namespace

void commit(const fs::path& target_in, const DcpMetadata& planned, std::vector<DcpRecord> records, bool fsync,
            bool content_hash, io::ReadNested read_nested) {
  const fs::path target = normal_target(target_in);
  try {
    commit_staged(target, planned, std::move(records), fsync, content_hash, read_nested);
  } catch (...) {
    // Refused before the swap: the target is untouched; the staged files go.
    std::error_code ec;
    fs::remove_all(staging_dir(target), ec);
    throw;
  }
}

namespace {

void commit_staged(const fs::path& target, const DcpMetadata& planned, std::vector<DcpRecord> records, bool fsync,
                   bool content_hash, io::ReadNested read_nested) {
  const fs::path staging = staging_dir(target);
  std::error_code ec;
  if (!fs::is_directory(staging, ec))
    throw Error(rules::kWriteTarget, "the staging directory is missing", staging.string());
  const std::string tname = target.string();

  std::map<std::string, const DcpRecord*> by_key;
  for (const auto& r : records)
    if (!by_key.emplace(item_key(r.fqn, r.offsets), &r).second)
      throw Error(rules::kWritePlan, item_text(r.fqn, r.offsets) + " was written twice", tname);

  Metadata md;
  md.entries = planned.entries;
  std::sort(md.entries.begin(), md.entries.end(), [](const DcpEntry& a, const DcpEntry& b) { return a.fqn < b.fqn; });
  for (std::size_t i = 1; i < md.entries.size(); ++i)
    if (md.entries[i].fqn == md.entries[i - 1].fqn)
      throw Error(rules::kWritePlan, "the plan lists '" + md.entries[i].fqn + "' twice", tname);
  std::size_t used = 0;
  auto find = [&](const std::string& fqn, const std::optional<std::vector<std::int64_t>>& offsets) {
    const auto it = by_key.find(item_key(fqn, offsets));
    if (it == by_key.end())
      throw Error(rules::kWritePlan, item_text(fqn, offsets) + " was planned but no rank wrote it", tname);
    ++used;
    return it->second;
  };
  // index hints of each chunk's storage_data key: the chunk's place in its tensor's list
  std::map<std::string, std::int64_t> index;
  for (DcpEntry& e : md.entries) {
    e.storage.clear();
    if (!e.is_tensor) {
      find(e.fqn, std::nullopt);
      continue;
    }
    std::sort(e.chunks.begin(), e.chunks.end(),
              [](const DcpChunk& a, const DcpChunk& b) { return a.offsets < b.offsets; });
    for (std::size_t c = 0; c < e.chunks.size(); ++c) {
      const DcpRecord* r = find(e.fqn, e.chunks[c].offsets);
      if (r->sizes != e.chunks[c].sizes || r->dtype != e.dtype)
        throw Error(rules::kWritePlan,
                    item_text(e.fqn, r->offsets) + " was written as " + std::string(name(r->dtype)) +
                        shape_text(r->sizes) + ", planned as " + std::string(name(e.dtype)) +
                        shape_text(e.chunks[c].sizes),
                    tname);
      index[item_key(e.fqn, e.chunks[c].offsets)] = static_cast<std::int64_t>(c);
    }
  }
  if (used != records.size())
    for (const auto& r : records)
      if (std::none_of(md.entries.begin(), md.entries.end(), [&](const DcpEntry& e) { return e.fqn == r.fqn; }))
        throw Error(rules::kWritePlan, item_text(r.fqn, r.offsets) + " was written but not planned", tname);

  std::sort(records.begin(), records.end(), [](const DcpRecord& a, const DcpRecord& b) {
    const auto fa = file_rank(a.storage.relative_path), fb = file_rank(b.storage.relative_path);
    if (fa != fb) return fa < fb;
    if (a.storage.relative_path != b.storage.relative_path) return a.storage.relative_path < b.storage.relative_path;
    return a.storage.offset < b.storage.offset;
  });
  for (const auto& r : records) {
    DcpStored st{r.fqn, r.offsets, std::nullopt, r.storage};
    if (r.offsets) st.index = index[item_key(r.fqn, r.offsets)];
    md.storage_order.push_back(std::move(st));
  }
  // save_id: from the manifest's items (the content hash is made after .metadata).
  const std::string items = encode_manifest(records);
  md.save_id = save_id_of("sha256:" + sha256_hex({reinterpret_cast<const std::byte*>(items.data()), items.size()}));
  md.version = "1.0.0";
  io::write_file_atomically(staging / kMetadataFile, encode_metadata(md), fsync);
  const std::string hash = content_hash ? staged_content_hash(staging, md, records, read_nested) : std::string();
  io::write_file_atomically(staging / kManifestFile, encode_manifest(records, hash), fsync);
  io::swap_into_place(staging, target, fsync, check_dcp_target);
}

}  // namespace

// ---- reading ---------------------------------------------------------------------

PluginReader::PluginReader(const fs::path& dir, const ReadOptions& options, bool check_manifest,
                           io::ReadNested read_nested)
    : options_(options) {
  const fs::path meta = find_dcp_metadata(dir);
  if (meta.empty())
    throw Error(rules::kStorageMissing, "no .metadata: not a torch.distributed.checkpoint directory", dir.string());
  meta_ = io::input_of(MappedFile::open(meta), options_);
  meta_.read_nested = read_nested;
  md_ = parse_metadata(meta_.bytes(), meta_.name, options_.limits);
  for (std::size_t i = 0; i < md_.entries.size(); ++i) entry_.emplace(md_.entries[i].fqn, i);
  items_ = std::make_unique<Items>(meta_, md_, sink_);
  if (!check_manifest) items_->skip_manifest_checks();
}

PluginReader::~PluginReader() = default;

bool PluginReader::has_manifest() const { return items_->has_manifest(); }
const std::string& PluginReader::recorded_hash() const { return items_->recorded_hash(); }

std::shared_ptr<const Tensor> PluginReader::chunk(const std::string& fqn, const std::vector<std::int64_t>& offsets) {
  const auto it = entry_.find(fqn);
  const DcpEntry* e = it == entry_.end() ? nullptr : &md_.entries[it->second];
  const std::string what = item_text(fqn, offsets);
  if (e == nullptr || !e->is_tensor)
    throw Error(rules::kStorageMissing, "the checkpoint has no tensor '" + fqn + "'", meta_.name);
  for (std::size_t c = 0; c < e->chunks.size(); ++c) {
    if (e->chunks[c].offsets != offsets) continue;
    auto t = items_->chunk(e->storage[c], fqn, what);
    if (t->dtype != e->dtype || t->shape != e->chunks[c].sizes)
      throw Error(rules::kChunkMismatch,
                  what + " is " + std::string(name(t->dtype)) + shape_text(t->shape) + ", .metadata says " +
                      std::string(name(e->dtype)) + shape_text(e->chunks[c].sizes),
                  items_->file(e->storage[c].relative_path).name, e->storage[c].offset);
    return t;
  }
  throw Error(rules::kStorageMissing, "the checkpoint has no " + what, meta_.name);
}

PluginReader::BytesItem PluginReader::bytes_item(const std::string& fqn) {
  const auto it = entry_.find(fqn);
  if (it == entry_.end() || md_.entries[it->second].is_tensor)
    throw Error(rules::kStorageMissing, "the checkpoint has no bytes item '" + fqn + "'", meta_.name);
  const DcpEntry& e = md_.entries[it->second];
  const std::size_t before = sink_.globals.size();
  auto [bytes, value] = items_->bytes_item(e.storage[0], "bytes item '" + fqn + "'");
  BytesItem out;
  out.bytes.assign(reinterpret_cast<const char*>(bytes->bytes().data()), bytes->size());
  out.read.file = fmt::format("{}@{}", items_->file(e.storage[0].relative_path).name, e.storage[0].offset);
  out.read.format = Format::kTorchZip;
  out.read.globals.assign(sink_.globals.begin() + static_cast<std::ptrdiff_t>(before), sink_.globals.end());
  return out;
}

}  // namespace tensorseal::detail::dcp
