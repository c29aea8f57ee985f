// Reads every file tests/fixtures/gen_safetensors.py wrote with real safetensors 0.8
// (torch 2.x) and checks every field against the manifest the generator wrote beside it.
// Spec: docs/formats/safetensors.md.
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path dir() { return testing::fixture_dir("gen_safetensors"); }

std::vector<std::string> cases() {
  const auto text = testing::read_all(dir() / "index.json");
  if (text.empty()) return {};
  return json::parse(text).get<std::vector<std::string>>();
}

json manifest(const std::string& c) { return json::parse(testing::read_all(dir() / (c + ".json"))); }

std::vector<std::int64_t> shape_of(const json& j) { return j.get<std::vector<std::int64_t>>(); }

// torch's float4_e2m1fn_x2 (two fp4 per byte) is written by safetensors as F4 with the
// last dimension doubled and read back as torch has it (dtype and shape), like every
// other dtype.
std::string expected_dtype_name(const json& row) { return row["dtype"].get<std::string>(); }

TEST(SafetensorsReader, FixturesExist) {
  const auto all = cases();
  // The generator writes 35 cases; fewer means it broke.
  EXPECT_GE(all.size(), 35u) << "run tests/fixtures/gen_safetensors.py (ctest does it)";
}

void check_case(const std::string& c, const Checkpoint& ck, const json& m, bool mapped) {
  SCOPED_TRACE(c);
  EXPECT_EQ(ck.format, Format::kSafetensors);
  // Root: a plain dict of str -> tensor in data-offset order.
  ASSERT_TRUE(ck.root.is(Value::Kind::kDict));
  const Dict& d = ck.root.as_dict();
  EXPECT_EQ(d.kind, DictKind::kDict);
  const auto& rows = m["tensors"];
  ASSERT_EQ(d.items.size(), rows.size());
  const std::uint64_t data_start = 8 + m["header_length"].get<std::uint64_t>();
  std::set<std::string> zero_size_names_ours, zero_size_names_theirs;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const auto& [k, v] = d.items[i];
    ASSERT_TRUE(k.is(Value::Kind::kStr));
    ASSERT_TRUE(v.is(Value::Kind::kTensor));
    const Tensor& t = *v.as_tensor();
    // Zero-size tensors share an offset with their neighbours; their relative order
    // is not fixed by offsets, so compare them as a set.
    if (row["nbytes"] == 0) {
      zero_size_names_theirs.insert(row["name"].get<std::string>());
      zero_size_names_ours.insert(std::string(k.as_str()));
      const Value* found = d.find(row["name"].get<std::string>());
      ASSERT_NE(found, nullptr);
      const Tensor& z = *found->as_tensor();
      EXPECT_EQ(z.numel(), 0u);
      EXPECT_EQ(name(z.dtype), expected_dtype_name(row));
      EXPECT_EQ(z.shape, shape_of(row["torch_shape"]));
      continue;
    }
    EXPECT_EQ(k.as_str(), row["name"].get<std::string>());
    EXPECT_EQ(name(t.dtype), expected_dtype_name(row));
    if (row["dtype"] == "float4_e2m1fn_x2") {
      // Stored as F4 with the last dimension doubled; read back as torch has it.
      EXPECT_EQ(row["st_dtype"].get<std::string>(), "F4");
      auto file_shape = t.shape;
      file_shape.back() *= 2;
      EXPECT_EQ(file_shape, shape_of(row["shape"]));
    } else {
      EXPECT_EQ(info(t.dtype).safetensors, row["st_dtype"].get<std::string>());
      EXPECT_EQ(t.shape, shape_of(row["shape"]));
    }
    EXPECT_EQ(t.strides, Tensor::contiguous_strides(t.shape));
    EXPECT_EQ(t.storage_offset, 0);
    EXPECT_FALSE(t.requires_grad);
    EXPECT_FALSE(t.is_parameter);
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.nbytes(), row["nbytes"].get<std::uint64_t>());
    EXPECT_EQ(tensor_sha256(t), row["sha256"].get<std::string>()) << row["name"];
    EXPECT_EQ(t.storage->dtype, t.dtype);
    EXPECT_EQ(t.storage->size(), t.nbytes());
    if (mapped) {
      // Zero-copy: the storage is a window of the file's mapping at the header offsets.
      EXPECT_TRUE(t.storage->is_mapped());
      EXPECT_EQ(t.storage->file_offset(), data_start + row["data_offsets"][0].get<std::uint64_t>());
    }
    EXPECT_EQ(t.shape, shape_of(row["torch_shape"]));
  }
  EXPECT_EQ(zero_size_names_ours, zero_size_names_theirs);

  // __metadata__: as given to save_file (an empty dict reads as no metadata).
  std::map<std::string, std::string> want, got;
  if (m["metadata"].is_object())
    for (auto it = m["metadata"].begin(); it != m["metadata"].end(); ++it) want[it.key()] = it.value();
  for (const auto& [key, val] : ck.metadata) EXPECT_TRUE(got.emplace(key, val).second) << "duplicate " << key;
  EXPECT_EQ(got, want);

  // Facts for `explain`: header length and key order as in the file.
  std::map<std::string, std::string> facts;
  for (const auto& f : ck.facts) facts[f.topic] = f.value;
  EXPECT_EQ(facts["safetensors.header_length"], std::to_string(m["header_length"].get<std::uint64_t>()));
  std::string order;
  for (const auto& key : m["header_keys"]) order += (order.empty() ? "" : ",") + key.get<std::string>();
  EXPECT_EQ(facts["safetensors.key_order"], order);
}

TEST(SafetensorsReader, EveryFixtureMatchesItsManifest) {
  const auto all = cases();
  ASSERT_FALSE(all.empty());
  std::size_t tensors = 0;
  for (const auto& c : all) {
    const json m = manifest(c);
    const fs::path path = dir() / m["file"].get<std::string>();
    // The fixture itself is what the generator hashed.
    const std::string raw = testing::read_all(path);
    ASSERT_EQ(raw.size(), m["size"].get<std::uint64_t>()) << c;
    ASSERT_EQ(sha256_hex(testing::bytes_of(raw)), m["sha256"].get<std::string>()) << c;
    EXPECT_EQ(detect_format(testing::bytes_of(raw)), Format::kSafetensors) << c;

    const Checkpoint from_file = read_file(path);
    check_case(c, from_file, m, /*mapped=*/true);
    EXPECT_EQ(from_file.file, path.string());
    ASSERT_NE(from_file.mapping, nullptr);

    const Checkpoint from_bytes = read_bytes(testing::bytes_of(raw), c);
    check_case(c, from_bytes, m, /*mapped=*/false);
    tensors += m["tensors"].size();
  }
  EXPECT_GE(tensors, 1000u);
}

TEST(SafetensorsReader, ContentHashIndependentOfSource) {
  // The same file read from a mapping and from memory hashes the same.
  for (const auto& c : {"all_dtypes", "large", "names", "many_1000"}) {
    const fs::path path = dir() / (std::string(c) + ".safetensors");
    const std::string raw = testing::read_all(path);
    ASSERT_FALSE(raw.empty()) << c;
    EXPECT_EQ(content_hash(read_file(path).root), content_hash(read_bytes(testing::bytes_of(raw), c).root)) << c;
  }
}

TEST(SafetensorsReader, SpecialValuesKeepTheirBits) {
  const Checkpoint ck = read_file(dir() / "special_values.safetensors");
  const Tensor& nan = *ck.root.as_dict().find(std::string_view("nan_payload"))->as_tensor();
  ASSERT_EQ(nan.dtype, DType::kFloat32);
  std::vector<std::byte> scratch;
  auto b = nan.contiguous_bytes(scratch);
  ASSERT_EQ(b.size(), 12u);
  std::uint32_t w[3];
  std::memcpy(w, b.data(), 12);
  EXPECT_EQ(w[0], 0x7FC00001u);
  EXPECT_EQ(w[1], 0xFFFFFFFFu);
  EXPECT_EQ(w[2], 0x7F800001u);
  const Tensor& big = *ck.root.as_dict().find(std::string_view("u64_big"))->as_tensor();
  ASSERT_EQ(big.dtype, DType::kUInt64);
  std::uint64_t u[2];
  std::memcpy(u, big.contiguous_bytes(scratch).data(), 16);
  EXPECT_EQ(u[0], ~std::uint64_t{0});
  EXPECT_EQ(u[1], std::uint64_t{1} << 63);
}

TEST(SafetensorsReader, NoTensorsIsAnEmptyDict) {
  const Checkpoint ck = read_file(dir() / "no_tensors.safetensors");
  EXPECT_TRUE(ck.root.as_dict().items.empty());
  EXPECT_TRUE(ck.metadata.empty());
  const Checkpoint km = read_file(dir() / "no_tensors_metadata.safetensors");
  EXPECT_TRUE(km.root.as_dict().items.empty());
  ASSERT_EQ(km.metadata.size(), 1u);
  EXPECT_EQ(km.metadata[0], (std::pair<std::string, std::string>{"format", "pt"}));
}

}  // namespace
}  // namespace tensorseal
