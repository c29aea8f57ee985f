// Shard directory reader: the index (index.cc), then every shard it names, each read
// by its own format's reader through Input::read_nested and checked against the index.
//
// The value tree is one flat dict, the same a single safetensors / .pt file of the same
// state dict gives, in this order: shard files sorted by name (bytewise; for
// "model-0000N-of-0000M" that is N), within a shard the order its reader gives
// (safetensors: data order; torch: the saved dict's order). Tensors stay zero-copy
// windows of each shard's own mapping; no shard's data is read into memory here.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "core/fail.h"
#include "core/format_names.h"
#include "core/topic.h"
#include "io/file_inside.h"
#include "safetensors/format.h"
#include "shards/constants.h"
#include "shards/format.h"
#include "shards/index.h"
#include "torch/format.h"
#include "util/text.h"

namespace tensorseal::detail::shards {
namespace fs = std::filesystem;
using core::fact;
using util::join;

bool detect_hf_shards(std::span<const std::byte> b) noexcept {
  std::size_t i = 0;
  while (i < b.size() &&
         (b[i] == std::byte{' '} || b[i] == std::byte{'\n'} || b[i] == std::byte{'\r'} || b[i] == std::byte{'\t'}))
    ++i;
  if (i == b.size() || b[i] != std::byte{'{'}) return false;
  const std::string_view text(reinterpret_cast<const char*>(b.data()), std::min<std::size_t>(b.size(), 1 << 20));
  return text.find("\"weight_map\"") != std::string_view::npos;
}

fs::path find_shard_index(const fs::path& dir) {
  for (auto name : {shards::kSafetensorsIndex, shards::kTorchIndex}) {
    std::error_code ec;
    if (fs::is_regular_file(dir / name, ec)) return dir / name;
  }
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().ends_with(shards::kIndexSuffix) && e.is_regular_file(ec))
      found.push_back(e.path());
  if (ec) fail(tensorseal::rules::kIoOpen, "cannot list the directory: " + ec.message(), dir.string());
  std::sort(found.begin(), found.end());
  if (found.empty()) {
    // An unsharded model directory (save_pretrained below its max_shard_size): its one
    // weight file is the checkpoint, read by that file's own format.
    for (auto name : {shards::kSafetensorsSingle, shards::kTorchSingle})
      if (fs::is_regular_file(dir / name, ec)) return dir / name;
    fail(rules::kNoIndex,
         fmt::format("no shard index ({} or another *{}) and no {} or {} in this directory", shards::kSafetensorsIndex,
                     shards::kIndexSuffix, shards::kSafetensorsSingle, shards::kTorchSingle),
         dir.string());
  }
  if (found.size() > 1)
    fail(rules::kAmbiguousIndex,
         fmt::format("several shard indexes ({}, {}); name the one to read", found[0].filename().string(),
                     found[1].filename().string()),
         dir.string());
  return found[0];
}

Checkpoint read_hf_shards(const io::Input& in) {
  if (in.directory.empty()) fail(rules::kNotOnDisk, "a shard index read from memory has no shards beside it", in.name);
  if (in.size() > shards::kMaxIndexSize)
    fail(rules::kIndexTooLarge, fmt::format("index of {} bytes exceeds {}", in.size(), shards::kMaxIndexSize), in.name,
         0);
  if (in.read_nested == nullptr) fail(tensorseal::rules::kInternal, "shard index read without a ReadNested", in.name);
  const shards::ShardIndex idx = shards::parse_index(in.bytes(), in.name);

  // name -> file; the files in name order.
  std::unordered_map<std::string, std::string> file_of;
  file_of.reserve(idx.weight_map.size());
  std::set<std::string> files;
  for (const auto& [name, file] : idx.weight_map) {
    file_of.emplace(name, file);
    files.insert(file);
  }
  if (files.size() > in.options->limits.max_entries)
    fail(rules::kTooManyShards, fmt::format("{} shard files exceed max_entries", files.size()), in.name);

  Checkpoint c;
  c.format = Format::kHfShards;
  c.root = Value::dict();
  Dict& root = c.root.as_dict();
  root.items.reserve(idx.weight_map.size());
  std::unordered_map<std::string, std::string> seen;  // tensor -> shard it was found in
  std::unordered_set<const Storage*> storages;
  std::uint64_t stored_bytes = 0;
  std::set<std::pair<std::string, std::string>> metadata_seen;
  std::vector<std::string> boundaries;
  std::string counts;  // entries per file: the layout canon keeps (shard_counts)

  for (const std::string& file : files) {
    const fs::path p = io::file_inside(in.directory, file, rules::kShardPath, rules::kShardMissing, "shard", in.name);
    const std::string shard_name = p.string();
    io::Input sub = io::input_of(MappedFile::open(p), *in.options);
    sub.name = shard_name;
    sub.nesting = in.nesting;
    sub.read_nested = in.read_nested;
    sub.checks_later = in.checks_later;  // a shard's storages are the checkpoint's own
    // Checked before reading: a shard that is itself an index would recurse.
    const auto head = sub.bytes();
    if (!safetensors::detect_safetensors(head) && !torch::detect_torch_zip(head) && !torch::detect_torch_legacy(head))
      fail(rules::kShardFormat, "shard is neither a safetensors file nor a torch.save file", shard_name, 0);
    Checkpoint s = in.read_nested(sub);
    if (s.format != Format::kSafetensors && s.format != Format::kTorchZip && s.format != Format::kTorchLegacy)
      fail(rules::kShardFormat, fmt::format("shard is a {} file", core::format_name(s.format)), shard_name, 0);
    if (!s.root.is(Value::Kind::kDict))
      fail(rules::kShardNotFlat, fmt::format("shard holds a {}, not a dict of tensors", kind_name(s.root.kind())),
           shard_name);

    std::uint64_t count = 0;
    for (const auto& [k, v] : s.root.as_dict().items) {
      if (!k.is(Value::Kind::kStr) || !v.is(Value::Kind::kTensor))
        fail(rules::kShardNotFlat,
             fmt::format("shard entry {} -> {} is not a named tensor", repr(k, 60), kind_name(v.kind())), shard_name);
      const std::string name(k.as_str());
      if (auto it = seen.find(name); it != seen.end())
        fail(rules::kTensorDuplicate, fmt::format("tensor '{}' is also in shard '{}'", name, it->second), shard_name);
      const auto mapped = file_of.find(name);
      if (mapped == file_of.end())
        fail(rules::kTensorExtra, "tensor '" + name + "' is not in the index's weight_map", shard_name);
      if (mapped->second != file)
        fail(rules::kTensorExtra,
             fmt::format("tensor '{}' is here, but the index maps it to '{}'", name, mapped->second), shard_name);
      seen.emplace(name, file);
      const Storage* st = v.as_tensor()->storage.get();
      if (st != nullptr && storages.insert(st).second) stored_bytes += st->size();
      root.items.emplace_back(k, v);
      ++count;
    }
    counts += (counts.empty() ? "" : ",") + std::to_string(count);
    boundaries.push_back(fmt::format("{}: {} tensors", file, count));

    for (const auto& m : s.metadata)
      if (metadata_seen.insert(m).second) c.metadata.push_back(m);
    for (auto& f : s.facts) c.facts.push_back({std::move(f.topic), file + ": " + f.where, std::move(f.value)});
    for (auto& g : s.globals) c.globals.push_back({std::move(g.module), std::move(g.name), file + ": " + g.where});
  }

  for (const auto& [name, file] : idx.weight_map)
    if (!seen.count(name))
      fail(rules::kTensorMissing, "tensor '" + name + "' of the weight_map is not in this shard",
           (in.directory / file).string());
  if (idx.total_size && *idx.total_size != stored_bytes)
    fail(rules::kTotalSize,
         fmt::format("metadata.total_size is {} but the shards store {} bytes of tensors", *idx.total_size,
                     stored_bytes),
         in.name);

  // Facts for `explain`: what shapes the directory's bytes without being content.
  std::vector<std::string> names, key_order;
  for (const auto& f : files) names.push_back(f);
  bool sorted = true;
  for (std::size_t i = 0; i < idx.weight_map.size(); ++i) {
    key_order.push_back(idx.weight_map[i].first);
    if (i && idx.weight_map[i - 1].first > idx.weight_map[i].first) sorted = false;
  }
  std::vector<std::string> other;
  for (const auto& [k, v] : idx.other_metadata) other.push_back(k + "=" + v);
  c.facts.insert(c.facts.begin(),
                 {fact(topics::kIndexName, "index", fs::path(in.name).filename().string()),
                  fact(topics::kFiles, "index", fmt::format("{} files: {}", names.size(), join(names, ", "))),
                  fact(topics::kBoundaries, "index", join(boundaries, "; ")),
                  fact(topics::kKeyOrder, "weight_map",
                       sorted ? std::string("sorted by name") : "as listed: " + join(key_order, ",")),
                  fact(topics::kIndexMetadata, "metadata", join(other, ", ")),
                  fact(topics::kIndexFormatting, "index", idx.formatting)});
  if (!counts.empty()) c.layout.emplace_back("shard_counts", std::move(counts));
  return c;
}

}  // namespace tensorseal::detail::shards
