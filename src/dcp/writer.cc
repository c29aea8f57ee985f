// Canonical DCP directory writer: a directory stock torch.distributed.checkpoint.load
// (FileSystemReader, torch_save format) reads, whose bytes depend only on the value
// tree and the world size.
//
//   flatten   root (a dict with str keys) walked as DCP's traverse_state_dict: dict
//             entries recurse, a list recurses (int path parts) when it holds a
//             tensor, dict or such a list, every other value is a leaf; fqn =
//             ".".join(path), planner_data[fqn] = path; leaves are ordered by fqn
//             (bytewise), so the source's dict order never reaches the bytes
//   ranks     world size N (WriteParams::world_size, default 1): a tensor of ndim >= 1 is
//             split on dim 0 like DTensor Shard(0) (chunk c = ceil(size0 / N) rows;
//             rank r gets rows [r*c, min((r+1)*c, size0)), nothing when empty); a 0-d
//             tensor and every non-tensor leaf (BYTE_IO) belong to rank 0
//   files     "__<r>_0.distcp" for r = 0..N-1 (empty when a rank holds nothing): its
//             BYTE_IO items in fqn order, then its chunks in fqn order, each a
//             canonical torch.save zip (write_torch_zip) of the chunk or the object
//   .metadata the canonical pickle (protocol 2, pickle/writer.h) of Metadata with
//             state_dict_metadata and planner_data in fqn order, storage_data in
//             (file, offset) order, storage_meta = StorageMeta(save_id = the content
//             hash's first 128 bits as a UUID, no checkpoint_id), version "1.0.0"
//
// Refused (dcp/write-*): a root that is not a dict, a non-str dict key (DCP would
// give it back as str), an empty dict or list that DCP drops, two paths with one fqn,
// a tensor that is a Parameter or requires grad (DCP gives plain tensors back).
#include "pickle/writer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "core/fail.h"
#include "dcp/constants.h"
#include "dcp/format.h"
#include "dcp/metadata.h"
#include "dcp/ranks.h"
#include "io/atomic_dir.h"
#include "io/sink.h"
#include "tensorseal/hash.h"
#include "torch/format.h"

namespace tensorseal::detail::dcp {
namespace fs = std::filesystem;

namespace {

struct Leaf {
  std::string fqn;
  std::vector<Value> path;
  Value value;
};

std::string fqn_text(const std::vector<Value>& path) {
  std::string s;
  for (const auto& p : path)
    s += (s.empty() ? "" : ".") + (p.is(Value::Kind::kStr) ? std::string(p.as_str()) : std::to_string(p.as_int()));
  return s;
}

bool is_terminal(const Value& v) {
  if (v.is(Value::Kind::kDict)) return false;
  if (!v.is(Value::Kind::kList)) return true;
  for (const auto& e : v.items()) {
    if ((e.is(Value::Kind::kDict) || e.is(Value::Kind::kList)) && !is_terminal(e)) return false;
    if (e.is(Value::Kind::kTensor)) return false;
  }
  return true;
}

void flatten(const Value& v, std::vector<Value>& path, std::vector<Leaf>& out, std::set<std::string>& seen) {
  if (v.is(Value::Kind::kDict)) {
    if (v.as_dict().items.empty() && !path.empty())
      fail(rules::kWriteUnrepresentable, "'" + fqn_text(path) + "' is an empty dict, which DCP does not store");
    for (const auto& [k, x] : v.as_dict().items) {
      if (!k.is(Value::Kind::kStr))
        fail(rules::kWriteUnrepresentable,
             "key " + repr(k, 40) + " under '" + fqn_text(path) + "' is not a str (DCP would give it back as str)");
      path.push_back(k);
      flatten(x, path, out, seen);
      path.pop_back();
    }
    return;
  }
  if (!is_terminal(v)) {
    for (std::size_t i = 0; i < v.items().size(); ++i) {
      path.push_back(Value(static_cast<std::int64_t>(i)));
      flatten(v.items()[i], path, out, seen);
      path.pop_back();
    }
    return;
  }
  const std::string fqn = fqn_text(path);
  if (!seen.insert(fqn).second) fail(rules::kWriteUnrepresentable, "two paths flatten to '" + fqn + "'");
  if (v.is(Value::Kind::kTensor)) {
    const auto& t = *v.as_tensor();
    if (t.is_parameter || t.requires_grad)
      fail(rules::kWriteUnrepresentable,
           "tensor '" + fqn + "' is a Parameter or requires grad; DCP stores plain tensors");
    if (t.numpy != NumpyType::kNone)
      fail(rules::kWriteUnrepresentable, "'" + fqn + "' is a numpy object; DCP stores plain tensors");
    if (t.quantization)
      fail(rules::kWriteUnrepresentable, "tensor '" + fqn + "' is quantized; DCP stores plain tensors");
    if (t.attributes)
      fail(rules::kWriteUnrepresentable, "tensor '" + fqn + "' has Python attributes; DCP stores plain tensors");
  }
  out.push_back({fqn, path, v});
}

// The tensor's rows [r0, r1) as a contiguous tensor of its own storage: a window of
// the tensor's storage when it is contiguous (no copy), else a copy of those rows.
std::shared_ptr<const Tensor> rows(const Tensor& t, std::int64_t r0, std::int64_t r1) {
  std::uint64_t row = itemsize(t.dtype);
  for (std::size_t k = 1; k < t.shape.size(); ++k) row *= static_cast<std::uint64_t>(t.shape[k]);
  std::vector<std::int64_t> shape = t.shape;
  if (!shape.empty()) shape[0] = r1 - r0;
  const std::uint64_t length = static_cast<std::uint64_t>(r1 - r0) * row;
  if (t.is_contiguous() && t.storage && row != 0) {
    const std::uint64_t at =
        static_cast<std::uint64_t>(t.storage_offset) * itemsize(t.dtype) + static_cast<std::uint64_t>(r0) * row;
    auto window = Storage::slice(t.storage, at, length);
    window->dtype = t.dtype;
    return make_contiguous(t.dtype, std::move(shape), std::move(window));
  }
  std::vector<std::byte> scratch;
  const auto bytes = t.contiguous_bytes(scratch);
  const auto* from = bytes.data() + static_cast<std::uint64_t>(r0) * row;
  std::vector<std::byte> own(from, from + length);
  return make_contiguous(t.dtype, std::move(shape), Storage::owned(std::move(own), t.dtype));
}

}  // namespace

void check_dcp_target(const fs::path& target) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(target, ec)))
    throw Error(rules::kWriteTarget, "exists and is not a directory; refusing to replace it", target.string());
  for (const auto& e : fs::directory_iterator(target, ec)) {
    const std::string n = e.path().filename().string();
    if (n == dcp::kMetadataFile || n == dcp::kManifestFile || dcp::metadata_rank(n) ||
        (n.starts_with(dcp::kRankPrefix) && n.ends_with(dcp::kDataSuffix)))
      continue;
    throw Error(rules::kWriteTarget,
                "the directory holds '" + n + "', which a DCP write does not produce; refusing to replace it",
                target.string());
  }
}

std::string parse_world_size(std::string_view text) {
  std::uint64_t n = 0;
  bool ok = !text.empty() && text.size() <= 8;
  for (const char c : text) {
    ok = ok && c >= '0' && c <= '9';
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  if (!ok || n < 1 || n > (1u << 20))
    throw Error(tensorseal::rules::kInvalidArgument,
                "world_size must be a number of ranks from 1 to 1048576, not '" + std::string(text) + "'");
  return std::to_string(n);
}

WriteParams write_params(const WriteOptions& options) {
  WriteParams p;
  if (const auto n = option_value(options.format_options, "world_size"); !n.empty())
    p.world_size = static_cast<std::uint32_t>(std::stoul(parse_world_size(n)));
  return p;
}

void write_dcp(const Value& root, const WriteOptions& options, const fs::path& dir) {
  if (!root.is(Value::Kind::kDict))
    fail(rules::kWriteUnrepresentable,
         "a DCP checkpoint holds a state dict; got " + std::string(kind_name(root.kind())));
  const std::uint32_t world = write_params(options).world_size;
  std::vector<Leaf> leaves;
  std::vector<Value> path;
  std::set<std::string> seen;
  flatten(root, path, leaves, seen);
  // The source's order is not content (DCP itself reorders): fqn order, bytewise.
  std::sort(leaves.begin(), leaves.end(), [](const Leaf& a, const Leaf& b) { return a.fqn < b.fqn; });

  struct Item {
    std::size_t leaf;
    std::int64_t r0 = 0, r1 = 0;  // rows of a chunk
    bool bytes = false;
  };
  std::vector<std::vector<Item>> per_rank(world);
  for (std::size_t i = 0; i < leaves.size(); ++i)
    if (!leaves[i].value.is(Value::Kind::kTensor)) per_rank[0].push_back({i, 0, 0, true});
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].value.is(Value::Kind::kTensor)) continue;
    const Tensor& t = *leaves[i].value.as_tensor();
    if (t.shape.empty()) {
      per_rank[0].push_back({i, 0, 0, false});
      continue;
    }
    const std::int64_t n = t.shape[0];
    const std::int64_t c = (n + world - 1) / world;
    for (std::uint32_t r = 0; r < world; ++r) {
      const std::int64_t r0 = std::min<std::int64_t>(n, r * c), r1 = std::min<std::int64_t>(n, (r + 1) * c);
      if (r1 > r0 || (n == 0 && r == 0)) per_rank[r].push_back({i, r0, r1, false});
    }
  }

  dcp::Metadata md;
  md.save_id = dcp::save_id_of(content_hash(root));
  md.version = "1.0.0";
  for (const Leaf& leaf : leaves) {
    dcp::Entry e;
    e.fqn = leaf.fqn;
    e.path = leaf.path;
    if (leaf.value.is(Value::Kind::kTensor)) {
      e.is_tensor = true;
      e.dtype = leaf.value.as_tensor()->dtype;
      e.size = leaf.value.as_tensor()->shape;
    }
    md.entries.push_back(std::move(e));
  }
  io::AtomicDirectory out(dir, options.fsync, check_dcp_target);
  std::uint64_t tensor_bytes = 0;  // progress counts tensor bytes (bytes items are small)
  for (const Leaf& leaf : leaves)
    if (leaf.value.is(Value::Kind::kTensor)) tensor_bytes += leaf.value.as_tensor()->nbytes();
  util::ProgressMeter meter(&options.progress, tensor_bytes);
  for (std::uint32_t r = 0; r < world; ++r) {
    const std::string name = "__" + std::to_string(r) + "_0" + std::string(dcp::kDataSuffix);
    io::AtomicFileSink file(out.file(name), options.fsync);
    io::ProgressSink sink(file, meter);
    for (const Item& it : per_rank[r]) {
      const Leaf& leaf = leaves[it.leaf];
      dcp::Entry& e = md.entries[it.leaf];
      const std::uint64_t offset = sink.position();
      io::ItemSink item(sink);
      dcp::Stored st{leaf.fqn, std::nullopt, std::nullopt, {}};
      if (it.bytes) {
        torch::write_torch_zip(leaf.value, options, item);
      } else {
        const Tensor& t = *leaf.value.as_tensor();
        auto part = t.shape.empty() ? leaf.value.as_tensor() : rows(t, it.r0, it.r1);
        torch::write_torch_zip(Value(part), options, item);
        std::vector<std::int64_t> offsets(t.shape.size(), 0);
        if (!offsets.empty()) offsets[0] = it.r0;
        st.offset = offsets;
        st.index = static_cast<std::int64_t>(e.chunks.size());
        e.chunks.push_back({offsets, part->shape});
      }
      st.storage = {name, offset, item.position()};
      e.storage.push_back(st.storage);
      md.storage_order.push_back(std::move(st));
    }
    file.commit();
  }
  io::write_file_atomically(out.file(std::string(dcp::kMetadataFile)), dcp::encode_metadata(md), options.fsync);
  if (options.before_commit) options.before_commit();
  out.commit();
  meter.finish();
}

}  // namespace tensorseal::detail::dcp
