// Reads every .npy / .npz that tests/fixtures/gen_numpy.py (numpy 2) and
// gen_numpy_t113.py (Debian numpy 1.x) wrote, and checks dtype, shape, values (sha256
// of the C-order little-endian bytes, as numpy computed it), layout and facts against
// their manifests. Spec: docs/formats/npy.md.
#include <nlohmann/json.hpp>

#include "test_manifest.h"
#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* const kGenerators[] = {"gen_numpy", "gen_numpy_t113"};

std::string fact(const Checkpoint& c, const std::string& topic, const std::string& where = "") {
  for (const auto& f : c.facts)
    if (f.topic == topic && (where.empty() || f.where == where)) return f.value;
  return "";
}

TEST(NpyReader, FixturesExist) {
  for (const char* gen : kGenerators) {
    const auto m = testing::fixture_manifest(gen);
    ASSERT_TRUE(m.contains("npy")) << "run tests/fixtures/" << gen << ".py (ctest does it)";
    EXPECT_GE(m["npy"].size(), 30u) << gen;
    EXPECT_GE(m["npz"].size(), 6u) << gen;
  }
}

TEST(NpyReader, EveryNpyMatchesNumpy) {
  for (const char* gen : kGenerators) {
    const auto m = testing::fixture_manifest(gen);
    ASSERT_TRUE(m.contains("npy")) << gen;
    for (const auto& row : m["npy"]) {
      const std::string file = row["file"];
      SCOPED_TRACE(std::string(gen) + "/" + file);
      const fs::path path = testing::fixture_dir(gen) / file;
      if (!row["error"].is_null()) {
        EXPECT_EQ(testing::rule_of([&] { (void)read_file(path); }), row["error"].get<std::string>());
        continue;
      }
      if (row.value("object", false)) {  // the array's pickle, read without running it
        const Checkpoint c = read_file(path);
        EXPECT_EQ(c.format, Format::kNpy);
        ASSERT_TRUE(c.root.is(Value::Kind::kObject));
        EXPECT_TRUE(c.root.as_object().callable->is_global("numpy._core.multiarray", "_reconstruct") ||
                    c.root.as_object().callable->is_global("numpy.core.multiarray", "_reconstruct"));
        continue;
      }
      const Checkpoint c = read_file(path);
      EXPECT_EQ(c.format, Format::kNpy);
      ASSERT_TRUE(c.root.is(Value::Kind::kTensor));
      const Tensor& t = *c.root.as_tensor();
      EXPECT_EQ(name(t.dtype), row["dtype"].get<std::string>());
      EXPECT_EQ(t.shape, row["shape"].get<std::vector<std::int64_t>>());
      EXPECT_EQ(tensor_sha256(t), row["sha256"].get<std::string>());
      const auto v = row["version"].get<std::vector<int>>();
      EXPECT_EQ(fact(c, "npy.version"), std::to_string(v[0]) + "." + std::to_string(v[1]));
      EXPECT_NE(fact(c, "npy.header_padding"), "");
      if (row["big_endian"].get<bool>()) {
        // Swapped into an owned little-endian copy, and said so.
        EXPECT_EQ(fact(c, "npy.byte_order"), "big");
        EXPECT_FALSE(t.storage->is_mapped());
      } else {
        // Zero-copy: the tensor views the mapped file, at numpy's 64-byte-aligned data.
        EXPECT_EQ(fact(c, "npy.byte_order"), "");
        EXPECT_TRUE(t.storage->is_mapped());
        EXPECT_EQ(t.storage->file_offset() % 64, 0u);
        EXPECT_EQ(t.storage->size(), t.nbytes());
      }
      if (row["fortran"].get<bool>()) {
        EXPECT_EQ(fact(c, "npy.fortran_order"), "True");
        EXPECT_FALSE(t.is_contiguous());
        EXPECT_EQ(t.strides[0], 1);  // column-major
      } else {
        EXPECT_TRUE(t.is_contiguous());
      }
    }
  }
}

TEST(NpyReader, EveryNpzMatchesNumpy) {
  for (const char* gen : kGenerators) {
    const auto m = testing::fixture_manifest(gen);
    ASSERT_TRUE(m.contains("npz")) << gen;
    for (const auto& row : m["npz"]) {
      const std::string file = row["file"];
      SCOPED_TRACE(std::string(gen) + "/" + file);
      const Checkpoint c = read_file(testing::fixture_dir(gen) / file);
      EXPECT_EQ(c.format, Format::kNpz);
      ASSERT_TRUE(c.root.is(Value::Kind::kDict));
      const Dict& d = c.root.as_dict();
      const auto& arrays = row["arrays"];
      ASSERT_EQ(d.items.size(), arrays.size());
      const bool compressed = row["compressed"].get<bool>();
      for (std::size_t i = 0; i < arrays.size(); ++i) {
        const auto& [k, v] = d.items[i];
        // Archive order = the order numpy was given the arrays.
        EXPECT_EQ(k.as_str(), arrays[i]["key"].get<std::string>());
        ASSERT_TRUE(v.is(Value::Kind::kTensor));
        const Tensor& t = *v.as_tensor();
        EXPECT_EQ(name(t.dtype), arrays[i]["dtype"].get<std::string>());
        EXPECT_EQ(t.shape, arrays[i]["shape"].get<std::vector<std::int64_t>>());
        EXPECT_EQ(tensor_sha256(t), arrays[i]["sha256"].get<std::string>());
        const bool big = fact(c, "npy.byte_order", k.as_str().data() + std::string(".npy")) == "big";
        // Stored little-endian members are zero-copy windows of the mapped file;
        // deflated members were inflated into owned storage.
        EXPECT_EQ(t.storage->is_mapped(), !compressed && !big);
      }
      EXPECT_EQ(fact(c, "zip.compression"), compressed ? "deflated" : "stored");
      EXPECT_EQ(fact(c, "zip.timestamps"), "1980-01-01 00:00:00");
      EXPECT_EQ(fact(c, "zip.create_system"), "3 (unix)");
      EXPECT_EQ(fact(c, "zip.unaccounted_bytes"), "");
    }
  }
}

// read_bytes copies once and still works (views of the owned copy).
TEST(NpyReader, FromMemory) {
  const std::string bytes = testing::read_all(testing::fixture_dir("gen_numpy") / "dt_float32.npy");
  ASSERT_FALSE(bytes.empty());
  const Checkpoint c = read_bytes(testing::bytes_of(bytes), "mem.npy");
  ASSERT_TRUE(c.root.is(Value::Kind::kTensor));
  EXPECT_EQ(c.root.as_tensor()->shape, (std::vector<std::int64_t>{2, 3}));
  const std::string z = testing::read_all(testing::fixture_dir("gen_numpy") / "savez_compressed.npz");
  const Checkpoint cz = read_bytes(testing::bytes_of(z), "mem.npz");
  EXPECT_EQ(cz.root.as_dict().items.size(), 4u);
}

// CRC32s of npz members are verified unless the caller turns it off.
TEST(NpyReader, NpzCrcIsVerified) {
  std::string bytes = testing::read_all(testing::fixture_dir("gen_numpy") / "savez.npz");
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(bytes), "x.npz"); }), "");
  // Member "zeta.npy" is first; its data ends before the second local header.
  const auto pos = bytes.find("alpha.npy");
  ASSERT_NE(pos, std::string::npos);
  bytes[pos - 30 - 1] ^= 0x40;  // last data byte of the first member
  EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(bytes), "x.npz"); }), "zip/crc-mismatch");
  ReadOptions no_crc;
  no_crc.verify_checksums = false;
  EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(bytes), "x.npz", no_crc); }), "");
}

}  // namespace
}  // namespace tensorseal
