// Concurrency: many threads reading, hashing, scanning, writing and diffing the same
// and different files at once give exactly the single-threaded results. Run under
// ThreadSanitizer by scripts/sanitize.sh thread (build-tsan/), which must report nothing.
//
// Files: the real torch (2.13 and 1.13: zip, legacy, pickle), safetensors and numpy
// fixtures. Every file is first processed on one thread to get the expected results
// (content hash, per-tensor sha256, scan verdict, canonical bytes, or the error rule);
// then threads process them again in different orders, some sharing one Checkpoint
// object (const use of shared values and storages from many threads), some reading
// the file afresh, some with the library's own worker threads on top.
#include <tensorseal/diff.h>
#include <tensorseal/scan.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

struct Expected {
  std::string error_rule;  // non-empty: reading fails with this rule
  std::string content_hash;
  std::vector<std::string> tensor_sha;
  Verdict verdict = Verdict::kSafe;
  std::size_t findings = 0;
  std::string canonical;  // canonical bytes in the file's family ("" if not writable)
};

Format family(Format f) {
  return (f == Format::kSafetensors || f == Format::kNpy || f == Format::kNpz) ? f : Format::kTorchZip;
}

// What one thread computes for one file. `threads` is passed to the library.
Expected compute(const Checkpoint& c, unsigned threads) {
  Expected e;
  e.content_hash = content_hash(c.root, {HashAlgo::kSha256, threads});
  for (const auto& t : collect_tensors(c.root)) e.tensor_sha.push_back(tensor_sha256(*t.tensor));
  const ScanReport r = scan(c);
  e.verdict = r.verdict;
  e.findings = r.findings.size();
  try {
    WriteOptions w;
    w.threads = threads;
    if (c.format == Format::kSafetensors) w.metadata = c.metadata;
    e.canonical = write_bytes(c.root, family(c.format), w);
  } catch (const Error& err) {
    e.canonical = std::string("error:") + err.rule();
  }
  return e;
}

Expected compute_file(const fs::path& p, unsigned threads) {
  try {
    return compute(read_file(p), threads);
  } catch (const Error& err) {
    Expected e;
    e.error_rule = err.rule();
    return e;
  }
}

void expect_same(const Expected& want, const Expected& got, const std::string& what) {
  EXPECT_EQ(want.error_rule, got.error_rule) << what;
  EXPECT_EQ(want.content_hash, got.content_hash) << what;
  EXPECT_EQ(want.tensor_sha, got.tensor_sha) << what;
  EXPECT_EQ(want.verdict, got.verdict) << what;
  EXPECT_EQ(want.findings, got.findings) << what;
  EXPECT_TRUE(want.canonical == got.canonical) << what << ": canonical bytes differ";
}

std::vector<fs::path> fixture_files() {
  std::vector<fs::path> files;
  for (const char* gen : {"gen_torch", "gen_torch_t113", "gen_safetensors", "gen_numpy", "gen_numpy_t113"}) {
    const fs::path dir = testing::fixture_dir(gen);
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> here;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!e.is_regular_file() || e.file_size() > (1u << 20)) continue;
      const auto ext = e.path().extension();
      if (ext == ".pt" || ext == ".pkl" || ext == ".safetensors" || ext == ".npy" || ext == ".npz")
        here.push_back(e.path());
    }
    std::sort(here.begin(), here.end());
    if (here.size() > 16) here.resize(16);  // bounded, so the TSan run stays short
    files.insert(files.end(), here.begin(), here.end());
  }
  return files;
}

constexpr int kThreads = 8;

class Concurrency : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    files_ = new std::vector<fs::path>(fixture_files());
    expected_ = new std::vector<Expected>();
    for (const auto& f : *files_) expected_->push_back(compute_file(f, 1));
  }
  static void TearDownTestSuite() {
    delete files_;
    delete expected_;
  }
  void SetUp() override {
    ASSERT_GE(files_->size(), 20u) << "fixtures missing: run the fixture_* tests (ctest) first";
    std::size_t ok = 0;
    for (const auto& e : *expected_) ok += e.error_rule.empty();
    ASSERT_GE(ok, 20u);
  }
  static std::vector<fs::path>* files_;
  static std::vector<Expected>* expected_;
};
std::vector<fs::path>* Concurrency::files_ = nullptr;
std::vector<Expected>* Concurrency::expected_ = nullptr;

// Every thread reads every file itself, in its own order; half of them also use the
// library's worker threads (threads = 0: all cores) for hashing and writing.
TEST_F(Concurrency, ReadHashScanWriteDifferentOrders) {
  std::vector<std::thread> pool;
  std::atomic<int> done{0};
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<std::size_t> order(files_->size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), std::mt19937(t));
      for (std::size_t i : order) {
        expect_same((*expected_)[i], compute_file((*files_)[i], t % 2 ? 0 : 1),
                    (*files_)[i].string() + " on thread " + std::to_string(t));
        done++;
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(done.load(), kThreads * static_cast<int>(files_->size()));
}

// One Checkpoint per file shared by all threads: concurrent const use of the same
// value tree, tensors and storages (views of one memory map).
TEST_F(Concurrency, SharedCheckpoints) {
  std::vector<std::shared_ptr<const Checkpoint>> shared;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < files_->size(); ++i) {
    if (!(*expected_)[i].error_rule.empty()) continue;
    shared.push_back(std::make_shared<const Checkpoint>(read_file((*files_)[i])));
    index.push_back(i);
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      for (std::size_t k = 0; k < shared.size(); ++k) {
        const std::size_t j = (k + static_cast<std::size_t>(t) * 5) % shared.size();
        expect_same((*expected_)[index[j]], compute(*shared[j], t % 3 == 0 ? 0 : 1),
                    (*files_)[index[j]].string() + " shared, thread " + std::to_string(t));
      }
    });
  }
  for (auto& th : pool) th.join();
}

// Diffs: the same pairs from many threads (and the library's own diff workers) give
// the same JSON report as on one thread; pairs share Checkpoints across threads.
TEST_F(Concurrency, DiffSameAndDifferentPairs) {
  std::vector<std::shared_ptr<const Checkpoint>> cps;
  for (std::size_t i = 0; i < files_->size(); ++i)
    if ((*expected_)[i].error_rule.empty()) cps.push_back(std::make_shared<const Checkpoint>(read_file((*files_)[i])));
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  for (std::size_t i = 0; i < cps.size(); ++i) pairs.push_back({i, (i + 1) % cps.size()});
  for (std::size_t i = 0; i < cps.size(); ++i) pairs.push_back({i, i});
  std::vector<std::string> want;
  for (auto [a, b] : pairs) {
    DiffOptions o;
    o.threads = 1;
    want.push_back(to_json(diff(*cps[a], *cps[b], o)));
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      for (std::size_t k = 0; k < pairs.size(); ++k) {
        const std::size_t j = (k * 7 + static_cast<std::size_t>(t)) % pairs.size();
        DiffOptions o;
        o.threads = t % 2 ? 0 : 1;
        o.ulp = 0;
        const auto [a, b] = pairs[j];
        EXPECT_EQ(want[j], to_json(diff(*cps[a], *cps[b], o))) << "pair " << j << " thread " << t;
      }
    });
  }
  for (auto& th : pool) th.join();
}

// read_bytes of the same buffer from many threads at once (each gets its own copy).
TEST_F(Concurrency, ReadBytesOfOneBuffer) {
  std::vector<std::string> bufs;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < files_->size(); i += 3) {
    bufs.push_back(testing::read_all((*files_)[i]));
    index.push_back(i);
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&] {
      for (std::size_t k = 0; k < bufs.size(); ++k) {
        Expected got;
        try {
          got = compute(read_bytes(testing::bytes_of(bufs[k]), "buf"), 1);
        } catch (const Error& e) {
          got.error_rule = e.rule();
        }
        expect_same((*expected_)[index[k]], got, (*files_)[index[k]].string() + " from bytes");
      }
    });
  }
  for (auto& th : pool) th.join();
}

// Dict::find from many threads on one Dict whose index is not built yet: the threads
// race to build it (under the Dict's mutex) and all see every key.
TEST(ConcurrencyDict, FindFromManyThreads) {
  for (int round = 0; round < 4; ++round) {
    Value v = Value::dict();
    Dict& d = v.as_dict();
    constexpr int kKeys = 2000;
    for (int i = 0; i < kKeys; ++i) d.items.emplace_back(Value::str("k" + std::to_string(i)), Value(i));
    std::atomic<int> wrong{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 8; ++t) {
      pool.emplace_back([&, t] {
        for (int i = 0; i < kKeys; ++i) {
          const int k = (i * 7 + t * 131) % kKeys;
          const Value* got = d.find(std::string_view("k" + std::to_string(k)));
          if (got == nullptr || got->as_int() != k) ++wrong;
        }
        if (d.find(std::string_view("missing")) != nullptr) ++wrong;
      });
    }
    for (auto& th : pool) th.join();
    EXPECT_EQ(wrong.load(), 0);
  }
}

}  // namespace
}  // namespace tensorseal
