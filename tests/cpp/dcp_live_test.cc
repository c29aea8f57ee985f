// LiveHash, the collective content hash of sharded state (src/dcp/live.cc), with the
// ranks simulated in one process: summaries to every rank, each round an all-to-all of
// the send buffers, partials to every rank. Every rank's digest must equal
// content_hash of the same state held whole, for any sharding and round size.
#include <cstring>
#include <random>

#include "tensorseal/dcp.h"
#include "test_util.h"

namespace tensorseal {
namespace {

using Ints = std::vector<std::int64_t>;

std::shared_ptr<Tensor> random_tensor(DType d, Ints shape, unsigned seed) {
  auto t = make_contiguous(d, shape, Storage::owned({}, d));
  std::vector<std::byte> b(t->nbytes());
  std::mt19937 g(seed);
  for (auto& x : b) x = static_cast<std::byte>(g() & 0xff);
  return make_contiguous(d, std::move(shape), Storage::owned(std::move(b), d));
}

// The block [offsets, offsets + sizes) of `t` (contiguous) as a tensor of its own.
std::shared_ptr<const Tensor> block(const Tensor& t, const Ints& offsets, const Ints& sizes) {
  const std::size_t n = t.shape.size(), item = itemsize(t.dtype);
  std::vector<std::byte> out;
  std::vector<std::byte> scratch;
  const auto src = t.contiguous_bytes(scratch);
  std::uint64_t count = 1;
  for (auto s : sizes) count *= static_cast<std::uint64_t>(s);
  Ints idx(n, 0);
  for (std::uint64_t e = 0; e < count; ++e) {
    std::uint64_t at = 0;
    for (std::size_t d = 0; d < n; ++d) at = at * t.shape[d] + offsets[d] + idx[d];
    out.insert(out.end(), src.begin() + at * item, src.begin() + (at + 1) * item);
    for (std::size_t d = n; d-- > 0;) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
  return make_contiguous(t.dtype, sizes, Storage::owned(std::move(out), t.dtype));
}

LiveItem tensor_item(const std::string& fqn, const Tensor& full, std::vector<std::pair<Ints, Ints>> boxes) {
  LiveItem it;
  it.fqn = fqn;
  it.path = {Value::str(fqn)};
  it.is_tensor = true;
  it.dtype = full.dtype;
  it.shape = full.shape;
  for (auto& [o, s] : boxes) it.local.push_back({o, s, block(full, o, s)});
  return it;
}

// Shard on `dim` over `parts` ranks as DTensor does (ceil-sized, the last ones short).
std::pair<Ints, Ints> shard(const Ints& shape, std::size_t dim, std::int64_t parts, std::int64_t r) {
  const std::int64_t c = (shape[dim] + parts - 1) / parts;
  Ints o(shape.size(), 0), s = shape;
  o[dim] = std::min(shape[dim], r * c);
  s[dim] = std::min(shape[dim], (r + 1) * c) - o[dim];
  return {o, s};
}

// Runs every rank; returns each rank's digest (or throws the first rank's error).
std::vector<std::string> run_ranks(std::vector<std::vector<LiveItem>> ranks, std::uint64_t round_bytes,
                                   HashAlgo algo = HashAlgo::kSha256, std::uint64_t* rounds = nullptr) {
  const std::size_t world = ranks.size();
  std::vector<std::string> summaries;
  for (const auto& items : ranks) summaries.push_back(LiveHash::summary(items, algo, 1));
  std::vector<LiveHash> hs;
  for (std::size_t r = 0; r < world; ++r)
    hs.emplace_back(std::move(ranks[r]), summaries, static_cast<std::uint32_t>(r), algo, 2, round_bytes);
  std::uint64_t n = 0;
  while (true) {
    std::vector<std::optional<LiveHash::Round>> rs;
    for (auto& h : hs) rs.push_back(h.next_round());
    const bool any = rs[0].has_value();
    for (const auto& r : rs) EXPECT_EQ(r.has_value(), any) << "ranks disagree about the number of rounds";
    if (!any) break;
    ++n;
    for (std::size_t dst = 0; dst < world; ++dst) {
      std::vector<std::byte> recv;
      for (std::size_t src = 0; src < world; ++src) {
        std::int64_t at = 0;
        for (std::size_t k = 0; k < dst; ++k) at += rs[src]->send_counts[k];
        EXPECT_EQ(rs[src]->send_counts[dst], rs[dst]->recv_counts[src]);
        recv.insert(recv.end(), rs[src]->send.begin() + at, rs[src]->send.begin() + at + rs[src]->send_counts[dst]);
      }
      EXPECT_LE(recv.size(), round_bytes + (1u << 20));
      hs[dst].receive(recv);
    }
  }
  if (rounds) *rounds = n;
  std::vector<std::string> partials;
  for (auto& h : hs) partials.push_back(h.partial());
  std::vector<std::string> out;
  for (auto& h : hs) out.push_back(h.finish(partials));
  return out;
}

std::string whole_hash(const std::vector<std::pair<std::string, Value>>& entries, HashAlgo algo = HashAlgo::kSha256) {
  Value root = Value::dict();
  for (const auto& [k, v] : entries) root.as_dict().set(Value::str(k), v);
  HashOptions o;
  o.algo = algo;
  return content_hash(root, o);
}

void expect_all(const std::vector<std::string>& got, const std::string& want) {
  for (std::size_t r = 0; r < got.size(); ++r) EXPECT_EQ(got[r], want) << "rank " << r;
}

TEST(DcpLive, RowShardsEqualTheWholeTensor) {
  auto t = random_tensor(DType::kFloat32, {1000, 700}, 1);  // 2.67 MiB: chunks straddle rank edges
  std::vector<std::vector<LiveItem>> ranks(3);
  for (int r = 0; r < 3; ++r) ranks[r].push_back(tensor_item("w", *t, {shard(t->shape, 0, 3, r)}));
  std::uint64_t rounds = 0;
  expect_all(run_ranks(std::move(ranks), 16 << 20, HashAlgo::kSha256, &rounds), whole_hash({{"w", Value(t)}}));
  EXPECT_EQ(rounds, 1u);  // only the few chunks at the rank edges move
}

TEST(DcpLive, ColumnShardsAreReblockedInBoundedRounds) {
  auto t = random_tensor(DType::kFloat16, {700, 3001}, 2);  // 4 MiB, uneven columns: 1001, 1000, 1000
  for (std::uint64_t round : {std::uint64_t{1} << 20, std::uint64_t{3} << 20, std::uint64_t{64} << 20}) {
    std::vector<std::vector<LiveItem>> ranks(3);
    for (int r = 0; r < 3; ++r) ranks[r].push_back(tensor_item("w", *t, {shard(t->shape, 1, 3, r)}));
    std::uint64_t rounds = 0;
    expect_all(run_ranks(std::move(ranks), round, HashAlgo::kSha256, &rounds), whole_hash({{"w", Value(t)}}));
    if (round == (std::uint64_t{1} << 20)) EXPECT_GE(rounds, 2u);  // at most one owned chunk per rank a round
  }
}

TEST(DcpLive, TwoDimensionalMeshWithReplicas) {
  // A (2, 2) mesh: (Shard(0), Shard(1)) on one tensor, (Replicate(), Shard(1)) on another.
  auto a = random_tensor(DType::kFloat64, {513, 1030}, 3);
  auto b = random_tensor(DType::kBFloat16, {300, 2000}, 4);
  std::vector<std::vector<LiveItem>> ranks(4);
  for (int r = 0; r < 4; ++r) {
    auto [o0, s0] = shard(a->shape, 0, 2, r / 2);
    auto [o1, s1] = shard(a->shape, 1, 2, r % 2);
    ranks[r].push_back(tensor_item("a", *a, {{{o0[0], o1[1]}, {s0[0], s1[1]}}}));
    ranks[r].push_back(tensor_item("b", *b, {shard(b->shape, 1, 2, r % 2)}));
  }
  expect_all(run_ranks(std::move(ranks), 2 << 20), whole_hash({{"a", Value(a)}, {"b", Value(b)}}));
}

TEST(DcpLive, XxhAndSmallTensorsAndValues) {
  auto big = random_tensor(DType::kInt64, {300000}, 5);
  auto zero = random_tensor(DType::kFloat32, {0, 3}, 6);
  auto scalar = random_tensor(DType::kFloat64, {}, 7);
  std::vector<std::vector<LiveItem>> ranks(2);
  for (int r = 0; r < 2; ++r) {
    LiveItem nested = tensor_item("l.0", *big, {shard(big->shape, 0, 2, r)});
    nested.path = {Value::str("l"), Value(0)};
    ranks[r].push_back(std::move(nested));
    ranks[r].push_back(tensor_item("z", *zero, {{{0, 0}, {0, 3}}}));
    if (r == 1) ranks[r].push_back(tensor_item("s", *scalar, {{{}, {}}}));  // only rank 1 holds it
    LiveItem step;
    step.fqn = "step";
    step.path = {Value::str("step")};
    step.value = Value(7);
    ranks[r].push_back(std::move(step));
  }
  Value list = Value::list({Value(big)});
  expect_all(run_ranks(std::move(ranks), 16 << 20, HashAlgo::kXxh3),
             whole_hash({{"l", list}, {"z", Value(zero)}, {"s", Value(scalar)}, {"step", Value(7)}}, HashAlgo::kXxh3));
}

TEST(DcpLive, ReplicasThatDifferAreNamedOnEveryRank) {
  auto t = random_tensor(DType::kFloat32, {400, 1000}, 8);
  auto u = random_tensor(DType::kFloat32, {400, 1000}, 9);
  std::vector<std::vector<LiveItem>> ranks(3);
  for (int r = 0; r < 3; ++r) ranks[r].push_back(tensor_item("w", r == 1 ? *u : *t, {{{0, 0}, {400, 1000}}}));
  std::vector<std::string> summaries;
  for (const auto& items : ranks) summaries.push_back(LiveHash::summary(items, HashAlgo::kSha256, 1));
  std::vector<LiveHash> hs;
  for (std::uint32_t r = 0; r < 3; ++r) hs.emplace_back(std::move(ranks[r]), summaries, r, HashAlgo::kSha256, 1);
  for (auto& h : hs) EXPECT_FALSE(h.next_round().has_value());  // replicas split chunks: nothing moves
  std::vector<std::string> partials;
  for (auto& h : hs) partials.push_back(h.partial());
  for (auto& h : hs) {
    try {
      (void)h.finish(partials);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.rule(), "dcp/replica-mismatch");
      EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ranks 0, 2 / rank 1"), std::string::npos) << e.what();
    }
  }
}

TEST(DcpLive, StatesTheRanksDisagreeAboutAreRefused) {
  auto t = random_tensor(DType::kFloat32, {10, 4}, 10);
  auto expect_rule = [](std::vector<std::vector<LiveItem>> ranks, const std::string& rule) {
    try {
      (void)run_ranks(std::move(ranks), 16 << 20);
      ADD_FAILURE() << "no error, expected " << rule;
    } catch (const Error& e) {
      EXPECT_EQ(e.rule(), rule) << e.what();
    }
  };
  {  // rows 5..9 are held by nobody
    std::vector<std::vector<LiveItem>> ranks(2);
    ranks[0].push_back(tensor_item("w", *t, {{{0, 0}, {5, 4}}}));
    ranks[1].push_back(tensor_item("w", *t, {}));
    expect_rule(std::move(ranks), "dcp/chunk-gap");
  }
  {  // overlapping blocks that are not replicas
    std::vector<std::vector<LiveItem>> ranks(2);
    ranks[0].push_back(tensor_item("w", *t, {{{0, 0}, {6, 4}}}));
    ranks[1].push_back(tensor_item("w", *t, {{{4, 0}, {6, 4}}}));
    expect_rule(std::move(ranks), "dcp/chunk-overlap");
  }
  {  // another global shape on rank 1
    auto t2 = random_tensor(DType::kFloat32, {10, 5}, 11);
    std::vector<std::vector<LiveItem>> ranks(2);
    ranks[0].push_back(tensor_item("w", *t, {{{0, 0}, {10, 4}}}));
    ranks[1].push_back(tensor_item("w", *t2, {{{0, 0}, {10, 5}}}));
    expect_rule(std::move(ranks), "dcp/live-state");
  }
  {  // a value that differs between ranks
    std::vector<std::vector<LiveItem>> ranks(2);
    for (int r = 0; r < 2; ++r) {
      LiveItem v;
      v.fqn = "lr";
      v.path = {Value::str("lr")};
      v.value = Value(0.1 * (r + 1));
      ranks[r].push_back(std::move(v));
    }
    expect_rule(std::move(ranks), "dcp/replica-mismatch");
  }
  {  // local data that does not match its block
    std::vector<std::vector<LiveItem>> ranks(1);
    LiveItem it = tensor_item("w", *t, {{{0, 0}, {10, 4}}});
    it.local[0].sizes = {9, 4};
    ranks[0].push_back(std::move(it));
    expect_rule(std::move(ranks), "dcp/live-state");
  }
}

}  // namespace
}  // namespace tensorseal
