// Shard directory writer: canonical safetensors shards plus their index.
//
//   dir/model-{i:05d}-of-{n:05d}.safetensors   i = 1..n, each the canonical safetensors
//                                             file of its tensors (write_safetensors)
//   dir/model.safetensors.index.json          {"metadata": {"total_size": T},
//                                              "weight_map": {name: file, ...}}
//                                             keys sorted, indent 2, ASCII escapes and a
//                                             final newline: json.dumps(indent=2,
//                                             sort_keys=True) + "\n", as transformers
//
// Split (when WriteParams::shard_counts is empty): huggingface_hub's
// split_state_dict_into_shards_factory over the tensors sorted by name (bytewise, as
// safetensors orders names; the root's order is not content and no shard reader
// keeps it) with each tensor's size = its element bytes (what its shard
// stores): a tensor larger than max_shard_size becomes a shard of its own, appended
// when it is met (before the shard still being filled); otherwise a new shard starts
// when the current one would exceed the size. With shard_counts (canon of a shard
// directory), the root's order, which the shard reader gives file by file, cut into
// runs of those counts: each file keeps its tensors.
// T = the sum of all tensors' element bytes. Every byte depends only on the tensors,
// the metadata and max_shard_size (or the split kept by shard_counts).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>

#include "io/atomic_dir.h"
#include "io/sink.h"
#include "safetensors/format.h"
#include "shards/constants.h"
#include "shards/format.h"

namespace tensorseal {

std::uint64_t parse_shard_size(std::string_view text) {
  auto bad = [&](const std::string& why) -> std::uint64_t {
    throw Error(detail::shards::rules::kBadSize, "shard size '" + std::string(text) + "': " + why);
  };
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(s.begin());
  std::uint64_t unit = 1;
  if (s.size() >= 2) {
    std::string u = s.substr(s.size() - 2);
    for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::pair<std::string_view, std::uint64_t> units[] = {{"KB", detail::shards::kKB},
                                                                {"MB", detail::shards::kMB},
                                                                {"GB", detail::shards::kGB},
                                                                {"TB", detail::shards::kTB}};
    for (const auto& [name, mult] : units)
      if (u == name) unit = mult;
    if (unit != 1) {
      s.resize(s.size() - 2);
      while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    }
  }
  if (s.empty()) return bad("no number");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return bad("expected a number and a unit (KB, MB, GB, TB)");
  const double bytes = std::floor(v * static_cast<double>(unit));  // Python's int(value * multiplier)
  if (!std::isfinite(bytes) || bytes < 1 || bytes >= 1.8e19) return bad("not a positive size");
  return static_cast<std::uint64_t>(bytes);
}

namespace detail::shards {
namespace fs = std::filesystem;

std::string parse_max_shard_size(std::string_view text) { return std::to_string(parse_shard_size(text)); }

std::string parse_shard_counts(std::string_view text) {
  std::string out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view n = text.substr(start, end - start);
    if (n.empty() || n.size() > 19 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw Error(tensorseal::rules::kInvalidArgument,
                  "shard_counts '" + std::string(text) + "' is not a list of counts (1,2,2)");
    out += (out.empty() ? "" : ",") + std::to_string(std::stoull(std::string(n)));
    if (end == text.size()) return out;
    start = end + 1;
  }
}

WriteParams write_params(const WriteOptions& options) {
  WriteParams p;
  if (const auto size = option_value(options.format_options, "max_shard_size"); !size.empty())
    p.max_shard_size = std::stoull(parse_max_shard_size(size));
  if (const auto counts = option_value(options.format_options, "shard_counts"); !counts.empty()) {
    const std::string text = parse_shard_counts(counts);
    for (std::size_t start = 0; start <= text.size();) {
      const std::size_t end = std::min(text.find(',', start), text.size());
      p.shard_counts.push_back(std::stoull(text.substr(start, end - start)));
      start = end + 1;
    }
  }
  return p;
}

namespace {

struct Entry {
  Value key, value;
  std::uint64_t bytes;
};

std::vector<std::vector<std::size_t>> plan(const std::vector<Entry>& entries, const WriteParams& options) {
  std::vector<std::vector<std::size_t>> shards;
  if (!options.shard_counts.empty()) {
    std::size_t next = 0;
    for (const std::uint64_t n : options.shard_counts) {
      if (n == 0 || n > entries.size() - next)
        throw Error(
            rules::kBadSplit,
            fmt::format("shard_counts do not add up to the {} tensors (or name an empty shard)", entries.size()));
      auto& s = shards.emplace_back();
      for (std::uint64_t i = 0; i < n; ++i) s.push_back(next++);
    }
    if (next != entries.size())
      throw Error(rules::kBadSplit, fmt::format("shard_counts cover {} of {} tensors", next, entries.size()));
    return shards;
  }
  const std::uint64_t max = options.max_shard_size ? options.max_shard_size : shards::kDefaultMaxShardSize;
  std::vector<std::size_t> current;
  std::uint64_t size = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::uint64_t b = entries[i].bytes;
    if (b > max) {
      shards.push_back({i});
      continue;
    }
    if (size + b > max) {
      shards.push_back(std::move(current));
      current.clear();
      size = 0;
    }
    current.push_back(i);
    size += b;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  return shards;
}

std::string shard_file_name(std::size_t i, std::size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*s%05zu-of-%05zu%.*s", static_cast<int>(shards::kShardPrefix.size()),
                shards::kShardPrefix.data(), i, n, static_cast<int>(shards::kShardSuffix.size()),
                shards::kShardSuffix.data());
  return buf;
}

// An existing target is replaced only when it holds nothing but a previous shard
// write: the index and model-NNNNN-of-NNNNN.safetensors files.
void check_replace(const fs::path& target) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(target, ec)))
    throw Error(rules::kTarget, "exists and is not a directory; refusing to replace it", target.string());
  static const std::regex shard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  for (const auto& e : fs::directory_iterator(target, ec)) {
    const std::string n = e.path().filename().string();
    if (n == shards::kSafetensorsIndex || (std::regex_match(n, shard) && e.is_regular_file(ec))) continue;
    throw Error(rules::kTarget,
                "the directory holds '" + n + "', which a shard write does not produce; refusing to replace it",
                target.string());
  }
}

}  // namespace

void write_hf_shards(const Value& root, const WriteOptions& options, const fs::path& dir) {
  if (!root.is(Value::Kind::kDict))
    throw Error(rules::kNotFlat, "shards hold a dict of named tensors; got " + std::string(kind_name(root.kind())));
  std::vector<Entry> entries;
  entries.reserve(root.as_dict().items.size());
  std::uint64_t total = 0;
  for (const auto& [k, v] : root.as_dict().items) {
    if (!k.is(Value::Kind::kStr) || !v.is(Value::Kind::kTensor))
      throw Error(rules::kNotFlat,
                  "shards hold str -> tensor entries; got " + repr(k, 60) + " -> " + std::string(kind_name(v.kind())));
    const std::uint64_t b = v.as_tensor()->nbytes();
    entries.push_back({k, v, b});
    total += b;
  }
  // Keys are unique str, so the order is total: the bytes are a function of the content.
  const WriteParams params = write_params(options);
  if (params.shard_counts.empty())
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.key.as_str() < b.key.as_str(); });
  const auto shards = plan(entries, params);

  io::AtomicDirectory out(dir, options.fsync, check_replace);
  util::ProgressMeter meter(&options.progress, total);
  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_file_name(i + 1, shards.size());
    Value shard = Value::dict();
    for (const std::size_t e : shards[i]) {
      shard.as_dict().items.emplace_back(entries[e].key, entries[e].value);
      weight_map[std::string(entries[e].key.as_str())] = name;
    }
    io::AtomicFileSink sink(out.file(name), options.fsync);
    io::ProgressSink counted(sink, meter);
    try {
      safetensors::write_safetensors(shard, options, counted);
    } catch (const Error& e) {
      throw e.located((dir / name).string());
    }
    sink.commit();
  }
  nlohmann::json index = {{std::string(shards::kMetadataKey), {{std::string(shards::kTotalSizeKey), total}}},
                          {std::string(shards::kWeightMapKey), std::move(weight_map)}};
  io::write_file_atomically(out.file(std::string(shards::kSafetensorsIndex)), index.dump(2, ' ', true) + "\n",
                            options.fsync);
  if (options.before_commit) options.before_commit();
  out.commit();
  meter.finish();
}

}  // namespace detail::shards
}  // namespace tensorseal
