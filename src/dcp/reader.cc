// DCP directory reader: .metadata (metadata.cc), then every item it references, each
// read by its own format's reader through Input::read_nested; tensors assembled from
// chunks that must tile them exactly; the nesting restored as DCP's
// unflatten_state_dict does. The result is the value
// torch.distributed.checkpoint.format_utils.dcp_to_torch_save saves.
//
// Order of the value tree: state_dict_metadata's order. A single chunk covering its
// tensor stays a zero-copy view of the data file; tensors of several chunks are
// assembled into scratch memory (io/scratch.h: an unlinked temp file's mapping from
// 64 KiB up, so anonymous memory stays small; at most Limits::max_alloc bytes each).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/topic.h"
#include "dcp/constants.h"
#include "dcp/format.h"
#include "dcp/items.h"
#include "dcp/metadata.h"
#include "dcp/ranks.h"
#include "dcp/tree.h"
#include "io/scratch.h"
#include "util/text.h"

namespace tensorseal::detail::dcp {
namespace fs = std::filesystem;
using core::fact;
using dcp::Chunk;
using dcp::Entry;
using dcp::Items;
using dcp::StorageInfo;
using dcp::where;
using util::join;

namespace {

std::uint64_t volume(const std::vector<std::int64_t>& sizes) {
  std::uint64_t v = 1;
  for (auto s : sizes) {
    if (s == 0) return 0;
    if (v > UINT64_MAX / static_cast<std::uint64_t>(s)) return UINT64_MAX;
    v *= static_cast<std::uint64_t>(s);
  }
  return v;
}

// Copies chunk `t` (shape c.sizes) into `dst`, the row-major bytes of a tensor of
// shape `size`, at c.offsets.
void place(const Tensor& t, const Chunk& c, const std::vector<std::int64_t>& size, std::uint64_t item, std::byte* dst) {
  std::vector<std::byte> scratch;
  const auto src = t.contiguous_bytes(scratch);
  const std::size_t n = size.size();
  if (n == 0) {
    std::memcpy(dst, src.data(), item);
    return;
  }
  const std::uint64_t row = static_cast<std::uint64_t>(c.sizes[n - 1]) * item;
  std::vector<std::int64_t> idx(n - 1, 0);  // index within the chunk, all but the last dimension
  const std::uint64_t rows = volume(std::vector<std::int64_t>(c.sizes.begin(), c.sizes.end() - 1));
  for (std::uint64_t r = 0; r < rows; ++r) {
    std::uint64_t at = 0;  // element offset in the tensor
    for (std::size_t k = 0; k < n; ++k) at = at * size[k] + (k + 1 < n ? idx[k] + c.offsets[k] : c.offsets[k]);
    std::memcpy(dst + at * item, src.data() + r * row, row);
    for (std::size_t k = n - 1; k-- > 0;) {
      if (++idx[k] < c.sizes[k]) break;
      idx[k] = 0;
    }
  }
}

// Pieces of a tensor cut finer than this (mean bytes) are joined at once instead.
constexpr std::uint64_t kMinMeanPiece = 4096;
constexpr std::size_t kMaxPieces = std::size_t{1} << 20;

// The tensor's row-major bytes as runs of its chunks' bytes, in order: with k the last
// dimension some chunk does not span whole, every chunk row over dimensions < k is one
// run (dimension k and all after it). Null when a chunk's bytes are not a window of a
// mapped data file (decompressed: kept only while assembling) or not contiguous, or when
// the runs would be more than kMaxPieces or smaller than kMinMeanPiece on average.
std::optional<std::vector<std::span<const std::byte>>> runs_of(const Entry& e,
                                                               const std::vector<std::shared_ptr<const Tensor>>& parts,
                                                               std::uint64_t item) {
  const std::size_t n = e.size.size();
  std::size_t k = 0;
  for (const auto& c : e.chunks)
    if (volume(c.sizes) != 0)
      for (std::size_t d = 0; d < n; ++d)
        if (c.sizes[d] != e.size[d]) k = std::max(k, d);
  std::uint64_t inner = 1;  // elements of dimensions after k
  for (std::size_t d = k + 1; d < n; ++d) inner *= static_cast<std::uint64_t>(e.size[d]);
  std::uint64_t count = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (volume(e.chunks[i].sizes) == 0) continue;
    if (!parts[i]->storage->is_mapped() || !parts[i]->is_contiguous()) return std::nullopt;
    count += volume(std::vector<std::int64_t>(e.chunks[i].sizes.begin(), e.chunks[i].sizes.begin() + k));
  }
  if (count == 0 || count > kMaxPieces || volume(e.size) * item / count < kMinMeanPiece) return std::nullopt;
  std::vector<std::pair<std::uint64_t, std::span<const std::byte>>> runs;  // (first element, bytes)
  runs.reserve(count);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Chunk& c = e.chunks[i];
    if (volume(c.sizes) == 0) continue;
    std::vector<std::byte> unused;
    const auto src = parts[i]->contiguous_bytes(unused);
    const std::uint64_t run = static_cast<std::uint64_t>(c.sizes[k]) * inner * item;
    std::vector<std::int64_t> idx(k, 0);
    for (std::uint64_t r = 0; r * run < src.size(); ++r) {
      std::uint64_t at = 0;  // the run's first element in the tensor
      for (std::size_t d = 0; d < n; ++d)
        at = at * static_cast<std::uint64_t>(e.size[d]) + static_cast<std::uint64_t>(d < k    ? idx[d] + c.offsets[d]
                                                                                     : d == k ? c.offsets[d]
                                                                                              : 0);
      runs.emplace_back(at, src.subspan(r * run, run));
      for (std::size_t d = k; d-- > 0;) {
        if (++idx[d] < c.sizes[d]) break;
        idx[d] = 0;
      }
    }
  }
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::span<const std::byte>> out;
  out.reserve(runs.size());
  std::uint64_t next = 0;
  for (const auto& [at, bytes] : runs) {
    if (at != next) return std::nullopt;  // not a tiling (check_tiling refused those already)
    next += bytes.size() / item;
    out.push_back(bytes);
  }
  return out;
}

Value assemble(const Entry& e, Items& items, const io::Input& meta) {
  check_tiling(e, meta.name);
  std::vector<std::shared_ptr<const Tensor>> parts;
  for (std::size_t i = 0; i < e.chunks.size(); ++i) {
    const Chunk& c = e.chunks[i];
    const std::string what = "chunk at " + shape_text(c.offsets) + " of tensor '" + e.fqn + "'";
    auto t = items.chunk(e.storage[i], e.fqn, what);
    if (t->dtype != e.dtype || t->shape != c.sizes)
      throw Error(rules::kChunkMismatch,
                  what + " is " + std::string(name(t->dtype)) + shape_text(t->shape) + ", .metadata says " +
                      std::string(name(e.dtype)) + shape_text(c.sizes),
                  items.file(e.storage[i].relative_path).name, e.storage[i].offset);
    parts.push_back(std::move(t));
  }
  std::size_t whole = parts.size();
  for (std::size_t i = 0; i < parts.size(); ++i)
    if (volume(e.chunks[i].sizes) == volume(e.size) && parts[i]->shape == e.size) whole = i;
  if (whole < parts.size() || e.chunks.empty()) {
    auto t = std::make_shared<Tensor>();
    if (whole < parts.size())
      *t = *parts[whole];
    else
      *t = *make_contiguous(e.dtype, e.size, Storage::owned({}));  // an empty tensor
    t->requires_grad = false;
    t->is_parameter = false;
    t->numpy = NumpyType::kNone;
    return Value(std::move(t));
  }
  const std::uint64_t item = itemsize(e.dtype);
  if (item == 0)
    throw Error(
        rules::kChunkMismatch,
        fmt::format("tensor '{}' of sub-byte dtype {} is split into chunks (not supported)", e.fqn, name(e.dtype)),
        meta.name);
  const std::uint64_t bytes = volume(e.size) * item;
  if (volume(e.size) > meta.options->limits.max_alloc / item)
    throw Error(rules::kMaxAlloc, fmt::format("tensor '{}' of {} elements exceeds max_alloc", e.fqn, volume(e.size)),
                meta.name);
  auto join = [parts, chunks = e.chunks, size = e.size, bytes, item,
               dtype = e.dtype]() -> std::shared_ptr<const Storage> {
    io::Scratch buf = io::scratch(bytes, dtype);
    for (std::size_t i = 0; i < parts.size(); ++i)
      if (volume(chunks[i].sizes) != 0) place(*parts[i], chunks[i], size, item, buf.data);
    return std::move(buf.storage);
  };
  if (auto runs = runs_of(e, parts, item)) {
    // Streamed from the chunks' mapped bytes (hash, writers); joined only on demand.
    std::vector<std::shared_ptr<const void>> owners(parts.begin(), parts.end());
    return Value(make_contiguous(e.dtype, e.size, Storage::pieced(std::move(*runs), std::move(owners), join, e.dtype)));
  }
  return Value(make_contiguous(e.dtype, e.size, join()));
}

}  // namespace

// Chunks must lie inside the tensor, not overlap, and cover it.
void check_tiling(const Entry& e, const std::string& file) {
  const std::size_t n = e.size.size();
  for (const auto& c : e.chunks)
    for (std::size_t k = 0; k < n; ++k)
      if (c.offsets[k] < 0 || c.sizes[k] < 0 || c.offsets[k] > e.size[k] || c.sizes[k] > e.size[k] - c.offsets[k])
        throw Error(rules::kChunkOutside,
                    fmt::format("chunk at {} of size {} lies outside tensor '{}' of size {}", shape_text(c.offsets),
                                shape_text(c.sizes), e.fqn, shape_text(e.size)),
                    file);
  for (std::size_t i = 0; i < e.chunks.size(); ++i) {
    const Chunk& a = e.chunks[i];
    if (volume(a.sizes) == 0) continue;
    for (std::size_t j = i + 1; j < e.chunks.size(); ++j) {
      const Chunk& b = e.chunks[j];
      if (volume(b.sizes) == 0) continue;
      bool disjoint = false;
      for (std::size_t k = 0; k < n && !disjoint; ++k)
        disjoint = a.offsets[k] + a.sizes[k] <= b.offsets[k] || b.offsets[k] + b.sizes[k] <= a.offsets[k];
      if (!disjoint)
        throw Error(rules::kChunkOverlap,
                    fmt::format("chunks at {} and {} of tensor '{}' overlap", shape_text(a.offsets),
                                shape_text(b.offsets), e.fqn),
                    file);
    }
  }
  std::uint64_t covered = 0;
  for (const auto& c : e.chunks) covered += volume(c.sizes);  // disjoint and inside: no overflow
  if (covered != volume(e.size))
    throw Error(rules::kChunkGap,
                fmt::format("the chunks of tensor '{}' cover {} of its {} elements", e.fqn, covered, volume(e.size)),
                file);
}

// DCP's set_element: str parts are dict keys, int parts list indices (lists grow
// with None). Paths that DCP itself could not have produced together are refused.
void set_element(Value& root, const Entry& e, Value v, const std::string& file, std::uint64_t max_entries) {
  auto conflict = [&](const std::string& why) {
    throw Error(rules::kPathConflict, fmt::format("planner_data path of '{}' {}", e.fqn, why), file);
  };
  Value* cur = &root;
  for (std::size_t i = 0; i < e.path.size(); ++i) {
    const Value& key = e.path[i];
    const bool last = i + 1 == e.path.size();
    Value fresh = last ? v : (e.path[i + 1].is(Value::Kind::kStr) ? Value::dict() : Value::list());
    if (cur->is(Value::Kind::kDict)) {
      Dict& dict = cur->as_dict();
      const Value* have = dict.find(key);
      if (have == nullptr) {
        dict.set(key, fresh);
        have = dict.find(key);
      } else if (last) {
        conflict("meets a value another path already set");
      }
      cur = const_cast<Value*>(have);
    } else if (cur->is(Value::Kind::kList)) {
      if (!key.is(Value::Kind::kInt) || key.as_int() < 0) conflict("indexes a list with " + repr(key, 40));
      if (static_cast<std::uint64_t>(key.as_int()) >= max_entries)
        conflict(fmt::format("indexes a list at {} (beyond max_entries)", key.as_int()));
      auto& list = cur->items();
      const auto k = static_cast<std::size_t>(key.as_int());
      if (list.size() <= k) list.resize(k + 1);
      if (list[k].is(Value::Kind::kNone))
        list[k] = fresh;
      else if (last)
        conflict("meets a value another path already set");
      cur = &list[k];
    } else {
      conflict(fmt::format("passes through a {}", kind_name(cur->kind())));
    }
  }
}

bool detect_dcp(std::span<const std::byte> head) noexcept { return dcp::looks_like_metadata(head); }

fs::path find_dcp_metadata(const fs::path& dir) noexcept {
  std::error_code ec;
  const fs::path p = dir / dcp::kMetadataFile;
  if (fs::is_regular_file(p, ec)) return p;
  // The per-rank layout: its lowest rank's file (read_dcp then reads every rank's, and
  // says which is missing).
  fs::path best;
  std::uint32_t lowest = UINT32_MAX;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto r = dcp::metadata_rank(it->path().filename().string());
    if (r && *r < lowest && fs::is_regular_file(it->path(), ec)) {
      lowest = *r;
      best = it->path();
    }
  }
  return best;
}

Checkpoint read_dcp(const io::Input& in) {
  if (in.directory.empty())
    throw Error(rules::kNotOnDisk, "a DCP .metadata read from memory has no data files beside it", in.name);
  if (in.read_nested == nullptr)
    throw Error(tensorseal::rules::kInternal, "DCP .metadata read without a ReadNested", in.name);
  const bool per_rank = dcp::metadata_rank(fs::path(in.name).filename().string()).has_value();
  std::uint32_t ranks = 0;
  dcp::Metadata md = per_rank ? dcp::read_rank_metadata(in.directory, in.name, in.options->limits, &ranks)
                              : dcp::parse_metadata(in.bytes(), in.name, in.options->limits);

  Checkpoint c;
  c.format = Format::kDcp;
  c.globals = md.globals;
  c.root = Value::dict();
  Items items(in, md, c);
  c.recorded_hash = items.recorded_hash();
  std::vector<std::string> chunked;
  for (const Entry& e : md.entries) {
    Value v = e.is_tensor ? assemble(e, items, in) : items.torch_item(e.storage[0], "bytes item '" + e.fqn + "'");
    if (e.is_tensor && e.chunks.size() > 1) chunked.push_back(fmt::format("{}={}", e.fqn, e.chunks.size()));
    if (e.path.empty()) {
      if (c.root.as_dict().find(e.fqn) != nullptr)
        throw Error(rules::kPathConflict, "item '" + e.fqn + "' is set twice", in.name);
      c.root.as_dict().set(Value::str(e.fqn), std::move(v));
    } else {
      set_element(c.root, e, std::move(v), in.name, in.options->limits.max_entries);
    }
  }

  // Facts for `explain`: what shapes the directory's bytes without being content.
  std::map<std::string, std::uint64_t> per_file;
  std::vector<std::string> order;
  for (const auto& st : md.storage_order) {
    ++per_file[st.storage.relative_path];
    order.push_back(where(st.storage));
  }
  std::vector<std::string> files;
  for (const auto& [f, n] : per_file) files.push_back(fmt::format("{} ({} items)", f, n));
  c.layout.emplace_back("world_size", std::to_string(std::max<std::size_t>(1, per_file.size())));
  std::vector<Fact> facts{
      fact(topics::kSaveId, ".metadata", md.save_id.value_or("none")),
      fact(topics::kCheckpointPath, ".metadata", md.checkpoint_id.value_or("none")),
      fact(topics::kFiles, "storage_data", fmt::format("{} files: {}", per_file.size(), join(files, ", "))),
      fact(topics::kItemOrder, "storage_data", join(order, ",")),
      fact(topics::kChunks, "state_dict_metadata", chunked.empty() ? "one chunk per tensor" : join(chunked, ",")),
      fact(topics::kSerialization, "data files",
           items.formats().empty() ? "none" : join({items.formats().begin(), items.formats().end()}, "+")),
      fact(topics::kVersion, ".metadata", md.version.value_or("none")),
      fact(topics::kMetadataFiles, "directory",
           per_rank ? fmt::format("{} per-rank files __<rank>.metadata", ranks) : "one .metadata"),
  };
  c.facts.insert(c.facts.begin(), facts.begin(), facts.end());
  return c;
}

}  // namespace tensorseal::detail::dcp
