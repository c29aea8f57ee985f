// torch.distributed.checkpoint directories (docs/formats/dcp.md) made by real dcp.save
// (tests/fixtures/gen_dcp.py); the Python suite (tests/py/test_dcp_read.py) covers
// torchrun jobs, DTensors and the refusal rules.
#include <gtest/gtest.h>
#include <zstd.h>

#include <map>
#include <set>

#include "dcp/ranks.h"
#include "dcp/transform.h"
#include "tensorseal/tensorseal.h"
#include "test_util.h"

namespace tensorseal {
namespace {

std::filesystem::path dcp_dir(const std::string& name) { return testing::fixture_dir("gen_dcp") / name; }

TEST(Dcp, BothSerializationFormatsHashAsTheSingleFile) {
  const auto want = content_hash(read_file(dcp_dir("reference.pt")).root);
  for (const char* layout : {"torch_save", "safetensors"}) {
    const Checkpoint c = read_file(dcp_dir(layout));
    EXPECT_EQ(c.format, Format::kDcp) << layout;
    EXPECT_EQ(content_hash(c.root), want) << layout;
    EXPECT_EQ(c.mapping, nullptr) << layout;
    ASSERT_TRUE(c.root.is(Value::Kind::kDict));
    const Value* inner = c.root.as_dict().find(std::string_view("inner"));
    ASSERT_NE(inner, nullptr);
    EXPECT_TRUE(inner->is(Value::Kind::kDict)) << "planner_data restores the nesting";
    const Value* epoch = c.root.as_dict().find(std::string_view("epoch"));
    ASSERT_NE(epoch, nullptr);
    EXPECT_EQ(epoch->as_int(), 3) << "a BYTE_IO item is the object torch.save'd into it";
  }
}

TEST(Dcp, MetadataIsDetectedByContentAndNeedsItsDirectory) {
  const auto path = dcp_dir("torch_save") / ".metadata";
  const std::string bytes = testing::read_all(path);
  EXPECT_EQ(detect_format(testing::bytes_of(bytes)), Format::kDcp);
  try {
    (void)read_bytes(testing::bytes_of(bytes), "mem.metadata");
    FAIL() << "read from memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.rule(), "dcp/not-on-disk");
  }
  EXPECT_EQ(content_hash(read_file(path).root), content_hash(read_file(dcp_dir("torch_save")).root));
}

TEST(Dcp, MetadataGlobalsScanAsSafe) {
  const ScanReport r = scan(read_file(dcp_dir("torch_save")));
  EXPECT_EQ(r.verdict, Verdict::kSafe) << to_json(r);
  EXPECT_FALSE(r.findings.empty());
}

TEST(Dcp, FactsNameSaveIdAndPath) {
  const Checkpoint c = read_file(dcp_dir("torch_save"));
  std::set<std::string> topics;
  for (const auto& f : c.facts) topics.insert(f.topic);
  for (const char* t : {"dcp.save_id", "dcp.checkpoint_path", "dcp.files", "dcp.item_order", "dcp.chunks",
                        "dcp.serialization_format", "dcp.version", "dcp.metadata_files"})
    EXPECT_TRUE(topics.count(t)) << t;
}

// dcp.save(use_collectives=False): __0.metadata and no .metadata; the same model.
TEST(Dcp, PerRankMetadataReadsAsTheSameModel) {
  EXPECT_FALSE(std::filesystem::exists(dcp_dir("per_rank") / ".metadata"));
  ASSERT_TRUE(std::filesystem::exists(dcp_dir("per_rank") / "__0.metadata"));
  const Checkpoint a = read_file(dcp_dir("per_rank")), b = read_file(dcp_dir("torch_save"));
  EXPECT_EQ(a.format, Format::kDcp);
  EXPECT_EQ(content_hash(a.root), content_hash(b.root));
  EXPECT_EQ(content_hash(read_file(dcp_dir("per_rank") / "__0.metadata").root), content_hash(b.root));
}

// DCP's ZStandard extension: what torch's zstandard.ZstdCompressor writes is a zstd
// frame; undo_transforms gives the bytes back, bounded, and names what is wrong.
TEST(Dcp, ZstdTransformUndoneBoundedAndChecked) {
  using detail::dcp::known_transform;
  using detail::dcp::undo_transforms;
  EXPECT_TRUE(known_transform("stream.zstd/1"));
  EXPECT_TRUE(known_transform("stream.zstd/1.2"));
  for (const char* d : {"stream.zstd/2", "stream.zstd", "stream.zstd/", "stream.lz4/1", "zstd", "stream.zstd/10"})
    EXPECT_FALSE(known_transform(d)) << d;
  std::string plain;
  for (int i = 0; i < 5000; ++i) plain += "tensorseal " + std::to_string(i % 7);
  std::vector<std::byte> z(ZSTD_compressBound(plain.size()));
  z.resize(ZSTD_compress(z.data(), z.size(), plain.data(), plain.size(), 3));
  const std::vector<std::string> zstd{"stream.zstd/1"};
  const auto back = undo_transforms(z, zstd, 1 << 20, "f", 7);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(back->bytes().data()), back->size()), plain);
  EXPECT_EQ(detail::dcp::zstd_frame_size(z), z.size());
  auto rule_of = [&](std::span<const std::byte> raw, std::uint64_t max_alloc) {
    try {
      (void)undo_transforms(raw, zstd, max_alloc, "f", 7);
    } catch (const Error& e) {
      EXPECT_EQ(e.offset(), 7u);
      return e.rule();
    }
    return std::string("none");
  };
  EXPECT_EQ(rule_of(std::span(z).first(z.size() - 3), 1 << 20), "dcp/transform-data");  // truncated
  std::vector<std::byte> trailing = z;
  trailing.push_back(std::byte{1});
  EXPECT_EQ(rule_of(trailing, 1 << 20), "dcp/transform-data");
  std::vector<std::byte> bad_magic = z;
  bad_magic[0] ^= std::byte{0xFF};
  EXPECT_EQ(rule_of(bad_magic, 1 << 20), "dcp/transform-data");
  EXPECT_EQ(rule_of(z, plain.size() - 1), "dcp/max-alloc");
  EXPECT_EQ(rule_of(z, plain.size()), "none");
}

TEST(Dcp, MetadataRankNames) {
  using detail::dcp::metadata_rank;
  EXPECT_EQ(metadata_rank("__0.metadata"), 0u);
  EXPECT_EQ(metadata_rank("__17.metadata"), 17u);
  for (const char* n : {".metadata", "__.metadata", "__01.metadata", "__1_0.distcp", "__1.metadata.tmp",
                        "__-1.metadata", "__1234567890.metadata", "_1.metadata"})
    EXPECT_FALSE(metadata_rank(n).has_value()) << n;
}

// write_dcp: same content, same bytes (whatever the source's dict order), read back as
// the same content, tensors split over the ranks' files.
TEST(Dcp, WriterIsCanonicalAndReadsBack) {
  const Checkpoint src = read_file(dcp_dir("reference.pt"));
  const auto base = std::filesystem::temp_directory_path() / "tseal_dcp_writer_test";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  WriteOptions o;
  set_option(o.format_options, Format::kDcp, "world_size", "3");
  o.fsync = false;
  write_file(src.root, base / "a", Format::kDcp, o);
  Value reversed = Value::dict();
  const auto& items = src.root.as_dict().items;
  for (auto it = items.rbegin(); it != items.rend(); ++it) reversed.as_dict().set(it->first, it->second);
  write_file(reversed, base / "b", Format::kDcp, o);
  write_file(read_file(dcp_dir("safetensors")).root, base / "c", Format::kDcp, o);
  const auto a = testing::files_of(base / "a");
  EXPECT_EQ(a.size(), 4u);  // .metadata + three ranks' files
  EXPECT_EQ(a, testing::files_of(base / "b"));
  EXPECT_EQ(a, testing::files_of(base / "c"));
  const Checkpoint back = read_file(base / "a");
  EXPECT_EQ(back.format, Format::kDcp);
  EXPECT_EQ(content_hash(back.root), content_hash(src.root));
  std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace tensorseal
