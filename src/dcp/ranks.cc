#include "dcp/ranks.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <system_error>

#include "dcp/constants.h"
#include "io/file_inside.h"
#include "tensorseal/error.h"
#include "tensorseal/storage.h"

namespace tensorseal::detail::dcp {
namespace fs = std::filesystem;

std::optional<std::uint32_t> metadata_rank(std::string_view n) noexcept {
  if (!n.starts_with(dcp::kRankPrefix) || !n.ends_with(dcp::kMetadataFile)) return std::nullopt;
  const std::string_view digits =
      n.substr(dcp::kRankPrefix.size(), n.size() - dcp::kRankPrefix.size() - dcp::kMetadataFile.size());
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  std::uint32_t r = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    r = r * 10 + static_cast<std::uint32_t>(c - '0');
  }
  // "__01.metadata" is not what DCP writes for rank 1.
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
  return r;
}

namespace {

std::string path_repr(const std::vector<Value>& path) {
  std::string s;
  for (const auto& v : path) s += repr(v, 200) + "/";
  return s;
}

bool same_place(const Chunk& a, const Chunk& b) { return a.offsets == b.offsets && a.sizes == b.sizes; }

void merge(Metadata& out, Metadata rank, const std::string& file, std::map<std::string, std::size_t>& at) {
  for (auto& e : rank.entries) {
    const auto [it, fresh] = at.emplace(e.fqn, out.entries.size());
    if (fresh) {
      out.entries.push_back(std::move(e));
      continue;
    }
    Entry& have = out.entries[it->second];
    std::string differs;
    if (have.is_tensor != e.is_tensor)
      differs = "a tensor and a bytes item";
    else if (have.is_tensor && have.dtype != e.dtype)
      differs = std::string("dtype ") + std::string(name(have.dtype)) + " and " + std::string(name(e.dtype));
    else if (have.is_tensor && have.size != e.size)
      differs = "size " + shape_text(have.size) + " and " + shape_text(e.size);
    else if (path_repr(have.path) != path_repr(e.path))
      differs = "its nested path";
    if (!differs.empty())
      throw Error(rules::kRankMetadata, "'" + e.fqn + "' differs from a lower rank's: " + differs, file);
    if (!e.is_tensor) continue;  // a bytes item several ranks wrote: the lowest rank's
    for (std::size_t i = 0; i < e.chunks.size(); ++i) {
      const bool replica = std::any_of(have.chunks.begin(), have.chunks.end(),
                                       [&](const Chunk& c) { return same_place(c, e.chunks[i]); });
      if (replica) continue;
      have.chunks.push_back(e.chunks[i]);
      have.storage.push_back(e.storage[i]);
    }
  }
  for (auto& s : rank.storage_order) out.storage_order.push_back(std::move(s));
  for (auto& g : rank.globals) out.globals.push_back(std::move(g));
  if (rank.save_id && (!out.save_id || out.save_id->find(*rank.save_id) == std::string::npos))
    out.save_id = out.save_id ? *out.save_id + "," + *rank.save_id : *rank.save_id;
  if (!out.checkpoint_id) out.checkpoint_id = rank.checkpoint_id;
  if (!out.version) out.version = rank.version;
}

}  // namespace

Metadata read_rank_metadata(const fs::path& dir, const std::string& name, const Limits& limits, std::uint32_t* n) {
  std::map<std::uint32_t, std::string> ranks;  // rank -> file name
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (auto r = metadata_rank(n)) {
      if (ranks.size() >= limits.max_entries)
        throw Error(rules::kTooMany, fmt::format("more than {} rank metadata files", limits.max_entries), name);
      ranks.emplace(*r, n);
    }
  }
  if (ec) throw Error(rules::kStorageMissing, "cannot list the directory: " + ec.message(), dir.string());
  if (ranks.empty() || ranks.begin()->first != 0)
    throw Error(rules::kRankMetadata, "no __0.metadata: the per-rank layout starts at rank 0", name);
  if (ranks.rbegin()->first + 1 != ranks.size()) {
    std::uint32_t missing = 0;
    while (ranks.count(missing)) ++missing;
    throw Error(rules::kRankMetadata,
                fmt::format("{}{}{} is missing: {} rank metadata files up to rank {}", dcp::kRankPrefix, missing,
                            dcp::kMetadataFile, ranks.size(), ranks.rbegin()->first),
                (dir / ranks.begin()->second).string());
  }
  if (n != nullptr) *n = static_cast<std::uint32_t>(ranks.size());
  Metadata out;
  std::map<std::string, std::size_t> at;
  for (const auto& [r, file] : ranks) {
    const fs::path real =
        io::file_inside(dir, file, rules::kStoragePath, rules::kStorageMissing, "rank metadata", name);
    const auto mapped = MappedFile::open(real);
    const std::string shown = (dir / file).string();
    merge(out, parse_metadata(mapped->bytes(), shown, limits), shown, at);
  }
  return out;
}

}  // namespace tensorseal::detail::dcp
