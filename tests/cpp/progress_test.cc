// The progress contract (tensorseal/progress.h) as the library keeps it: the meter
// under many threads, and hash / write / verify / inspect / canon --check reporting
// every byte they read or write, monotone, ending at done == total, and a throwing
// callback stopping the work with nothing written.
#include "util/progress.h"

#include <unistd.h>

#include <atomic>
#include <thread>

#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

struct Recorder {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  std::atomic<int> inside{0};
  bool overlapped = false;
  Progress fn() {
    return [this](std::uint64_t done, std::uint64_t total) {
      if (inside.fetch_add(1) != 0) overlapped = true;
      calls.emplace_back(done, total);
      std::this_thread::yield();
      inside.fetch_sub(1);
    };
  }
  // Monotone, never past the total, one total, ending at it.
  void expect_contract(std::uint64_t total) const {
    ASSERT_FALSE(calls.empty());
    EXPECT_FALSE(overlapped);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].second, total);
      EXPECT_LE(calls[i].first, total);
      if (i) EXPECT_LE(calls[i - 1].first, calls[i].first);
    }
    EXPECT_EQ(calls.back().first, total);
    EXPECT_LE(calls.size(), detail::util::ProgressMeter::kSteps + 2);
  }
};

TEST(Progress, MeterIsSerialisedMonotoneAndFinishesAtTotal) {
  Recorder rec;
  const Progress fn = rec.fn();
  constexpr std::uint64_t kTotal = 1'000'003;
  detail::util::ProgressMeter meter(&fn, kTotal);
  std::vector<std::thread> threads;
  std::atomic<std::uint64_t> next{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (std::uint64_t i; (i = next.fetch_add(997)) < kTotal;) meter.add(std::min<std::uint64_t>(997, kTotal - i));
    });
  for (auto& t : threads) t.join();
  meter.finish();
  rec.expect_contract(kTotal);
  EXPECT_GT(rec.calls.size(), 100u);  // the bar moves: about one call per 1/512
}

TEST(Progress, NullCallbackCostsNothing) {
  detail::util::ProgressMeter meter(nullptr, 100);
  EXPECT_FALSE(meter.active());
  meter.add(50);
  meter.finish();
  const Progress empty;
  EXPECT_FALSE(detail::util::ProgressMeter(&empty, 100).active());
}

// 6 MiB of float32 in two tensors: more than one 1 MiB hash unit and one 8 MiB write
// piece boundary away from trivial.
Value model() {
  Value v = Value::dict();
  for (int k = 0; k < 2; ++k) {
    std::vector<std::byte> bytes(std::size_t{3} << 20);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(static_cast<unsigned char>(i * 31 + k));
    v.as_dict().set(Value::str(k ? "b" : "a"),
                    Value(std::shared_ptr<const Tensor>(make_contiguous(
                        DType::kFloat32, {std::int64_t{3} << 18}, Storage::owned(std::move(bytes), DType::kFloat32)))));
  }
  return v;
}
constexpr std::uint64_t kModelBytes = std::uint64_t{6} << 20;

class ProgressFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "tseal-progress-XXXXXX").string();
    dir_ = ::mkdtemp(t.data());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(ProgressFiles, WriteHashVerifyInspectCheckReportEveryByte) {
  const fs::path pt = dir_ / "m.pt";
  {
    Recorder rec;
    WriteOptions o;
    o.progress = rec.fn();
    write_file(model(), pt, Format::kTorchZip, o);
    rec.expect_contract(kModelBytes);
  }
  {
    Recorder rec;
    HashOptions o;
    o.progress = rec.fn();
    const std::string with = hash_file(pt, o);
    rec.expect_contract(kModelBytes);  // each storage record is exactly its tensor's bytes
    EXPECT_EQ(with, hash_file(pt));    // progress never changes the result
  }
  {
    Recorder rec;
    VerifyOptions o;
    o.progress = rec.fn();
    EXPECT_EQ(verify_file(pt, o).status, VerifyStatus::kOk);
    rec.expect_contract(kModelBytes);
  }
  {
    Recorder rec;
    InspectOptions o;
    o.progress = rec.fn();
    const InspectReport r = inspect_file(pt, o);
    rec.expect_contract(2 * kModelBytes);  // per-tensor SHA-256, then the content hash
    EXPECT_EQ(r.content_hash, hash_file(pt));
  }
  {
    Recorder rec;
    CanonCheckOptions o;
    o.progress = rec.fn();
    EXPECT_TRUE(check_canonical_file(pt, o).canonical);
    rec.expect_contract(kModelBytes);
  }
  for (const Format dir_format : {Format::kHfShards, Format::kDcp}) {
    Recorder rec;
    WriteOptions o;
    o.progress = rec.fn();
    set_option(o.format_options, Format::kHfShards, "max_shard_size", std::to_string(4 << 20));
    set_option(o.format_options, Format::kDcp, "world_size", "2");
    write_file(model(), dir_ / std::string(format_name(dir_format)), dir_format, o);
    rec.expect_contract(kModelBytes);
  }
}

TEST_F(ProgressFiles, ThrowingCallbackStopsTheWriteAndLeavesNothing) {
  WriteOptions o;
  o.progress = [](std::uint64_t done, std::uint64_t) {
    if (done > 0) throw Error(rules::kInvalidArgument, "stopped by the caller");
  };
  for (const Format f : {Format::kTorchZip, Format::kSafetensors, Format::kHfShards}) {
    const fs::path target = dir_ / ("out." + std::string(format_name(f)));
    EXPECT_EQ(testing::rule_of([&] { write_file(model(), target, f, o); }), "api/invalid-argument");
    EXPECT_FALSE(fs::exists(target));
  }
  EXPECT_TRUE(fs::is_empty(dir_));  // no temp file or staging directory left behind
  HashOptions h;
  h.progress = o.progress;
  write_file(model(), dir_ / "m.pt", Format::kTorchZip);
  EXPECT_EQ(testing::rule_of([&] { (void)hash_file(dir_ / "m.pt", h); }), "api/invalid-argument");
}

}  // namespace
}  // namespace tensorseal
