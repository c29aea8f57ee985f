// verify: intact, corrupt and unreadable files; embedded content hashes.
#include "tensorseal/verify.h"

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace tensorseal {
namespace {

using nlohmann::json;

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tseal_verify_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return dir_ / name;
  }
  std::filesystem::path dir_;
};

TEST_F(VerifyTest, IntactFile) {
  VerifyResult r = verify_file(testing::tools_fixture("base.safetensors"));
  EXPECT_EQ(r.status, VerifyStatus::kOk) << r.message;
  EXPECT_EQ(r.format, "safetensors");
  EXPECT_EQ(r.tensors, 6u);
  EXPECT_FALSE(r.content_hash_checked);
  EXPECT_TRUE(r.message.empty());
}

TEST_F(VerifyTest, TruncatedFileIsCorrupt) {
  const std::string good = testing::read_all(testing::tools_fixture("base.safetensors"));
  VerifyResult r = verify_file(write("cut.safetensors", good.substr(0, good.size() - 10)));
  EXPECT_EQ(r.status, VerifyStatus::kCorrupt);
  EXPECT_EQ(r.rule, "safetensors/buffer-length");
  EXPECT_NE(r.message.find("cut.safetensors"), std::string::npos);
  EXPECT_TRUE(r.offset.has_value());
}

TEST_F(VerifyTest, UnknownFormatAndMissingFileAreErrors) {
  VerifyResult r = verify_file(write("notes.txt", "hello, not a checkpoint\n"));
  EXPECT_EQ(r.status, VerifyStatus::kError);
  EXPECT_EQ(r.rule, "detect/unknown-format");
  VerifyResult m = verify_file(dir_ / "missing.safetensors");
  EXPECT_EQ(m.status, VerifyStatus::kError);
  EXPECT_EQ(m.rule, "io/open");
}

TEST_F(VerifyTest, EmbeddedContentHashIsRecomputed) {
  Checkpoint c = read_file(testing::tools_fixture("base.safetensors"));
  const std::string h = content_hash(c.root);
  WriteOptions o;
  o.fsync = false;
  o.metadata = {{std::string(kContentHashMetadataKey), h}};
  write_file(c.root, dir_ / "sealed.safetensors", Format::kSafetensors, o);
  VerifyResult ok = verify_file(dir_ / "sealed.safetensors");
  EXPECT_EQ(ok.status, VerifyStatus::kOk) << ok.message;
  EXPECT_TRUE(ok.content_hash_checked);

  HashOptions fast;
  fast.algo = HashAlgo::kXxh3;
  o.metadata = {{std::string(kContentHashMetadataKey), content_hash(c.root, fast)}};
  write_file(c.root, dir_ / "sealed_xxh3.safetensors", Format::kSafetensors, o);
  EXPECT_EQ(verify_file(dir_ / "sealed_xxh3.safetensors").status, VerifyStatus::kOk);

  // The hash of other content: corrupt.
  std::string wrong = h;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  o.metadata = {{std::string(kContentHashMetadataKey), wrong}};
  write_file(c.root, dir_ / "tampered.safetensors", Format::kSafetensors, o);
  VerifyResult bad = verify_file(dir_ / "tampered.safetensors");
  EXPECT_EQ(bad.status, VerifyStatus::kCorrupt);
  EXPECT_EQ(bad.rule, "verify/content-hash-mismatch");
  EXPECT_NE(bad.message.find(wrong), std::string::npos);

  o.metadata = {{std::string(kContentHashMetadataKey), "md5:1234"}};
  write_file(c.root, dir_ / "malformed.safetensors", Format::kSafetensors, o);
  EXPECT_EQ(verify_file(dir_ / "malformed.safetensors").rule, "verify/content-hash-malformed");
}

TEST_F(VerifyTest, JsonSchema) {
  const std::string good = testing::read_all(testing::tools_fixture("base.safetensors"));
  std::vector<VerifyResult> rs{verify_file(testing::tools_fixture("base.safetensors")),
                               verify_file(write("cut.safetensors", good.substr(0, good.size() - 4)))};
  json j = json::parse(to_json(rs));
  EXPECT_FALSE(j["ok"].get<bool>());
  ASSERT_EQ(j["files"].size(), 2u);
  for (const auto& f : j["files"]) {
    EXPECT_TRUE(f["file"].is_string());
    EXPECT_TRUE(f["status"].is_string());
    EXPECT_TRUE(f["format"].is_string() || f["format"].is_null());
    EXPECT_TRUE(f["tensors"].is_number_unsigned());
    EXPECT_TRUE(f["content_hash_checked"].is_boolean());
    for (const char* k : {"message", "rule"}) EXPECT_TRUE(f[k].is_string() || f[k].is_null()) << k;
    EXPECT_TRUE(f["offset"].is_number_unsigned() || f["offset"].is_null());
  }
  EXPECT_EQ(j["files"][0]["status"], "ok");
  EXPECT_TRUE(j["files"][0]["message"].is_null());
  EXPECT_EQ(j["files"][1]["status"], "corrupt");
  EXPECT_TRUE(j["files"][1]["rule"].is_string());
}

using testing::run_cli;

TEST_F(VerifyTest, CliLinesAndExitStatus) {
  if (!std::filesystem::exists(std::string(TENSORSEAL_BINARY_DIR) + "/tseal")) FAIL() << "tseal not built";
  const std::string good = testing::tools_fixture("base.safetensors").string();
  const std::string all = testing::read_all(good);
  const std::string cut = write("cut.safetensors", all.substr(0, all.size() - 1)).string();
  const std::string txt = write("x.txt", "plain text\n").string();
  std::string out;
  EXPECT_EQ(run_cli("verify " + good, &out), 0);
  EXPECT_EQ(out, "OK  " + good + "\n");
  EXPECT_EQ(run_cli("verify " + good + " " + cut, &out), 1);
  EXPECT_NE(out.find("CORRUPT  " + cut + ": "), std::string::npos) << out;
  // An unreadable file is an error, reported on stderr (tests/py/test_tools_output.py
  // reads that line); the other files are still verified.
  EXPECT_EQ(run_cli("verify " + good + " " + cut + " " + txt, &out), 2);
  EXPECT_NE(out.find("CORRUPT  " + cut + ": "), std::string::npos) << out;
  EXPECT_EQ(out.find(txt), std::string::npos) << out;
  EXPECT_EQ(run_cli("verify --json " + cut, &out), 1);
  EXPECT_EQ(json::parse(out)["files"][0]["status"], "corrupt");
}

}  // namespace
}  // namespace tensorseal
