// The content hash of live sharded state, computed by the ranks of a job together
// (tensorseal.dcp.content_hash; docs/content-hash.md "Sharded state", docs/formats/dcp.md
// "The live hash"). It equals the content hash of what dcp.save of the same state
// writes (and so of every layout converted from it), without gathering any tensor:
//
//   tree      the state as DCP flattens it (fqn, path) and as the DCP reader nests it
//             again (dcp/tree.h set_element); tensors are plain (flags 0), as DCP
//             gives them back; non-tensor leaves are their enc() bytes, which every
//             rank that holds the leaf computes and which must agree
//   boxes     each tensor is held as boxes (offsets, sizes) by ranks; identical boxes
//             on several ranks are replicas (Replicate placements, plain tensors);
//             the distinct boxes must tile the tensor (dcp/tree.h check_tiling)
//   chunks    leaf chunk c of a tensor (1 MiB of its row-major bytes) lies inside one
//             box's contiguous run, or straddles boxes. An inside chunk is hashed by
//             holder c mod |holders| of that box, in place. A straddling chunk is
//             owned by a holder of the box giving it most bytes (ties: first box in
//             (offsets, sizes) order; holder c mod |holders|); the other boxes' pieces
//             come from holder c mod |holders| of each (or from the owner's own copy)
//   rounds    straddling chunks are moved in rounds: chunks in (fqn, chunk) order are
//             taken while no rank sends or receives more than round_bytes and none
//             owns more than round_bytes / 1 MiB of them (at least one chunk a round);
//             every rank derives the same rounds from the summaries alone
//   replicas  every holder of a replicated box fingerprints its copy (XXH3-128); the
//             fingerprints must agree (dcp/replica-mismatch names tensor and ranks)
//
// Every decision depends only on the summaries every rank received, so all ranks run
// the same rounds and raise the same errors: no collective waits on a rank that left.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>

#include "dcp/constants.h"
#include "dcp/tree.h"
#include "hash/content_hash.h"
#include "hash/digest.h"
#include "tensorseal/dcp.h"
#include "util/endian.h"
#include "util/hex.h"
#include "util/parallel.h"
#include "util/text.h"

namespace tensorseal {
namespace {
using json = nlohmann::ordered_json;
using detail::hash::Digest;
using detail::hash::kLeafChunk;
namespace dcprules = detail::dcp::rules;
using Ints = std::vector<std::int64_t>;

constexpr std::string_view kWhere = "live state";

std::uint64_t shard_volume(const Ints& sizes) {
  std::uint64_t v = 1;
  for (auto s : sizes) v *= static_cast<std::uint64_t>(s);
  return v;
}

std::string ranks_text(const std::vector<std::uint32_t>& ranks) {
  std::vector<std::string> s;
  for (auto r : ranks) s.push_back(std::to_string(r));
  return (ranks.size() == 1 ? "rank " : "ranks ") + detail::util::join(s, ", ");
}

// "ranks 0, 2 / rank 1 hold 2 different values": groups of ranks holding one value
// each, by their lowest rank.
template <typename Map>
std::string groups_text(const Map& by_value) {
  std::vector<std::vector<std::uint32_t>> groups;
  for (const auto& [v, rs] : by_value) groups.push_back(rs);
  std::sort(groups.begin(), groups.end());
  std::vector<std::string> parts;
  for (const auto& g : groups) parts.push_back(ranks_text(g));
  return fmt::format("{} hold {} different values", detail::util::join(parts, " / "), groups.size());
}

json path_json(const std::vector<Value>& path) {
  json p = json::array();
  for (const auto& x : path) {
    if (x.is(Value::Kind::kStr))
      p.push_back(std::string(x.as_str()));
    else
      p.push_back(x.as_int());
  }
  return p;
}

// One item as every rank sees it after the summaries are merged.
struct BoxPlan {
  Ints offsets, sizes;
  std::vector<std::uint32_t> holders;  // ascending ranks
  std::size_t mine = SIZE_MAX;         // index into this rank's LiveItem::local, or none
  detail::dcp::BlockRuns runs;         // the box's contiguous runs in the global bytes
  std::span<const std::byte> bytes;    // this rank's copy (row-major), when it holds one
  std::vector<std::byte> scratch;      // gathered copy of a strided local tensor
};

struct ItemPlan {
  std::string fqn;
  std::vector<Value> path;
  bool is_tensor = false;
  DType dtype = DType::kFloat32;
  Ints shape;
  std::string enc;  // non-tensor: enc() of the value, as its lowest holder sent it
  std::uint64_t nbytes = 0, nchunks = 0;
  std::vector<BoxPlan> boxes;  // distinct, non-empty, in (offsets, sizes) order
};

// A piece of a chunk: bytes [local, local + length) of box `box` go to chunk offset `at`.
struct Piece {
  std::size_t box;
  std::uint64_t local, length, at;
  std::uint32_t sender = 0;
};

struct Moving {
  std::size_t item;
  std::uint64_t chunk, length;
  std::uint32_t owner;
  std::vector<Piece> pieces;
};

struct LocalJob {
  std::size_t item, box;
  std::uint64_t chunk, local, length;
};

}  // namespace

struct LiveHash::Impl {
  std::uint32_t rank = 0, world = 0;
  HashAlgo algo = HashAlgo::kSha256;
  unsigned threads = 0;
  std::uint64_t round_bytes = 0;
  std::vector<LiveItem> local;  // this rank's items (keep the data alive)
  std::vector<ItemPlan> items;  // by fqn

  // The stream of chunks, in (item, chunk) order.
  std::size_t cur_item = 0;
  bool item_started = false;
  using Next = std::pair<std::uint64_t, std::size_t>;  // (global start of the box's next run, box)
  std::priority_queue<Next, std::vector<Next>, std::greater<>> heap;
  std::vector<std::uint64_t> run_index;  // per box of the current item: runs emitted
  std::uint64_t cursor = 0;              // bytes of the current item emitted
  std::optional<Moving> held;            // did not fit the last round

  std::vector<LocalJob> local_jobs;
  std::vector<Moving> round;  // the chunks of the round in flight
  // (item, chunk, digest) this rank computed
  std::vector<std::tuple<std::uint32_t, std::uint64_t, std::string>> digests;
  Stats stats;

  void start_item() {
    const ItemPlan& it = items[cur_item];
    heap = {};
    run_index.assign(it.boxes.size(), 0);
    cursor = 0;
    for (std::size_t b = 0; b < it.boxes.size(); ++b)
      if (it.boxes[b].runs.count) heap.push({it.boxes[b].runs.start(0), b});
    item_started = true;
  }

  // The next chunk of the stream: local jobs are recorded here; a straddling chunk
  // is returned. False at the end of the stream.
  bool next_moving(Moving& out) {
    while (cur_item < items.size()) {
      ItemPlan& it = items[cur_item];
      if (!it.is_tensor || it.nchunks == 0) {
        ++cur_item;
        item_started = false;
        continue;
      }
      if (!item_started) start_item();
      if (cursor >= it.nbytes) {
        ++cur_item;
        item_started = false;
        continue;
      }
      const std::uint64_t c = cursor / kLeafChunk;
      const std::uint64_t lo = c * kLeafChunk, hi = std::min(it.nbytes, lo + kLeafChunk);
      std::vector<Piece> pieces;
      while (cursor < hi) {
        if (heap.empty())
          throw Error(tensorseal::rules::kInternal, fmt::format("tensor '{}': no box covers byte {}", it.fqn, cursor));
        auto [start, b] = heap.top();
        BoxPlan& box = it.boxes[b];
        const std::uint64_t r = run_index[b];
        if (start > cursor)
          throw Error(tensorseal::rules::kInternal, fmt::format("tensor '{}': runs do not tile at {}", it.fqn, cursor));
        const std::uint64_t end = start + box.runs.bytes;
        const std::uint64_t take = std::min(end, hi) - cursor;
        const std::uint64_t local = r * box.runs.bytes + (cursor - start);
        if (!pieces.empty() && pieces.back().box == b && pieces.back().local + pieces.back().length == local)
          pieces.back().length += take;
        else
          pieces.push_back({b, local, take, cursor - lo});
        cursor += take;
        if (cursor == end) {
          heap.pop();
          if (++run_index[b] < box.runs.count) heap.push({box.runs.start(run_index[b]), b});
        }
      }
      if (pieces.size() == 1) {
        const BoxPlan& box = it.boxes[pieces[0].box];
        if (box.holders[c % box.holders.size()] == rank)
          local_jobs.push_back({cur_item, pieces[0].box, c, pieces[0].local, hi - lo});
        continue;
      }
      std::map<std::size_t, std::uint64_t> per_box;
      for (const auto& p : pieces) per_box[p.box] += p.length;
      std::size_t best = per_box.begin()->first;
      for (const auto& [b, n] : per_box)
        if (n > per_box[best]) best = b;
      const auto& ob = it.boxes[best].holders;
      out = Moving{cur_item, c, hi - lo, ob[c % ob.size()], std::move(pieces)};
      for (auto& p : out.pieces) {
        const auto& h = it.boxes[p.box].holders;
        p.sender = std::binary_search(h.begin(), h.end(), out.owner) ? out.owner : h[c % h.size()];
      }
      return true;
    }
    return false;
  }

  std::span<const std::byte> piece_bytes(const Moving& m, const Piece& p) const {
    return items[m.item].boxes[p.box].bytes.subspan(p.local, p.length);
  }
};

namespace {

void check_local(const LiveItem& item) {
  for (const auto& b : item.local) {
    if (b.offsets.size() != item.shape.size() || b.sizes.size() != item.shape.size())
      throw Error(dcprules::kLiveState,
                  fmt::format("tensor '{}' of shape {} has a local block at {} of size {}", item.fqn,
                              shape_text(item.shape), shape_text(b.offsets), shape_text(b.sizes)),
                  std::string(kWhere));
    if (!b.data || b.data->dtype != item.dtype || b.data->shape != b.sizes || b.data->quantization)
      throw Error(dcprules::kLiveState,
                  fmt::format("tensor '{}': the local data of the block at {} is not {}{}", item.fqn,
                              shape_text(b.offsets), name(item.dtype), shape_text(b.sizes)),
                  std::string(kWhere));
    b.data->validate();
  }
}

}  // namespace

std::string LiveHash::summary(const std::vector<LiveItem>& items, HashAlgo algo, unsigned threads) {
  json out = json::array();
  HashOptions o;
  o.algo = algo;
  o.threads = threads;
  for (const auto& it : items) {
    if (it.path.empty())
      throw Error(tensorseal::rules::kInvalidArgument, "item '" + it.fqn + "' has no path", std::string(kWhere));
    json j = json::object();
    j["fqn"] = it.fqn;
    j["path"] = path_json(it.path);
    j["tensor"] = it.is_tensor;
    if (it.is_tensor) {
      check_local(it);
      j["dtype"] = std::string(name(it.dtype));
      j["shape"] = it.shape;
      json boxes = json::array();
      for (const auto& b : it.local) boxes.push_back(json::array({b.offsets, b.sizes}));
      j["boxes"] = std::move(boxes);
    } else {
      j["enc"] = detail::util::to_hex(detail::hash::encode_value(it.value, o));
    }
    out.push_back(std::move(j));
  }
  return out.dump();
}

LiveHash::LiveHash(std::vector<LiveItem> items, const std::vector<std::string>& summaries, std::uint32_t rank,
                   HashAlgo algo, unsigned threads, std::uint64_t round_bytes)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.rank = rank;
  m.world = static_cast<std::uint32_t>(summaries.size());
  m.algo = algo;
  m.threads = threads;
  m.round_bytes = std::max<std::uint64_t>(round_bytes, kLeafChunk);
  m.local = std::move(items);
  if (rank >= m.world)
    throw Error(tensorseal::rules::kInvalidArgument, fmt::format("rank {} of a world of {}", rank, m.world));
  const std::string where(kWhere);

  // fqn -> (rank, summary row)
  std::map<std::string, std::vector<std::pair<std::uint32_t, json>>> rows;
  for (std::uint32_t r = 0; r < m.world; ++r) {
    json s;
    try {
      s = json::parse(summaries[r]);
    } catch (const json::parse_error& e) {
      throw Error(tensorseal::rules::kInvalidArgument, fmt::format("rank {}'s summary is not JSON: {}", r, e.what()));
    }
    for (auto& row : s) {
      auto& v = rows[row.at("fqn").get<std::string>()];
      if (!v.empty() && v.back().first == r)
        throw Error(dcprules::kLiveState, fmt::format("rank {} holds '{}' twice", r, row.at("fqn").get<std::string>()),
                    where);
      v.emplace_back(r, std::move(row));
    }
  }
  std::map<std::string, std::size_t> mine;
  for (std::size_t i = 0; i < m.local.size(); ++i) mine[m.local[i].fqn] = i;

  for (auto& entry : rows) {
    // Named copies: lambdas below cannot capture structured bindings (clang 14).
    const std::string& fqn = entry.first;
    auto& have = entry.second;
    ItemPlan it;
    it.fqn = fqn;
    const json& first = have.front().second;
    it.is_tensor = first.at("tensor").get<bool>();
    for (const auto& p : first.at("path"))
      it.path.push_back(p.is_string() ? Value::str(p.get<std::string>()) : Value(p.get<std::int64_t>()));
    if (it.is_tensor) {
      it.dtype = *dtype_from_name(first.at("dtype").get<std::string>());
      it.shape = first.at("shape").get<Ints>();
    }
    for (const auto& [r, row] : have) {
      auto disagree = [&, r = r](const std::string& what) {
        throw Error(dcprules::kLiveState,
                    fmt::format("ranks {} and {} disagree about '{}': {}", have.front().first, r, fqn, what), where);
      };
      if (row.at("tensor").get<bool>() != it.is_tensor) disagree("a tensor on one, another value on the other");
      if (row.at("path") != first.at("path")) disagree("its path in the state dict");
      if (it.is_tensor && (row.at("dtype") != first.at("dtype") || row.at("shape") != first.at("shape")))
        disagree(fmt::format("{}{} against {}{}", first.at("dtype").get<std::string>(), shape_text(it.shape),
                             row.at("dtype").get<std::string>(), shape_text(row.at("shape").get<Ints>())));
    }
    if (!it.is_tensor) {
      // Replicated non-tensor values: every holder's enc() must agree.
      std::map<std::string, std::vector<std::uint32_t>> by_value;
      for (const auto& [r, row] : have) by_value[row.at("enc").get<std::string>()].push_back(r);
      if (by_value.size() > 1) {
        throw Error(dcprules::kReplicaMismatch,
                    fmt::format("the value '{}' differs between ranks: {}", fqn, groups_text(by_value)), where);
      }
      auto enc = detail::util::from_hex(have.front().second.at("enc").get<std::string>());
      if (!enc) throw Error(tensorseal::rules::kInvalidArgument, "a summary's value is not hex", where);
      it.enc = std::move(*enc);
      m.items.push_back(std::move(it));
      continue;
    }
    // Distinct boxes and their holders.
    std::map<std::pair<Ints, Ints>, std::vector<std::pair<std::uint32_t, std::size_t>>> boxes;
    for (const auto& [r, row] : have) {
      std::size_t li = 0;
      for (const auto& b : row.at("boxes")) {
        auto key = std::make_pair(b.at(0).get<Ints>(), b.at(1).get<Ints>());
        if (key.first.size() != it.shape.size() || key.second.size() != it.shape.size())
          throw Error(dcprules::kLiveState, fmt::format("rank {} holds a block of '{}' of another rank", r, fqn),
                      where);
        auto& h = boxes[key];
        if (!h.empty() && h.back().first == r)
          throw Error(dcprules::kLiveState,
                      fmt::format("rank {} holds the block at {} of '{}' twice", r, shape_text(key.first), fqn), where);
        h.emplace_back(r, li++);
      }
    }
    DcpEntry e;
    e.fqn = fqn;
    e.is_tensor = true;
    e.dtype = it.dtype;
    e.size = it.shape;
    for (const auto& [key, h] : boxes) e.chunks.push_back({key.first, key.second});
    detail::dcp::check_tiling(e, where);
    const std::uint64_t item = itemsize(it.dtype);
    if (item == 0 && boxes.size() > 1)
      throw Error(dcprules::kLiveState,
                  fmt::format("tensor '{}' of sub-byte dtype {} is sharded (not supported)", fqn, name(it.dtype)),
                  where);
    it.nbytes = shard_volume(it.shape) * item;
    if (item == 0) it.nbytes = (shard_volume(it.shape) * info(it.dtype).bits + 7) / 8;
    it.nchunks = (it.nbytes + kLeafChunk - 1) / kLeafChunk;
    const auto me = mine.find(fqn);
    for (auto& [key, h] : boxes) {
      if (shard_volume(key.second) == 0) continue;
      BoxPlan b;
      b.offsets = key.first;
      b.sizes = key.second;
      for (const auto& [r, li] : h) {
        b.holders.push_back(r);
        if (r == rank) b.mine = li;
      }
      b.runs = detail::dcp::block_runs(it.shape, b.offsets, b.sizes, item, it.nbytes);
      if (b.mine != SIZE_MAX) {
        if (me == mine.end() || b.mine >= m.local[me->second].local.size())
          throw Error(tensorseal::rules::kInternal, "tensor '" + fqn + "': this rank's block is missing", where);
        b.bytes = m.local[me->second].local[b.mine].data->contiguous_bytes(b.scratch);
      }
      it.boxes.push_back(std::move(b));
    }
    m.items.push_back(std::move(it));
  }
}

LiveHash::~LiveHash() = default;
LiveHash::LiveHash(LiveHash&&) noexcept = default;
LiveHash& LiveHash::operator=(LiveHash&&) noexcept = default;

std::optional<LiveHash::Round> LiveHash::next_round() {
  Impl& m = *impl_;
  m.round.clear();
  std::vector<std::uint64_t> sends(m.world, 0), recvs(m.world, 0), owned(m.world, 0);
  const std::uint64_t max_owned = m.round_bytes / kLeafChunk;
  auto fits = [&](const Moving& mv) {
    std::vector<std::uint64_t> s = sends, r = recvs;
    for (const auto& p : mv.pieces)
      if (p.sender != mv.owner) {
        s[p.sender] += p.length;
        r[mv.owner] += p.length;
      }
    if (!m.round.empty()) {
      if (owned[mv.owner] + 1 > max_owned) return false;
      for (std::uint32_t i = 0; i < m.world; ++i)
        if (s[i] > m.round_bytes || r[i] > m.round_bytes) return false;
    }
    sends = std::move(s);
    recvs = std::move(r);
    ++owned[mv.owner];
    return true;
  };
  while (true) {
    Moving mv;
    if (m.held) {
      mv = std::move(*m.held);
      m.held.reset();
    } else if (!m.next_moving(mv)) {
      break;
    }
    if (!fits(mv)) {
      m.held = std::move(mv);
      break;
    }
    m.round.push_back(std::move(mv));
  }
  if (m.round.empty()) return std::nullopt;
  Round out;
  out.send_counts.assign(m.world, 0);
  out.recv_counts.assign(m.world, 0);
  for (std::uint32_t dst = 0; dst < m.world; ++dst)
    for (const auto& mv : m.round) {
      if (mv.owner != dst || dst == m.rank) continue;
      for (const auto& p : mv.pieces)
        if (p.sender == m.rank) {
          const auto b = m.piece_bytes(mv, p);
          out.send.insert(out.send.end(), b.begin(), b.end());
          out.send_counts[dst] += static_cast<std::int64_t>(p.length);
        }
    }
  for (const auto& mv : m.round)
    if (mv.owner == m.rank)
      for (const auto& p : mv.pieces)
        if (p.sender != m.rank) out.recv_counts[p.sender] += static_cast<std::int64_t>(p.length);
  ++m.stats.rounds;
  m.stats.sent_bytes += out.send.size();
  return out;
}

void LiveHash::receive(std::span<const std::byte> bytes) {
  Impl& m = *impl_;
  std::vector<std::size_t> ours;
  for (std::size_t i = 0; i < m.round.size(); ++i)
    if (m.round[i].owner == m.rank) ours.push_back(i);
  std::vector<std::vector<std::byte>> bufs(ours.size());
  for (std::size_t k = 0; k < ours.size(); ++k) {
    const Moving& mv = m.round[ours[k]];
    bufs[k].resize(mv.length);
    for (const auto& p : mv.pieces)
      if (p.sender == m.rank) {
        const auto b = m.piece_bytes(mv, p);
        std::copy(b.begin(), b.end(), bufs[k].begin() + static_cast<std::ptrdiff_t>(p.at));
      }
  }
  std::uint64_t at = 0;
  for (std::uint32_t src = 0; src < m.world; ++src) {
    if (src == m.rank) continue;
    for (std::size_t k = 0; k < ours.size(); ++k)
      for (const auto& p : m.round[ours[k]].pieces)
        if (p.sender == src) {
          if (at + p.length > bytes.size())
            throw Error(tensorseal::rules::kInternal, "the exchange delivered fewer bytes than planned");
          std::copy(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                    bytes.begin() + static_cast<std::ptrdiff_t>(at + p.length),
                    bufs[k].begin() + static_cast<std::ptrdiff_t>(p.at));
          at += p.length;
        }
  }
  if (at != bytes.size()) throw Error(tensorseal::rules::kInternal, "the exchange delivered more bytes than planned");
  m.stats.received_bytes += at;
  std::vector<std::string> out(ours.size());
  detail::util::parallel_for(ours.size(), m.threads, [&](std::size_t k) { out[k] = Digest::oneshot(m.algo, bufs[k]); });
  for (std::size_t k = 0; k < ours.size(); ++k) {
    const Moving& mv = m.round[ours[k]];
    m.digests.emplace_back(static_cast<std::uint32_t>(mv.item), mv.chunk, std::move(out[k]));
    m.stats.hashed_bytes += mv.length;
  }
  m.round.clear();
}

std::string LiveHash::partial() {
  Impl& m = *impl_;
  if (m.held || m.cur_item < m.items.size()) {
    // Rounds not drained (a caller that never moved anything): finish the stream.
    Moving mv;
    if (m.held || m.next_moving(mv))
      throw Error(tensorseal::rules::kInternal, "partial() before every round was exchanged");
  }
  std::vector<std::string> out(m.local_jobs.size());
  // Replicated boxes this rank holds: their fingerprints.
  std::vector<std::pair<std::size_t, std::size_t>> fps;
  for (std::size_t i = 0; i < m.items.size(); ++i)
    for (std::size_t b = 0; b < m.items[i].boxes.size(); ++b)
      if (m.items[i].boxes[b].holders.size() > 1 && m.items[i].boxes[b].mine != SIZE_MAX) fps.emplace_back(i, b);
  std::vector<std::string> fp(fps.size());
  detail::util::parallel_for(out.size() + fps.size(), m.threads, [&](std::size_t j) {
    if (j < out.size()) {
      const LocalJob& job = m.local_jobs[j];
      out[j] = Digest::oneshot(m.algo, m.items[job.item].boxes[job.box].bytes.subspan(job.local, job.length));
    } else {
      const auto [i, b] = fps[j - out.size()];
      fp[j - out.size()] = Digest::oneshot(HashAlgo::kXxh3, m.items[i].boxes[b].bytes);
    }
  });
  std::string blob;
  using detail::util::append_le;
  append_le<std::uint64_t>(blob, m.digests.size() + out.size());
  auto put = [&](std::uint32_t item, std::uint64_t chunk, const std::string& d) {
    append_le<std::uint32_t>(blob, item);
    append_le<std::uint64_t>(blob, chunk);
    blob += d;
  };
  for (const auto& [item, chunk, d] : m.digests) put(item, chunk, d);
  for (std::size_t j = 0; j < out.size(); ++j) {
    put(static_cast<std::uint32_t>(m.local_jobs[j].item), m.local_jobs[j].chunk, out[j]);
    m.stats.hashed_bytes += m.local_jobs[j].length;
  }
  append_le<std::uint64_t>(blob, fps.size());
  for (std::size_t j = 0; j < fps.size(); ++j) {
    append_le<std::uint32_t>(blob, static_cast<std::uint32_t>(fps[j].first));
    append_le<std::uint64_t>(blob, fps[j].second);
    blob += fp[j];
  }
  return blob;
}

std::string LiveHash::finish(const std::vector<std::string>& partials) const {
  const Impl& m = *impl_;
  if (partials.size() != m.world)
    throw Error(tensorseal::rules::kInvalidArgument,
                fmt::format("{} partial results for a world of {}", partials.size(), m.world));
  const std::size_t dsize = Digest::size(m.algo);
  std::vector<std::vector<std::string>> chunks(m.items.size());
  for (std::size_t i = 0; i < m.items.size(); ++i) chunks[i].resize(m.items[i].nchunks);
  // (item, box) -> fingerprint -> ranks
  std::map<std::pair<std::size_t, std::size_t>, std::map<std::string, std::vector<std::uint32_t>>> fps;
  for (std::uint32_t r = 0; r < m.world; ++r) {
    const std::string& b = partials[r];
    std::size_t at = 0;
    auto need = [&](std::size_t n) {
      if (at + n > b.size()) throw Error(tensorseal::rules::kInternal, fmt::format("rank {}'s result is short", r));
    };
    auto u32 = [&] {
      need(4);
      auto v = detail::util::load_le<std::uint32_t>(reinterpret_cast<const std::byte*>(b.data()) + at);
      at += 4;
      return v;
    };
    auto u64 = [&] {
      need(8);
      auto v = detail::util::load_le<std::uint64_t>(reinterpret_cast<const std::byte*>(b.data()) + at);
      at += 8;
      return v;
    };
    const std::uint64_t nd = u64();
    for (std::uint64_t k = 0; k < nd; ++k) {
      const std::uint32_t item = u32();
      const std::uint64_t chunk = u64();
      need(dsize);
      if (item >= chunks.size() || chunk >= chunks[item].size() || !chunks[item][chunk].empty())
        throw Error(tensorseal::rules::kInternal, fmt::format("rank {} sent an unplanned chunk digest", r));
      chunks[item][chunk] = b.substr(at, dsize);
      at += dsize;
    }
    const std::uint64_t nf = u64();
    for (std::uint64_t k = 0; k < nf; ++k) {
      const std::uint32_t item = u32();
      const std::uint64_t box = u64();
      need(16);
      fps[{item, box}][b.substr(at, 16)].push_back(r);
      at += 16;
    }
    if (at != b.size()) throw Error(tensorseal::rules::kInternal, fmt::format("rank {}'s result is long", r));
  }
  for (const auto& [key, values] : fps) {
    if (values.size() < 2) continue;
    const ItemPlan& it = m.items[key.first];
    const BoxPlan& box = it.boxes[key.second];
    const bool whole = box.sizes == it.shape;
    throw Error(
        dcprules::kReplicaMismatch,
        fmt::format(
            "replicas of tensor '{}'{} differ between ranks: {}", it.fqn,
            whole ? "" : fmt::format(" (the block at {} of size {})", shape_text(box.offsets), shape_text(box.sizes)),
            groups_text(values)),
        std::string(kWhere));
  }
  Value root = Value::dict();
  std::unordered_map<const Tensor*, std::string> encoded;
  for (std::size_t i = 0; i < m.items.size(); ++i) {
    const ItemPlan& it = m.items[i];
    auto placeholder = make_contiguous(it.dtype, it.shape, Storage::owned({}));
    if (it.is_tensor) {
      for (std::uint64_t c = 0; c < it.nchunks; ++c)
        if (chunks[i][c].empty())
          throw Error(tensorseal::rules::kInternal, fmt::format("tensor '{}': no rank hashed chunk {}", it.fqn, c));
      encoded[placeholder.get()] = detail::hash::encode_plain_tensor(
          it.dtype, it.shape, detail::hash::leaf_digest(m.algo, it.nbytes, chunks[i]));
    } else {
      encoded[placeholder.get()] = it.enc;
    }
    DcpEntry e;
    e.fqn = it.fqn;
    e.path = it.path;
    detail::dcp::set_element(root, e, Value(std::shared_ptr<const Tensor>(placeholder)), std::string(kWhere),
                             Limits{}.max_entries);
  }
  HashOptions o;
  o.algo = m.algo;
  return detail::hash::content_hash_encoded(root, encoded, o);
}

LiveHash::Stats LiveHash::stats() const { return impl_->stats; }

}  // namespace tensorseal
