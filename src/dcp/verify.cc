// Collective verification of a DCP directory (tensorseal.dcp.verify; include/tensorseal/dcp.h):
//
//   items     storage_data's items in order, cut into `world` contiguous parts of about
//             equal bytes (item i goes to rank floor(bytes before i * world / all bytes));
//             each rank reads its items with every check (the manifest's checksum and
//             digest, which cover every byte; or, without a manifest, the zip CRCs) and hashes the leaf chunks that lie
//             inside one of their contiguous runs (dcp/tree.h chunks_inside)
//   straddle  leaf chunks inside no single item go to ranks round robin, in (entry,
//             chunk) order; a rank reads their pieces from the items' files unchecked
//             (the items' owners check them), a window of chunks at a time
//   values    BYTE_IO items' encodings (enc()) come from their owners
//   result    per rank: (entry, chunk, digest) for each algorithm (the requested one,
//             and XXH3 as well when the manifest records a content_hash), then the
//             encodings; dcp_verify_finish nests the entries as the reader does and
//             hashes the tree from them
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "dcp/constants.h"
#include "dcp/tree.h"
#include "hash/content_hash.h"
#include "hash/digest.h"
#include "tensorseal/dcp.h"
#include "util/endian.h"
#include "util/parallel.h"

namespace tensorseal {
namespace {

using detail::hash::Digest;
using detail::hash::kLeafChunk;
using detail::util::append_le;
using detail::util::load_le;
namespace fs = std::filesystem;

constexpr std::size_t kWindow = 64;  // straddling chunks assembled at once (64 MiB)

std::uint64_t entry_bytes(const DcpEntry& e) {
  std::uint64_t n = 1;
  for (auto d : e.size) n *= static_cast<std::uint64_t>(d);
  const std::uint64_t item = itemsize(e.dtype);
  return item ? n * item : (n * info(e.dtype).bits + 7) / 8;
}

std::string storage_key(const DcpStorage& s) { return fmt::format("{}@{}", s.relative_path, s.offset); }

struct Plan {
  std::vector<std::uint32_t> item_owner;  // per storage_order index
  std::map<std::string, std::size_t> item_index;
  // Per entry, per leaf chunk: the DCP chunk holding it whole (and where), or none.
  struct Cover {
    std::size_t chunk = SIZE_MAX;
    std::uint64_t at = 0, length = 0;
  };
  std::vector<std::vector<Cover>> covers;
};

Plan plan_of(const DcpMetadata& md, std::uint32_t world) {
  Plan p;
  std::uint64_t total = 0;
  for (const auto& st : md.storage_order) total += st.storage.length;
  std::uint64_t before = 0;
  for (std::size_t i = 0; i < md.storage_order.size(); ++i) {
    const auto& st = md.storage_order[i];
    const auto owner =
        total == 0 ? 0 : static_cast<std::uint32_t>(static_cast<unsigned __int128>(before) * world / total);
    p.item_owner.push_back(std::min(owner, world - 1));
    p.item_index.emplace(storage_key(st.storage), i);
    before += st.storage.length;
  }
  p.covers.resize(md.entries.size());
  for (std::size_t i = 0; i < md.entries.size(); ++i) {
    const DcpEntry& e = md.entries[i];
    if (!e.is_tensor) continue;
    const std::uint64_t n = entry_bytes(e);
    auto& cov = p.covers[i];
    cov.resize((n + kLeafChunk - 1) / kLeafChunk);
    for (std::size_t k = 0; k < e.chunks.size(); ++k) {
      const auto runs = detail::dcp::block_runs(e.size, e.chunks[k].offsets, e.chunks[k].sizes, itemsize(e.dtype), n);
      detail::dcp::chunks_inside(runs, n, [&](std::uint64_t c, std::uint64_t at, std::uint64_t len) {
        if (c < cov.size() && cov[c].chunk == SIZE_MAX) cov[c] = {k, at, len};
      });
    }
  }
  return p;
}

std::vector<HashAlgo> algos_for(HashAlgo algo, const DcpReader& r) {
  std::vector<HashAlgo> out{algo};
  if (!r.recorded_hash().empty() && algo != HashAlgo::kXxh3) out.push_back(HashAlgo::kXxh3);
  return out;
}

}  // namespace

std::string dcp_verify_part(const fs::path& dir, std::uint32_t rank, std::uint32_t world, HashAlgo algo,
                            const ReadOptions& options, unsigned threads) {
  if (world == 0 || rank >= world)
    throw Error(rules::kInvalidArgument, fmt::format("rank {} of a world of {}", rank, world), dir.string());
  ReadOptions raw_options = options;
  raw_options.verify_checksums = false;
  DcpReader raw(dir, raw_options, false);
  // The manifest's XXH3-128 checksum covers every byte of an item: the zip CRC-32s
  // inside it add nothing (stock directories have no manifest: their CRCs are checked).
  ReadOptions checked_options = options;
  checked_options.verify_checksums = !raw.has_manifest();
  DcpReader checked(dir, checked_options);
  const DcpMetadata& md = checked.metadata();
  const Plan p = plan_of(md, world);
  const auto algos = algos_for(algo, checked);

  struct Job {
    std::uint32_t entry;
    std::uint64_t chunk;
    std::span<const std::byte> bytes;
  };
  std::vector<Job> jobs;
  std::vector<std::shared_ptr<const Tensor>> keep;
  std::vector<std::vector<std::byte>> scratch;
  std::vector<std::pair<std::uint32_t, std::vector<std::string>>> encodings;  // per algo
  std::map<std::string, std::size_t> entry_of;
  for (std::size_t i = 0; i < md.entries.size(); ++i) entry_of.emplace(md.entries[i].fqn, i);

  // This rank's items: read with every check, then their whole leaf chunks.
  for (std::size_t i = 0; i < md.storage_order.size(); ++i) {
    if (p.item_owner[i] != rank) continue;
    const DcpStored& st = md.storage_order[i];
    const auto ei = entry_of.find(st.fqn);
    if (ei == entry_of.end()) continue;  // the reader refuses such a .metadata already
    const DcpEntry& e = md.entries[ei->second];
    if (!e.is_tensor) {
      const std::string bytes = checked.bytes_item(e.fqn, false);
      const Checkpoint c = read_bytes({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()},
                                      storage_key(st.storage), options);
      std::vector<std::string> enc;
      for (HashAlgo a : algos) {
        HashOptions o;
        o.algo = a;
        o.threads = 1;
        enc.push_back(detail::hash::encode_value(c.root, o));
      }
      encodings.emplace_back(static_cast<std::uint32_t>(ei->second), std::move(enc));
      continue;
    }
    if (!st.offset) continue;
    auto t = checked.chunk(e.fqn, *st.offset);
    std::size_t k = 0;
    while (k < e.chunks.size() && e.chunks[k].offsets != *st.offset) ++k;
    scratch.emplace_back();
    const auto bytes = t->contiguous_bytes(scratch.back());
    keep.push_back(std::move(t));
    const auto& cov = p.covers[ei->second];
    for (std::uint64_t c = 0; c < cov.size(); ++c)
      if (cov[c].chunk == k)
        jobs.push_back({static_cast<std::uint32_t>(ei->second), c, bytes.subspan(cov[c].at, cov[c].length)});
  }
  // This rank's straddling chunks, assembled a window at a time from unchecked reads.
  std::vector<std::tuple<std::uint32_t, std::uint64_t, std::vector<std::string>>> done;
  std::uint64_t straddler = 0;
  auto hash_jobs = [&](std::vector<Job>& js) {
    std::vector<std::vector<std::string>> out(js.size(), std::vector<std::string>(algos.size()));
    detail::util::parallel_for(js.size() * algos.size(), threads, [&](std::size_t j) {
      out[j / algos.size()][j % algos.size()] = Digest::oneshot(algos[j % algos.size()], js[j / algos.size()].bytes);
    });
    for (std::size_t j = 0; j < js.size(); ++j) done.emplace_back(js[j].entry, js[j].chunk, std::move(out[j]));
    js.clear();
  };
  hash_jobs(jobs);
  for (std::size_t i = 0; i < md.entries.size(); ++i) {
    const DcpEntry& e = md.entries[i];
    if (!e.is_tensor) continue;
    const std::uint64_t n = entry_bytes(e);
    std::vector<std::uint64_t> mine;
    for (std::uint64_t c = 0; c < p.covers[i].size(); ++c)
      if (p.covers[i][c].chunk == SIZE_MAX && straddler++ % world == rank) mine.push_back(c);
    if (mine.empty()) continue;
    if (itemsize(e.dtype) == 0)
      throw Error(
          detail::dcp::rules::kChunkMismatch,
          fmt::format("tensor '{}' of sub-byte dtype {} is split into chunks (not supported)", e.fqn, name(e.dtype)),
          dir.string());
    std::vector<std::shared_ptr<const Tensor>> parts(e.chunks.size());
    std::vector<std::vector<std::byte>> part_scratch(e.chunks.size());
    std::vector<std::span<const std::byte>> part_bytes(e.chunks.size());
    std::vector<detail::dcp::BlockRuns> runs;
    for (std::size_t k = 0; k < e.chunks.size(); ++k)
      runs.push_back(detail::dcp::block_runs(e.size, e.chunks[k].offsets, e.chunks[k].sizes, itemsize(e.dtype), n));
    for (std::size_t w = 0; w < mine.size(); w += kWindow) {
      const std::size_t end = std::min(mine.size(), w + kWindow);
      std::vector<std::vector<std::byte>> bufs(end - w);
      std::vector<std::uint64_t> filled(end - w, 0);
      for (std::size_t j = w; j < end; ++j) bufs[j - w].resize(std::min(kLeafChunk, n - mine[j] * kLeafChunk));
      const std::uint64_t lo = mine[w] * kLeafChunk, hi = mine[end - 1] * kLeafChunk + bufs.back().size();
      for (std::size_t k = 0; k < e.chunks.size(); ++k) {
        const auto& r = runs[k];
        if (r.count == 0) continue;
        // The first run ending after lo (runs start in increasing order).
        std::uint64_t a = 0, b = r.count;
        while (a < b) {
          const std::uint64_t m = (a + b) / 2;
          if (r.start(m) + r.bytes <= lo)
            a = m + 1;
          else
            b = m;
        }
        for (std::uint64_t q = a; q < r.count; ++q) {
          const std::uint64_t s = r.start(q);
          if (s >= hi) break;
          if (!parts[k]) {
            parts[k] = raw.chunk(e.fqn, e.chunks[k].offsets);
            part_bytes[k] = parts[k]->contiguous_bytes(part_scratch[k]);
          }
          // Copy the run's bytes into every window chunk it meets.
          for (std::uint64_t c = std::max(lo, s) / kLeafChunk; c * kLeafChunk < std::min(hi, s + r.bytes); ++c) {
            const auto it = std::lower_bound(mine.begin() + static_cast<std::ptrdiff_t>(w),
                                             mine.begin() + static_cast<std::ptrdiff_t>(end), c);
            if (it == mine.begin() + static_cast<std::ptrdiff_t>(end) || *it != c) continue;
            const std::size_t j = static_cast<std::size_t>(it - mine.begin()) - w;
            const std::uint64_t from = std::max(s, c * kLeafChunk);
            const std::uint64_t to = std::min(s + r.bytes, c * kLeafChunk + bufs[j].size());
            const auto src = part_bytes[k].subspan(q * r.bytes + (from - s), to - from);
            std::copy(src.begin(), src.end(), bufs[j].begin() + static_cast<std::ptrdiff_t>(from - c * kLeafChunk));
            filled[j] += to - from;
          }
        }
      }
      std::vector<Job> js;
      for (std::size_t j = w; j < end; ++j) {
        if (filled[j - w] != bufs[j - w].size())
          throw Error(detail::dcp::rules::kChunkGap,
                      fmt::format("the chunks of tensor '{}' do not cover its bytes [{}, +{})", e.fqn,
                                  mine[j] * kLeafChunk, bufs[j - w].size()),
                      dir.string());
        js.push_back({static_cast<std::uint32_t>(i), mine[j], bufs[j - w]});
      }
      hash_jobs(js);
    }
  }
  std::string blob;
  append_le<std::uint64_t>(blob, algos.size());
  append_le<std::uint64_t>(blob, done.size());
  for (const auto& [entry, chunk, ds] : done) {
    append_le<std::uint32_t>(blob, entry);
    append_le<std::uint64_t>(blob, chunk);
    for (const auto& d : ds) blob += d;
  }
  append_le<std::uint64_t>(blob, encodings.size());
  for (const auto& [entry, encs] : encodings) {
    append_le<std::uint32_t>(blob, entry);
    for (const auto& enc : encs) {
      append_le<std::uint64_t>(blob, enc.size());
      blob += enc;
    }
  }
  return blob;
}

std::string dcp_verify_finish(const fs::path& dir, const std::vector<std::string>& parts, HashAlgo algo,
                              const ReadOptions& options) {
  ReadOptions o = options;
  o.verify_checksums = false;
  DcpReader reader(dir, o, false);
  const DcpMetadata& md = reader.metadata();
  const auto algos = algos_for(algo, reader);
  const Plan p = plan_of(md, 1);
  // digests[a][entry][chunk], encodings[a][entry]
  std::vector<std::vector<std::vector<std::string>>> digests(algos.size());
  std::vector<std::vector<std::string>> encodings(algos.size(), std::vector<std::string>(md.entries.size()));
  for (auto& d : digests) {
    d.resize(md.entries.size());
    for (std::size_t i = 0; i < md.entries.size(); ++i) d[i].resize(p.covers[i].size());
  }
  for (std::size_t r = 0; r < parts.size(); ++r) {
    const std::string& b = parts[r];
    std::size_t at = 0;
    auto need = [&](std::size_t n) {
      if (at + n > b.size()) throw Error(rules::kInternal, fmt::format("rank {}'s verify result is short", r));
    };
    auto u32 = [&] {
      need(4);
      auto v = load_le<std::uint32_t>(reinterpret_cast<const std::byte*>(b.data()) + at);
      at += 4;
      return v;
    };
    auto u64 = [&] {
      need(8);
      auto v = load_le<std::uint64_t>(reinterpret_cast<const std::byte*>(b.data()) + at);
      at += 8;
      return v;
    };
    if (u64() != algos.size()) throw Error(rules::kInternal, fmt::format("rank {} hashed other algorithms", r));
    const std::uint64_t nd = u64();
    for (std::uint64_t k = 0; k < nd; ++k) {
      const std::uint32_t entry = u32();
      const std::uint64_t chunk = u64();
      if (entry >= md.entries.size() || chunk >= digests[0][entry].size() || !digests[0][entry][chunk].empty())
        throw Error(rules::kInternal, fmt::format("rank {} sent an unplanned chunk digest", r));
      for (std::size_t a = 0; a < algos.size(); ++a) {
        need(Digest::size(algos[a]));
        digests[a][entry][chunk] = b.substr(at, Digest::size(algos[a]));
        at += Digest::size(algos[a]);
      }
    }
    const std::uint64_t ne = u64();
    for (std::uint64_t k = 0; k < ne; ++k) {
      const std::uint32_t entry = u32();
      if (entry >= md.entries.size()) throw Error(rules::kInternal, fmt::format("rank {} sent an unplanned value", r));
      for (std::size_t a = 0; a < algos.size(); ++a) {
        const std::uint64_t len = u64();
        need(len);
        encodings[a][entry] = b.substr(at, len);
        at += len;
      }
    }
  }
  std::vector<std::string> out;
  for (std::size_t a = 0; a < algos.size(); ++a) {
    Value root = Value::dict();
    std::unordered_map<const Tensor*, std::string> encoded;
    for (std::size_t i = 0; i < md.entries.size(); ++i) {
      const DcpEntry& e = md.entries[i];
      auto placeholder =
          make_contiguous(e.dtype, e.is_tensor ? e.size : std::vector<std::int64_t>{}, Storage::owned({}));
      if (e.is_tensor) {
        for (std::size_t c = 0; c < digests[a][i].size(); ++c)
          if (digests[a][i][c].empty())
            throw Error(rules::kInternal, fmt::format("tensor '{}': no rank hashed chunk {}", e.fqn, c), dir.string());
        encoded[placeholder.get()] = detail::hash::encode_plain_tensor(
            e.dtype, e.size, detail::hash::leaf_digest(algos[a], entry_bytes(e), digests[a][i]));
      } else {
        if (encodings[a][i].empty())
          throw Error(rules::kInternal, fmt::format("no rank read item '{}'", e.fqn), dir.string());
        encoded[placeholder.get()] = encodings[a][i];
      }
      Value v{std::shared_ptr<const Tensor>(placeholder)};
      if (e.path.empty())
        root.as_dict().set(Value::str(e.fqn), std::move(v));
      else
        detail::dcp::set_element(root, e, std::move(v), dir.string(), options.limits.max_entries);
    }
    HashOptions h;
    h.algo = algos[a];
    out.push_back(detail::hash::content_hash_encoded(root, encoded, h));
  }
  const std::string& recorded = reader.recorded_hash();
  if (!recorded.empty() && out.back() != recorded)
    throw Error(detail::dcp::rules::kContentHash,
                fmt::format("the manifest records content hash {}, but the content hashes to {}", recorded, out.back()),
                dir.string());
  return out.front();
}

}  // namespace tensorseal
