// CRC32 of zip records: combine arithmetic, parallel verification, the verified CRC a
// storage carries into the canonical .pt writer, and hash_file's verification while
// hashing. Fixture: tests/fixtures/gen_crc.py (torch.save).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "core/storage_access.h"
#include "test_util.h"
#include "util/crc32.h"
#include "zip/reader.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path fixture(const std::string& name) { return testing::fixture_dir("gen_crc") / name; }

json records() { return json::parse(testing::read_all(fixture("manifest.json")))["big.pt"]["records"]; }

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
  return v;
}

class ZipCrcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tseal_zip_crc_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(fs::exists(fixture("big.pt"))) << "fixture gen_crc missing";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // big.pt with one byte of record `name` changed at `at` (offset inside the record).
  fs::path corrupt(const std::string& name, std::uint64_t at) {
    std::string bytes = testing::read_all(fixture("big.pt"));
    const auto off = records()[name]["data_offset"].get<std::uint64_t>() + at;
    bytes[off] = static_cast<char>(bytes[off] ^ 0x40);
    const fs::path p = dir_ / ("corrupt_" + std::to_string(off) + ".pt");
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

  fs::path dir_;
};

// ---- arithmetic --------------------------------------------------------------------

// torch.save under skip_data(): storage records with CRC 0 (bytes to be filled in
// later) read unchecked, as torch reads them, and named by a fact; other records checked.
TEST(ZipCrc, SkipDataStorageRecordsAreNotRecorded) {
  const Checkpoint c = read_file(fixture("skip_data.pt"));
  const auto& w = c.root.as_dict().find(Value::str("w"))->as_tensor();
  for (std::byte b : w->storage->bytes()) EXPECT_EQ(b, std::byte{0});  // torch.load gives zeros too
  bool named = false;
  for (const auto& f : c.facts) named |= f.topic == "zip.crc_skipped" && f.value == "data/0";
  EXPECT_TRUE(named);
}

TEST(ZipCrc, CombineEqualsCrcOfTheConcatenation) {
  const auto data = random_bytes(3 << 20, 7);
  const std::span<const std::byte> all(data);
  for (std::size_t cut : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{4096}, std::size_t{1} << 20,
                          data.size() - 1, data.size()}) {
    const auto a = all.first(cut), b = all.subspan(cut);
    EXPECT_EQ(detail::util::crc32_combine(detail::util::crc32(0, a), detail::util::crc32(0, b), b.size()),
              detail::util::crc32(0, all))
        << cut;
  }
  // Chained zeros: 5 MiB of them after 100 bytes.
  std::vector<std::byte> zeros(1 << 20);
  std::uint32_t chained = detail::util::crc32(0, all.first(100)), zeros_crc = 0;
  for (int i = 0; i < 5; ++i)
    chained = detail::util::crc32(chained, zeros), zeros_crc = detail::util::crc32(zeros_crc, zeros);
  EXPECT_EQ(detail::util::crc32_combine(detail::util::crc32(0, all.first(100)), zeros_crc, 5u << 20), chained);
  // Lengths past 2^32 (the high powers): combining is associative for any values.
  const std::uint64_t l1 = 3'000'000'017, l2 = (std::uint64_t{5} << 32) + 3;
  for (std::uint32_t a : {0u, 1u, 0x12345678u, 0xffffffffu})
    EXPECT_EQ(detail::util::crc32_combine(detail::util::crc32_combine(a, 0xcafef00d, l1), 0x0badf00d, l2),
              detail::util::crc32_combine(a, detail::util::crc32_combine(0xcafef00d, 0x0badf00d, l2), l1 + l2));
}

TEST(ZipCrc, VerifyCrcsReportsPrefixCrcsAndTheFirstMismatch) {
  const auto data = random_bytes((20 << 20) + 5, 11);  // 3 pieces of 8 MiB
  const std::span<const std::byte> all(data);
  detail::zip::Entry a, b;
  a.name = "archive/data/0";
  a.crc32 = detail::util::crc32(0, all);
  a.data_offset = 100;
  b.name = "archive/data/1";
  b.crc32 = detail::util::crc32(0, all.first(1000));
  b.data_offset = 200;
  std::vector<detail::zip::CrcCheck> checks{{a, all, 9 << 20}, {b, all.first(1000), 1000}, {a, all, 0}};
  for (unsigned threads : {1u, 2u, 5u}) {
    const auto prefix = detail::zip::verify_crcs(checks, "f.pt", threads);
    ASSERT_EQ(prefix.size(), 3u);
    EXPECT_EQ(prefix[0], detail::util::crc32(0, all.first(9 << 20)));
    EXPECT_EQ(prefix[1], b.crc32);
    EXPECT_EQ(prefix[2], 0u);
  }
  // Two bad records: the first one is named, at its data offset.
  checks[1].entry.crc32 ^= 1;
  checks[2].entry.crc32 ^= 1;
  checks[2].entry.name = "archive/data/2";
  try {
    detail::zip::verify_crcs(checks, "f.pt", 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.rule(), "zip/crc-mismatch");
    EXPECT_EQ(e.offset(), 200u);
    EXPECT_NE(std::string(e.what()).find("archive/data/1"), std::string::npos) << e.what();
  }
}

// ---- reader: verified CRCs on storages ----------------------------------------------

TEST_F(ZipCrcTest, StoragesOfWholeRecordsCarryTheirVerifiedCrc) {
  const Checkpoint c = read_file(fixture("big.pt"));
  const json rec = records();
  int whole = 0;
  for (const auto& ref : collect_tensors(c.root)) {
    const Storage& s = *ref.tensor->storage;
    ASSERT_TRUE(s.verified_crc32().has_value()) << ref.path;
    EXPECT_EQ(*s.verified_crc32(), detail::util::crc32(0, s.bytes())) << ref.path;
    // Every storage here is a whole record: its CRC is the archive's.
    bool found = false;
    for (const auto& [name, r] : rec.items())
      if (r["data_offset"].get<std::uint64_t>() == s.file_offset() && r["size"].get<std::uint64_t>() == s.size()) {
        EXPECT_EQ(*s.verified_crc32(), r["crc32"].get<std::uint32_t>()) << name;
        found = true;
      }
    EXPECT_TRUE(found) << ref.path;
    ++whole;
  }
  EXPECT_EQ(whole, 5);
  // Unverified reads carry none; neither do slices.
  ReadOptions no_crc;
  no_crc.verify_checksums = false;
  const Checkpoint u = read_file(fixture("big.pt"), no_crc);
  for (const auto& ref : collect_tensors(u.root)) EXPECT_FALSE(ref.tensor->storage->verified_crc32()) << ref.path;
  const auto& any = collect_tensors(c.root).front().tensor->storage;
  EXPECT_FALSE(Storage::slice(any, 0, any->size())->verified_crc32());
}

// ---- canonical .pt writer ------------------------------------------------------------

TEST_F(ZipCrcTest, CanonicalPtBytesDoNotDependOnReusedCrcs) {
  ReadOptions no_crc;
  no_crc.verify_checksums = false;
  for (const fs::path& p :
       {fixture("big.pt"), testing::fixture_dir("gen_torch") / "views.pt",
        testing::fixture_dir("gen_torch") / "tied.pt", testing::fixture_dir("gen_torch") / "state_dict.pt"}) {
    const std::string reused = write_bytes(read_file(p).root, Format::kTorchZip);
    const std::string fresh = write_bytes(read_file(p, no_crc).root, Format::kTorchZip);  // every CRC computed
    EXPECT_EQ(sha256_hex(testing::bytes_of(reused)), sha256_hex(testing::bytes_of(fresh))) << p;
    // And the output verifies.
    EXPECT_NO_THROW(read_bytes(testing::bytes_of(reused), "out.pt")) << p;
  }
}

// A wrong CRC planted on a storage shows which records reuse it: a tensor covering
// the whole storage writes it (so the output fails verification), a window of the
// same storage gets a freshly computed one (so it verifies).
TEST_F(ZipCrcTest, OnlyWholeStoragesReuseTheCrcWindowsComputeTheirs) {
  std::vector<std::byte> bytes(4096);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7);
  auto storage = Storage::owned(bytes, DType::kFloat32);
  detail::core::StorageAccess::set_verified_crc32(*storage,
                                                  detail::util::crc32(0, storage->bytes()) ^ 0xdeadbeef);  // wrong
  auto make = [&](std::int64_t offset, std::int64_t n) {
    auto t = std::make_shared<Tensor>();
    t->dtype = DType::kFloat32;
    t->shape = {n};
    t->strides = {1};
    t->storage_offset = offset;
    t->storage = storage;
    return Value(std::shared_ptr<const Tensor>(t));
  };
  auto one = [&](std::int64_t offset, std::int64_t n) {
    Value d = Value::dict();
    d.as_dict().set(Value::str("w"), make(offset, n));
    return d;
  };
  const std::string whole = write_bytes(one(0, 1024), Format::kTorchZip);
  EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(whole), "whole.pt"); }), "zip/crc-mismatch");

  for (auto [offset, n] : {std::pair<std::int64_t, std::int64_t>{0, 1000}, {24, 1000}, {1, 1023}}) {
    const std::string window = write_bytes(one(offset, n), Format::kTorchZip);
    const Checkpoint back = read_bytes(testing::bytes_of(window), "window.pt");  // verifies every CRC
    const auto refs = collect_tensors(back.root);
    ASSERT_EQ(refs.size(), 1u);
    EXPECT_EQ(
        sha256_hex(refs[0].tensor->storage->bytes()),
        sha256_hex(storage->bytes().subspan(static_cast<std::size_t>(offset) * 4, static_cast<std::size_t>(n) * 4)));
  }
}

// ---- hash_file -----------------------------------------------------------------------

TEST_F(ZipCrcTest, HashFileEqualsContentHashOfReadFile) {
  std::vector<fs::path> files{fixture("big.pt")};
  for (const auto& e : fs::directory_iterator(testing::fixture_dir("gen_torch")))
    if (e.path().extension() == ".pt" && e.path().filename() != "torchscript.pt") files.push_back(e.path());
  ASSERT_GT(files.size(), 10u);
  for (const auto& f : files) {
    for (HashAlgo algo : {HashAlgo::kSha256, HashAlgo::kXxh3})
      for (unsigned threads : {1u, 2u}) {
        HashOptions o;
        o.algo = algo;
        o.threads = threads;
        EXPECT_EQ(hash_file(f, o), content_hash(read_file(f).root, o)) << f;
      }
  }
}

TEST_F(ZipCrcTest, OneCorruptByteFailsReadHashCanonAndConvert) {
  const fs::path tseal = fs::path(TENSORSEAL_BINARY_DIR) / "tseal";
  ASSERT_TRUE(fs::exists(tseal)) << "tseal not built";
  const json rec = records();
  // data/0: tensor "big" (fused pieces); data/2 past the 4000 bytes "head" reaches
  // (CRC-only piece); data/3: the transposed "t" (gathered, CRC-only); data.pkl.
  for (auto [name, at] : {std::pair<std::string, std::uint64_t>{"data/0", 4'600'001},
                          {"data/0", 0},
                          {"data/2", 3'999'000},
                          {"data/3", 77},
                          {"data.pkl", 20}}) {
    const fs::path bad = corrupt(name, at);
    const std::string where = "big/" + name;  // torch names the folder after the file
    const auto offset = rec[name]["data_offset"].get<std::uint64_t>();
    std::string read_error;
    try {
      (void)read_file(bad);
      ADD_FAILURE() << "read_file accepted " << name;
    } catch (const Error& e) {
      EXPECT_EQ(e.rule(), "zip/crc-mismatch") << name;
      EXPECT_EQ(e.offset(), offset) << name;
      EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
      read_error = e.what();
    }
    for (HashAlgo algo : {HashAlgo::kSha256, HashAlgo::kXxh3})
      for (unsigned threads : {1u, 2u}) {
        HashOptions o;
        o.algo = algo;
        o.threads = threads;
        try {
          (void)hash_file(bad, o);
          ADD_FAILURE() << "hash_file accepted " << name;
        } catch (const Error& e) {
          EXPECT_EQ(std::string(e.what()), read_error) << name;  // same rule, entry, offset, values
        }
      }
    const fs::path out_pt = dir_ / "out.pt", out_st = dir_ / "out.safetensors";
    for (const std::string args :
         {"hash " + bad.string(), "hash --fast " + bad.string(), "hash --threads 1 " + bad.string(),
          "canon " + bad.string() + " -o " + out_pt.string(), "convert " + bad.string() + " " + out_st.string()}) {
      const std::string cmd = tseal.string() + " " + args + " 2>&1";
      FILE* p = ::popen(cmd.c_str(), "r");
      ASSERT_NE(p, nullptr);
      std::string text;
      char buf[4096];
      for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
      const int status = ::pclose(p);
      ASSERT_TRUE(WIFEXITED(status)) << args;
      EXPECT_EQ(WEXITSTATUS(status), 2) << args << "\n" << text;
      EXPECT_NE(text.find("zip/crc-mismatch"), std::string::npos) << args << "\n" << text;
      EXPECT_NE(text.find(where), std::string::npos) << args << "\n" << text;
      EXPECT_EQ(text.find("sha256:"), std::string::npos) << args << "\n" << text;  // no digest printed
      EXPECT_EQ(text.find("xxh3:"), std::string::npos) << args << "\n" << text;
    }
    EXPECT_FALSE(fs::exists(out_pt)) << name;
    EXPECT_FALSE(fs::exists(out_st)) << name;
    for (const auto& e : fs::directory_iterator(dir_))  // no temp file left either
      EXPECT_EQ(e.path().extension(), ".pt") << e.path();
  }
}

// Views, tied weights and slices (shared storages, offsets, overlapping chunks): a flip
// of the first, middle or last byte of any storage record fails hash_file exactly as it
// fails read_file.
TEST_F(ZipCrcTest, HashFileCatchesAFlipInEveryStorageRecordOfRealFiles) {
  int flips = 0;
  for (const char* name : {"views.pt", "tied.pt", "state_dict.pt", "params.pt", "dtypes.pt"}) {
    const fs::path src = testing::fixture_dir("gen_torch") / name;
    const std::string bytes = testing::read_all(src);
    const detail::zip::Archive ar = detail::zip::read(testing::bytes_of(bytes), name, Limits{});
    for (const detail::zip::Entry& e : ar.entries) {
      if (e.name.find("/data/") == std::string::npos || e.size == 0) continue;
      for (std::uint64_t at : {std::uint64_t{0}, e.size / 2, e.size - 1}) {
        std::string bad = bytes;
        bad[e.data_offset + at] = static_cast<char>(bad[e.data_offset + at] ^ 1);
        const fs::path p = dir_ / name;
        std::ofstream(p, std::ios::binary | std::ios::trunc) << bad;
        std::string want, got;
        try {
          (void)read_file(p);
        } catch (const Error& err) {
          want = err.what();
        }
        try {
          (void)hash_file(p, HashOptions{HashAlgo::kXxh3, 2});
        } catch (const Error& err) {
          got = err.what();
        }
        EXPECT_NE(want.find("zip/crc-mismatch"), std::string::npos) << name << " " << e.name << " @" << at;
        EXPECT_EQ(got, want) << name << " " << e.name << " @" << at;
        ++flips;
      }
    }
  }
  EXPECT_GT(flips, 30);
}

// hash_files: every file's result equals hash_file's (digest or the very same error),
// in the order given, whatever the thread count; a corrupt or missing file among good
// ones fails alone (its checksum errors are not lost in the shared job pool).
TEST_F(ZipCrcTest, HashFilesEqualsHashFileOfEachFile) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(testing::fixture_dir("gen_torch")))
    if (e.path().extension() == ".pt" && e.path().filename() != "torchscript.pt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GT(files.size(), 10u);
  files.insert(files.begin() + 3, corrupt("data/0", 4'600'001));
  files.insert(files.begin() + 1, fixture("big.pt"));
  files.push_back(corrupt("data/3", 77));
  files.insert(files.begin() + 5, dir_ / "absent.pt");
  files.push_back(fixture("manifest.json"));  // not a checkpoint
  for (HashAlgo algo : {HashAlgo::kSha256, HashAlgo::kXxh3})
    for (unsigned threads : {1u, 2u, 3u}) {
      HashOptions o;
      o.algo = algo;
      o.threads = threads;
      const std::vector<FileHash> got = hash_files(files, o);
      ASSERT_EQ(got.size(), files.size());
      int failed = 0;
      for (std::size_t i = 0; i < files.size(); ++i) {
        std::string want, want_error, got_error;
        try {
          want = hash_file(files[i], o);
        } catch (const Error& e) {
          want_error = e.what();
        }
        try {
          if (got[i].error) std::rethrow_exception(got[i].error);
        } catch (const Error& e) {
          got_error = e.what();
        }
        EXPECT_EQ(got[i].digest, want) << files[i];
        EXPECT_EQ(got_error, want_error) << files[i];
        failed += !want_error.empty();
      }
      EXPECT_EQ(failed, 4);
    }
  EXPECT_TRUE(hash_files({}).empty());
}

TEST_F(ZipCrcTest, CliHashOfAGoodFileMatchesTheLibrary) {
  const fs::path tseal = fs::path(TENSORSEAL_BINARY_DIR) / "tseal";
  ASSERT_TRUE(fs::exists(tseal)) << "tseal not built";
  const std::string f = fixture("big.pt").string();
  for (const char* flag : {"", "--fast "}) {
    FILE* p = ::popen((tseal.string() + " hash " + flag + f).c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[512] = {};
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, p);
    EXPECT_EQ(WEXITSTATUS(::pclose(p)), 0);
    HashOptions o;
    o.algo = *flag ? HashAlgo::kXxh3 : HashAlgo::kSha256;
    EXPECT_EQ(std::string(buf, n), content_hash(read_file(f).root, o) + "  " + f + "\n");
  }
}

}  // namespace
}  // namespace tensorseal
