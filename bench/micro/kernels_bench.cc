// Microbenchmarks of the kernels that bound the CLI's throughput:
//   - content-hash chunk hashing (SHA-256 via OpenSSL, XXH3-128 via xxHash) on the
//     1 MiB chunks the content hash cuts tensors into, and the whole content hash of
//     an in-memory checkpoint on 1 and 2 threads;
//   - CRC32 (ISA-L, what the zip reader/writer use) beside libdeflate's and zlib's;
//   - element decoding as diff does it (float32 / float16 / bfloat16 -> double);
//   - the limits: memory read bandwidth (a sum) and memcpy.
// Run: build/bench/micro/tensorseal_micro (or `make bench`, which runs it via bench/run.py).
#include <benchmark/benchmark.h>
#include <libdeflate.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "hash/digest.h"
#include "tensorseal/hash.h"
#include "tensorseal/storage.h"
#include "tensorseal/tensor.h"
#include "tensorseal/value.h"
#include "tools/elements.h"
#include "util/crc32.h"

namespace {

using namespace tensorseal;

constexpr std::size_t kChunk = std::size_t{1} << 20;
constexpr std::size_t kBig = std::size_t{256} << 20;  // past every cache: memory-bound

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed = 1) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    const std::uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  return v;
}

void BM_ChunkSha256(benchmark::State& state) {
  const auto data = random_bytes(kChunk);
  for (auto _ : state) benchmark::DoNotOptimize(detail::hash::Digest::oneshot(HashAlgo::kSha256, data));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kChunk));
}
BENCHMARK(BM_ChunkSha256);

void BM_ChunkXxh3(benchmark::State& state) {
  const auto data = random_bytes(kChunk);
  for (auto _ : state) benchmark::DoNotOptimize(detail::hash::Digest::oneshot(HashAlgo::kXxh3, data));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kChunk));
}
BENCHMARK(BM_ChunkXxh3);

// content_hash of {"t0".."t7": float32 [8M]} (256 MiB, owned memory): chunk hashing on
// all threads plus the per-tensor and root digests. Args: algo (0 sha256, 1 xxh3), threads.
void BM_ContentHash(benchmark::State& state) {
  static const Value root = [] {
    auto d = std::make_shared<Dict>();
    for (int i = 0; i < 8; ++i) {
      auto s = Storage::owned(random_bytes(kBig / 8, 10 + i), DType::kFloat32);
      auto t = make_contiguous(DType::kFloat32, {static_cast<std::int64_t>(kBig / 8 / 4)}, s);
      d->items.emplace_back(Value::str("t" + std::to_string(i)), Value(t));
    }
    return Value(d);
  }();
  HashOptions o;
  o.algo = state.range(0) == 0 ? HashAlgo::kSha256 : HashAlgo::kXxh3;
  o.threads = static_cast<unsigned>(state.range(1));
  for (auto _ : state) benchmark::DoNotOptimize(content_hash(root, o));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBig));
  state.SetLabel(std::string(o.algo == HashAlgo::kSha256 ? "sha256" : "xxh3") + ", threads " +
                 std::to_string(o.threads));
}
BENCHMARK(BM_ContentHash)->Args({0, 1})->Args({0, 2})->Args({1, 1})->Args({1, 2})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Crc32Isal(benchmark::State& state) {
  const auto data = random_bytes(kChunk);
  for (auto _ : state) benchmark::DoNotOptimize(detail::util::crc32(0, data));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kChunk));
}
BENCHMARK(BM_Crc32Isal);

void BM_Crc32Libdeflate(benchmark::State& state) {
  const auto data = random_bytes(kChunk);
  for (auto _ : state) benchmark::DoNotOptimize(libdeflate_crc32(0, data.data(), data.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kChunk));
}
BENCHMARK(BM_Crc32Libdeflate);

void BM_Crc32Zlib(benchmark::State& state) {
  const auto data = random_bytes(kChunk);
  for (auto _ : state)
    benchmark::DoNotOptimize(::crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kChunk));
}
BENCHMARK(BM_Crc32Zlib);

// diff's inner loop shape: decode both sides' elements to double and accumulate |a-b|.
void BM_ElementDecode(benchmark::State& state) {
  const DType dt = state.range(0) == 0 ? DType::kFloat32 : state.range(0) == 1 ? DType::kFloat16 : DType::kBFloat16;
  const detail::tools::ElementCodec& c = detail::tools::codec(dt);
  const std::size_t n = std::size_t{1} << 20;
  const auto a = random_bytes(n * c.size, 3), b = random_bytes(n * c.size, 4);
  for (auto _ : state) {
    double acc = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double x = detail::tools::component_value(c, a.data() + i * c.size);
      const double y = detail::tools::component_value(c, b.data() + i * c.size);
      if (x == x && y == y) acc += std::abs(x - y);
    }
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * c.size * 2));
  state.SetLabel(std::string(name(dt)));
}
BENCHMARK(BM_ElementDecode)->Arg(0)->Arg(1)->Arg(2);

// The limits: reading 256 MiB once (a sum the compiler vectorises) and copying it.
void BM_MemRead(benchmark::State& state) {
  std::vector<std::uint64_t> v(kBig / 8, 1);
  for (auto _ : state) {
    std::uint64_t s = std::accumulate(v.begin(), v.end(), std::uint64_t{0});
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBig));
}
BENCHMARK(BM_MemRead)->Unit(benchmark::kMillisecond);

void BM_Memcpy(benchmark::State& state) {
  std::vector<std::byte> a(kBig, std::byte{1}), b(kBig, std::byte{2});
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), kBig);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBig));
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);

}  // namespace
