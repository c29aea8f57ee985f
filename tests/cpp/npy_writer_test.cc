// The .npy / .npz writers are canonical and match numpy: every np.save file of a
// C-order little-endian array (tests/fixtures/gen_numpy*.py) is reproduced byte for
// byte, and np.savez with sorted keys too (CPython 3.11.7's zipfile, the venv's).
// Spec: docs/formats/npy.md.
#include <nlohmann/json.hpp>

#include "numpy/npy.h"
#include "test_manifest.h"
#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

TEST(NpyWriter, NpSaveFilesAreReproducedByteForByte) {
  int checked = 0;
  for (const char* gen : {"gen_numpy", "gen_numpy_t113"}) {
    const auto m = testing::fixture_manifest(gen);
    ASSERT_TRUE(m.contains("npy")) << gen;
    for (const auto& row : m["npy"]) {
      if (!row["np_save"].get<bool>()) continue;
      const std::string file = row["file"];
      SCOPED_TRACE(std::string(gen) + "/" + file);
      const std::string orig = testing::read_all(testing::fixture_dir(gen) / file);
      const Checkpoint c = read_bytes(testing::bytes_of(orig), file);
      EXPECT_EQ(write_bytes(c.root, Format::kNpy), orig);
      ++checked;
    }
  }
  // 14 dtypes, two 0-d, two zero-size, long, wide, ndim 32, aligned: 22 per numpy.
  EXPECT_EQ(checked, 44);
}

// Non-canonical inputs (Fortran order, big-endian, v2/v3 headers) are written as the
// canonical C-order little-endian v1.0 file with the same values.
TEST(NpyWriter, CanonicalFormOfOtherLayouts) {
  const auto m = testing::fixture_manifest("gen_numpy");
  ASSERT_TRUE(m.contains("npy"));
  int checked = 0;
  for (const auto& row : m["npy"]) {
    if (row["np_save"].get<bool>() || !row["error"].is_null()) continue;
    const std::string file = row["file"];
    SCOPED_TRACE(file);
    const Checkpoint c = read_file(testing::fixture_dir("gen_numpy") / file);
    if (row.value("object", false)) {  // an object array: header '|O' + its pickle, stable
      const std::string out = write_bytes(c.root, Format::kNpy);
      EXPECT_NE(out.find("'descr': '|O'"), std::string::npos);
      const Checkpoint back = read_bytes(testing::bytes_of(out), "back.npy");
      EXPECT_TRUE(equal(back.root, c.root));
      EXPECT_EQ(write_bytes(back.root, Format::kNpy), out);
      continue;
    }
    const std::string out = write_bytes(c.root, Format::kNpy);
    EXPECT_EQ(out.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    EXPECT_NE(out.find("'fortran_order': False"), std::string::npos);
    const Checkpoint back = read_bytes(testing::bytes_of(out), "back.npy");
    EXPECT_EQ(tensor_sha256(*back.root.as_tensor()), row["sha256"].get<std::string>());
    EXPECT_TRUE(back.root.as_tensor()->is_contiguous());
    // Canonical means: writing the canonical file again changes nothing.
    EXPECT_EQ(write_bytes(back.root, Format::kNpy), out);
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

// numpy.lib.format's header, including the growth padding and the 64-byte alignment
// (padlen is 64, not 0, when the header would already be aligned).
TEST(NpyWriter, HeaderLiteral) {
  const std::int64_t s23[] = {2, 3};
  const std::string h = detail::numpy::header("<f4", false, s23);
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.substr(10, 60), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } ");
  EXPECT_EQ(h.back(), '\n');
  const std::string scalar = detail::numpy::header("<f8", false, {});
  EXPECT_NE(scalar.find("'shape': (), }"), std::string::npos);
  const std::int64_t s5[] = {5};
  EXPECT_NE(detail::numpy::header("|u1", false, s5).find("'shape': (5,), }"), std::string::npos);
  // Growth room: 21 - len("5") = 20 spaces, then alignment padding.
  const std::int64_t big[] = {123456789012345678};
  const std::string hb = detail::numpy::header("<i8", false, big);
  EXPECT_EQ(hb.size() % 64, 0u);
}

TEST(NpyWriter, NpzSortedSavezIsReproducedByteForByte) {
  const auto m = testing::fixture_manifest("gen_numpy");
  ASSERT_TRUE(m.contains("npz"));
  const fs::path dir = testing::fixture_dir("gen_numpy");
  const std::string sorted = testing::read_all(dir / "savez_sorted.npz");
  ASSERT_FALSE(sorted.empty());
  // The same arrays given in any order, stored or compressed, give the sorted file.
  for (const char* file : {"savez_sorted.npz", "savez.npz", "savez_compressed.npz"}) {
    SCOPED_TRACE(file);
    const Checkpoint c = read_file(dir / file);
    const std::string out = write_bytes(c.root, Format::kNpz);
    if (m["python"] == "3.11.7") EXPECT_EQ(out, sorted);
    const Checkpoint back = read_bytes(testing::bytes_of(out), "back.npz");
    ASSERT_EQ(back.root.as_dict().items.size(), c.root.as_dict().items.size());
    EXPECT_EQ(content_hash(back.root), content_hash(c.root));
  }
}

TEST(NpyWriter, NpzRoundTripOfEveryFixture) {
  for (const char* gen : {"gen_numpy", "gen_numpy_t113"}) {
    const auto m = testing::fixture_manifest(gen);
    ASSERT_TRUE(m.contains("npz")) << gen;
    for (const auto& row : m["npz"]) {
      const std::string file = row["file"];
      SCOPED_TRACE(std::string(gen) + "/" + file);
      const Checkpoint c = read_file(testing::fixture_dir(gen) / file);
      const std::string out = write_bytes(c.root, Format::kNpz);
      const Checkpoint back = read_bytes(testing::bytes_of(out), "back.npz");
      EXPECT_EQ(content_hash(back.root), content_hash(c.root));
      // Members come back sorted by key.
      const auto& items = back.root.as_dict().items;
      for (std::size_t i = 1; i < items.size(); ++i) EXPECT_LT(items[i - 1].first.as_str(), items[i].first.as_str());
      EXPECT_EQ(write_bytes(back.root, Format::kNpz), out);
    }
  }
}

TEST(NpyWriter, RefusesWhatNumpyCannotHold) {
  auto bf16 = make_contiguous(DType::kBFloat16, {2}, Storage::owned(std::vector<std::byte>(4)));
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(Value(bf16), Format::kNpy); }), "npy/dtype-not-writable");
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(Value::dict(), Format::kNpy); }), "npy/not-a-tensor");
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(Value(bf16), Format::kNpz); }), "npz/not-flat");
  Value d = Value::dict();
  d.as_dict().set(Value::str("x"), Value(std::int64_t{3}));
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(d, Format::kNpz); }), "npz/not-flat");
  Value e = Value::dict();
  e.as_dict().set(Value::str("b"), Value(bf16));
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(e, Format::kNpz); }), "npy/dtype-not-writable");
  // An empty dict is a valid (empty) npz.
  const std::string empty = write_bytes(Value::dict(), Format::kNpz);
  EXPECT_EQ(empty, std::string("PK\x05\x06", 4) + std::string(18, '\0'));
}

}  // namespace
}  // namespace tensorseal
