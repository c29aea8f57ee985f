// The core of tensorseal.dcp (include/tensorseal/dcp.h): a two-rank save made of
// dcp_prepare / dcp_write_items / dcp_commit, read back item by item and as a whole,
// and the manifest's checks (docs/formats/dcp.md "tensorseal.dcp"). The Python suite
// (tests/py/test_dcp_plugin.py) runs the same core inside real torchrun jobs.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "dcp/manifest.h"
#include "tensorseal/tensorseal.h"
#include "test_util.h"

namespace tensorseal {
namespace {
namespace fs = std::filesystem;

std::shared_ptr<const Tensor> floats(std::vector<std::int64_t> shape, float first) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<std::byte> b(static_cast<std::size_t>(n) * 4);
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = first + static_cast<float>(i);
    std::memcpy(b.data() + i * 4, &v, 4);
  }
  return make_contiguous(DType::kFloat32, std::move(shape), Storage::owned(std::move(b), DType::kFloat32));
}

// "w" [4, 2] split on dim 0 over ranks 0 and 1, "b" [3] on rank 1, "step" (BYTE_IO,
// the torch.save bytes of an int) on rank 0.
fs::path save(const fs::path& target) {
  WriteOptions o;
  o.fsync = false;
  dcp_prepare(target, true);
  std::vector<DcpRecord> all;
  {
    std::vector<DcpWriteItem> r0;
    r0.push_back({"w", std::vector<std::int64_t>{0, 0}, Value(floats({2, 2}, 0))});
    const std::string pt = write_bytes(Value(std::int64_t{7}), Format::kTorchZip);
    r0.push_back({"step", std::nullopt, Value::bytes(pt)});
    for (auto& r : dcp_write_items(target, 0, std::move(r0), true, o)) all.push_back(std::move(r));
  }
  {
    std::vector<DcpWriteItem> r1;
    r1.push_back({"b", std::vector<std::int64_t>{0}, Value(floats({3}, 100))});
    r1.push_back({"w", std::vector<std::int64_t>{2, 0}, Value(floats({2, 2}, 4))});
    for (auto& r : dcp_write_items(target, 1, std::move(r1), true, o)) all.push_back(std::move(r));
  }
  DcpMetadata planned;
  DcpEntry w;
  w.fqn = "w";
  w.is_tensor = true;
  w.size = {4, 2};
  w.chunks = {{{2, 0}, {2, 2}}, {{0, 0}, {2, 2}}};  // the planner's order is not the file's
  w.path = {Value::str("w")};
  DcpEntry b;
  b.fqn = "b";
  b.is_tensor = true;
  b.size = {3};
  b.chunks = {{{0}, {3}}};
  b.path = {Value::str("b")};
  DcpEntry s;
  s.fqn = "step";
  s.path = {Value::str("step")};
  planned.entries = {w, s, b};
  dcp_commit(target, planned, all, false);
  return target;
}

fs::path fresh_base(const std::string& name) {
  const auto base = fs::temp_directory_path() / ("tseal_dcp_plugin_" + name);
  fs::remove_all(base);
  fs::create_directories(base);
  return base;
}

void flip(const fs::path& file, std::uint64_t at) {
  std::string b = testing::read_all(file);
  b[at] = static_cast<char>(b[at] ^ 0x01);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << b;
}

std::vector<DcpRecord> manifest_of(const fs::path& d) {
  return detail::dcp::parse_manifest(testing::bytes_of(testing::read_all(d / ".tensorseal.json")), "manifest");
}

void rewrite_manifest(const fs::path& d, const std::vector<DcpRecord>& rows) {
  std::ofstream(d / ".tensorseal.json", std::ios::binary | std::ios::trunc) << detail::dcp::encode_manifest(rows);
}

TEST(DcpPlugin, SameItemsSameBytesAndTheWholeReadsBack) {
  const auto base = fresh_base("same");
  const auto a = save(base / "a"), b = save(base / "elsewhere" / "b");
  EXPECT_EQ(testing::files_of(a), testing::files_of(b));
  EXPECT_FALSE(fs::exists(dcp_staging_dir(a))) << "the staging directory became the checkpoint";
  EXPECT_EQ(testing::files_of(a).size(), 4u);  // .metadata, .tensorseal.json, __0_0.distcp, __1_0.distcp
  const Checkpoint c = read_file(a);
  EXPECT_EQ(c.format, Format::kDcp);
  Value want = Value::dict();
  want.as_dict().set(Value::str("b"), Value(floats({3}, 100)));
  want.as_dict().set(Value::str("step"), Value(std::int64_t{7}));
  want.as_dict().set(Value::str("w"), Value(floats({4, 2}, 0)));
  EXPECT_EQ(content_hash(c.root), content_hash(want));
  DcpReader r(a, {});
  EXPECT_TRUE(r.has_manifest());
  EXPECT_EQ(content_hash(Value(r.chunk("w", {2, 0}))), content_hash(Value(floats({2, 2}, 4))));
  EXPECT_EQ(r.metadata().entries[2].fqn, "w");
  EXPECT_EQ(r.metadata().entries[2].chunks[0].offsets, (std::vector<std::int64_t>{0, 0})) << "chunks by offsets";
  // Re-saving over it swaps it as a whole.
  save(a);
  EXPECT_EQ(testing::files_of(a), testing::files_of(b));
  fs::remove_all(base);
}

TEST(DcpPlugin, ChecksumNamesTheFileAndTheTensor) {
  const auto base = fresh_base("checksum");
  const auto d = save(base / "ckpt");
  const auto rows = manifest_of(d);
  const DcpRecord* w1 = nullptr;
  for (const auto& r : rows)
    if (r.fqn == "w" && r.offsets == std::vector<std::int64_t>{2, 0}) w1 = &r;
  ASSERT_NE(w1, nullptr);
  flip(d / w1->storage.relative_path, w1->storage.offset + w1->storage.length - 30);
  DcpReader r(d, {});
  try {
    (void)r.chunk("w", {2, 0});
    FAIL() << "a flipped bit was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.rule(), "dcp/checksum");
    EXPECT_NE(e.file().find("__1_0.distcp"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos);
  }
  EXPECT_EQ(testing::rule_of([&] { (void)read_file(d); }), "dcp/checksum");
  fs::remove_all(base);
}

// The bytes and the manifest's checksum both changed (a consistent forgery of the
// container): the content digest still refuses the value.
TEST(DcpPlugin, DigestCatchesAChangedValue) {
  const auto base = fresh_base("digest");
  const auto d = save(base / "ckpt");
  auto rows = manifest_of(d);
  for (auto& r : rows) {
    if (r.fqn != "b") continue;
    // Rewrite "b" as a different tensor of the same byte length in place.
    WriteOptions o;
    const std::string other = write_bytes(Value(floats({3}, 200)), Format::kTorchZip, o);
    ASSERT_EQ(other.size(), r.storage.length);
    std::string file = testing::read_all(d / r.storage.relative_path);
    file.replace(r.storage.offset, r.storage.length, other);
    std::ofstream(d / r.storage.relative_path, std::ios::binary | std::ios::trunc) << file;
    r.checksum = detail::dcp::item_checksum(testing::bytes_of(other));
  }
  rewrite_manifest(d, rows);
  DcpReader r(d, {});
  EXPECT_EQ(testing::rule_of([&] { (void)r.chunk("b", {0}); }), "dcp/digest");
  fs::remove_all(base);
}

TEST(DcpPlugin, ManifestMustMatchMetadata) {
  const auto base = fresh_base("manifest");
  const auto d = save(base / "ckpt");
  auto rows = manifest_of(d);
  rows.pop_back();
  rewrite_manifest(d, rows);
  EXPECT_EQ(testing::rule_of([&] { DcpReader r(d, {}); }), "dcp/manifest");
  EXPECT_EQ(testing::rule_of([&] { (void)read_file(d); }), "dcp/manifest");
  std::ofstream(d / ".tensorseal.json", std::ios::trunc) << "{\"format\": \"tensorseal.dcp\", \"version\": 2}";
  EXPECT_EQ(testing::rule_of([&] { (void)read_file(d); }), "dcp/manifest");
  fs::remove_all(base);
}

TEST(DcpPlugin, CommitRefusesItemsThePlanDoesNotMatch) {
  const auto base = fresh_base("plan");
  const auto target = base / "ckpt";
  WriteOptions o;
  o.fsync = false;
  dcp_prepare(target, true);
  std::vector<DcpWriteItem> items;
  items.push_back({"w", std::vector<std::int64_t>{0}, Value(floats({2}, 0))});
  auto records = dcp_write_items(target, 0, std::move(items), true, o);
  DcpMetadata planned;
  DcpEntry w;
  w.fqn = "w";
  w.is_tensor = true;
  w.size = {4};
  w.chunks = {{{0}, {2}}, {{2}, {2}}};  // a chunk no rank wrote
  planned.entries = {w};
  EXPECT_EQ(testing::rule_of([&] { dcp_commit(target, planned, records, false); }), "dcp/write-plan");
  EXPECT_FALSE(fs::exists(target)) << "nothing appears at the target";
  EXPECT_FALSE(fs::exists(dcp_staging_dir(target))) << "the refused save's staged files are removed";
  fs::remove_all(base);
}

TEST(DcpPlugin, PrepareNeverReplacesAForeignDirectory) {
  const auto base = fresh_base("foreign");
  fs::create_directories(base / "mine");
  std::ofstream(base / "mine" / "notes.txt") << "keep";
  EXPECT_EQ(testing::rule_of([&] { dcp_prepare(base / "mine", true); }), "dcp/write-target");
  EXPECT_EQ(testing::read_all(base / "mine" / "notes.txt"), "keep");
  const auto d = save(base / "ckpt");
  EXPECT_EQ(testing::rule_of([&] { dcp_prepare(d, false); }), "dcp/write-target");
  fs::remove_all(base);
}

}  // namespace
}  // namespace tensorseal
