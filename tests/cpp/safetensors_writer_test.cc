// The safetensors writer against real safetensors 0.8: byte-identical output with
// safetensors.torch.save_file whenever __metadata__ has at most one key, golden bytes,
// determinism, and round trips. Spec: docs/formats/safetensors.md.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "util/endian.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

fs::path dir() { return testing::fixture_dir("gen_safetensors"); }

std::vector<std::string> cases() {
  const auto text = testing::read_all(dir() / "index.json");
  if (text.empty()) return {};
  return json::parse(text).get<std::vector<std::string>>();
}

json manifest(const std::string& c) { return json::parse(testing::read_all(dir() / (c + ".json"))); }

// A fresh tree with the same tensors as `read`, each copied into its own owned storage
// (nothing shared with the file), inserted in reverse order: the writer's order must
// not depend on the input's.
Value rebuild(const Value& read) {
  Value out = Value::dict();
  const auto& items = read.as_dict().items;
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    const Tensor& t = *it->second.as_tensor();
    std::vector<std::byte> scratch;
    auto b = t.contiguous_bytes(scratch);
    auto copy = make_contiguous(t.dtype, t.shape, Storage::owned(std::vector<std::byte>(b.begin(), b.end()), t.dtype));
    out.as_dict().set(it->first, Value(copy));
  }
  return out;
}

WriteOptions options_for(const json& m) {
  WriteOptions o;
  if (m["metadata"].is_object())
    for (auto it = m["metadata"].begin(); it != m["metadata"].end(); ++it)
      o.metadata.emplace_back(it.key(), it.value().get<std::string>());
  std::reverse(o.metadata.begin(), o.metadata.end());  // input order must not matter
  return o;
}

struct Split {
  std::string header, buffer;
};
Split split(const std::string& f) {
  EXPECT_GE(f.size(), 8u);
  const auto n = detail::util::load_le<std::uint64_t>(reinterpret_cast<const std::byte*>(f.data()));
  return {f.substr(8, n), f.substr(8 + n)};
}

std::map<std::string, std::string> as_map(const ojson& o) {
  std::map<std::string, std::string> m;
  for (auto it = o.begin(); it != o.end(); ++it) m[it.key()] = it.value().get<std::string>();
  return m;
}

TEST(SafetensorsWriter, ByteIdenticalToSafetensorsSaveFile) {
  const auto all = cases();
  ASSERT_GE(all.size(), 35u);
  const std::string meta_none = testing::read_all(dir() / "meta_none.safetensors");
  std::size_t identical = 0, sorted_metadata = 0, empty_metadata = 0;
  for (const auto& c : all) {
    SCOPED_TRACE(c);
    const json m = manifest(c);
    const std::string theirs = testing::read_all(dir() / m["file"].get<std::string>());
    const Checkpoint read = read_file(dir() / m["file"].get<std::string>());
    const Value tree = rebuild(read.root);
    const std::string ours = write_bytes(tree, Format::kSafetensors, options_for(m));
    const std::size_t keys = m["metadata"].is_object() ? m["metadata"].size() : 0;

    if (m["metadata_arg"] == "empty") {
      // save_file(metadata={}) writes "__metadata__":{}; tensorseal cannot tell an
      // empty dict from none and writes no __metadata__ (as save_file(metadata=None)).
      EXPECT_NE(ours, theirs);
      EXPECT_EQ(split(theirs).header.find("\"__metadata__\":{}"), 1u);
      EXPECT_EQ(split(ours).header.find(std::string_view("__metadata__")), std::string::npos);
      EXPECT_EQ(split(ours).buffer, split(theirs).buffer);
      if (c == "meta_empty") EXPECT_EQ(ours, meta_none);
      ++empty_metadata;
    } else if (keys <= 1) {
      ASSERT_EQ(ours.size(), theirs.size());
      EXPECT_TRUE(ours == theirs) << "first difference at byte "
                                  << (std::mismatch(ours.begin(), ours.end(), theirs.begin()).first - ours.begin());
      ++identical;
    } else {
      // More than one key: safetensors writes them in HashMap order (varies by run);
      // tensorseal sorts them. Everything else is the same, byte for byte.
      ASSERT_EQ(ours.size(), theirs.size());
      const Split a = split(ours), b = split(theirs);
      EXPECT_EQ(a.buffer, b.buffer);
      ojson ha = ojson::parse(a.header), hb = ojson::parse(b.header);
      ASSERT_TRUE(ha.contains("__metadata__"));
      EXPECT_EQ(ha.begin().key(), "__metadata__");
      std::vector<std::string> our_keys;
      for (auto it = ha["__metadata__"].begin(); it != ha["__metadata__"].end(); ++it) our_keys.push_back(it.key());
      EXPECT_TRUE(std::is_sorted(our_keys.begin(), our_keys.end()));
      EXPECT_EQ(our_keys.size(), keys);
      EXPECT_EQ(as_map(ha["__metadata__"]), as_map(hb["__metadata__"]));
      const auto their_metadata = as_map(hb["__metadata__"]);
      ha.erase("__metadata__");
      hb.erase("__metadata__");
      EXPECT_EQ(ha.dump(), hb.dump());  // tensor entries in the same order with the same fields
      // Reading ours back gives the same tensors and metadata.
      const Checkpoint back = read_bytes(testing::bytes_of(ours), "ours");
      EXPECT_EQ(content_hash(back.root), content_hash(read.root));
      std::map<std::string, std::string> mb(back.metadata.begin(), back.metadata.end());
      EXPECT_EQ(mb, their_metadata);
      ++sorted_metadata;
    }
  }
  EXPECT_GE(identical, 33u);
  EXPECT_GE(sorted_metadata, 1u);
  EXPECT_GE(empty_metadata, 1u);
}

TEST(SafetensorsWriter, TorchFloat4x2IsWrittenAsF4LikeSafetensors) {
  // Tensors as a torch reader would produce them: float4_e2m1fn_x2 with torch's shape.
  const json m = manifest("dtype_float4_e2m1fn_x2");
  const std::string theirs = testing::read_all(dir() / m["file"].get<std::string>());
  const Checkpoint read = read_file(dir() / m["file"].get<std::string>());
  Value tree = Value::dict();
  for (const auto& row : m["tensors"]) {
    const Tensor& t = *read.root.as_dict().find(row["name"].get<std::string>())->as_tensor();
    std::vector<std::byte> scratch;
    auto b = t.contiguous_bytes(scratch);
    auto x2 = make_contiguous(DType::kFloat4E2M1FNx2, row["torch_shape"].get<std::vector<std::int64_t>>(),
                              Storage::owned(std::vector<std::byte>(b.begin(), b.end())));
    EXPECT_EQ(tensor_sha256(*x2), row["sha256"].get<std::string>());
    tree.as_dict().set(Value::str(row["name"].get<std::string>()), Value(x2));
  }
  EXPECT_EQ(write_bytes(tree, Format::kSafetensors), theirs);
  // A 0-d float4_e2m1fn_x2 cannot be stored (safetensors fails on it too).
  Value scalar = Value::dict();
  scalar.as_dict().set(Value::str("s"),
                       Value(make_contiguous(DType::kFloat4E2M1FNx2, {}, Storage::owned(std::vector<std::byte>(1)))));
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(scalar, Format::kSafetensors); }),
            "safetensors/dtype-unsupported");
}

std::shared_ptr<Tensor> tensor_of(DType d, std::vector<std::int64_t> shape, std::string_view bytes) {
  return make_contiguous(
      d, std::move(shape),
      Storage::owned(std::vector<std::byte>(reinterpret_cast<const std::byte*>(bytes.data()),
                                            reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size())));
}

Value golden_tree() {
  Value v = Value::dict();
  v.as_dict().set(Value::str("c"), Value(tensor_of(DType::kBool, {}, std::string_view("\x01", 1))));
  v.as_dict().set(Value::str("a"), Value(tensor_of(DType::kFloat16, {1}, std::string_view("\x00\x38", 2))));
  v.as_dict().set(Value::str("b"),
                  Value(tensor_of(DType::kInt32, {2}, std::string_view("\x01\x00\x00\x00\xff\xff\xff\xff", 8))));
  return v;
}

// The exact bytes of safetensors.torch.save_file({"b": tensor([1, -1], int32),
// "a": tensor([0.5], float16), "c": tensor(True)}, metadata={"format": "pt"}) with
// safetensors 0.8.0 / torch 2.13, pinned.
constexpr std::string_view kGoldenHex =
    "c8000000000000007b225f5f6d657461646174615f5f223a7b22666f726d6174223a227074227d2c2262223a7b"
    "226474797065223a22493332222c227368617065223a5b325d2c22646174615f6f666673657473223a5b302c38"
    "5d7d2c2261223a7b226474797065223a22463136222c227368617065223a5b315d2c22646174615f6f66667365"
    "7473223a5b382c31305d7d2c2263223a7b226474797065223a22424f4f4c222c227368617065223a5b5d2c2264"
    "6174615f6f666673657473223a5b31302c31315d7d7d20202020202001000000ffffffff003801";

using testing::hex_of;

TEST(SafetensorsWriter, GoldenBytes) {
  WriteOptions o;
  o.metadata = {{"format", "pt"}};
  const std::string ours = write_bytes(golden_tree(), Format::kSafetensors, o);
  EXPECT_EQ(hex_of(ours), kGoldenHex);
  // Readable form of the same bytes: I32 first (descending dtype order), then F16, BOOL;
  // the header padded with 6 spaces to 200 bytes.
  EXPECT_EQ(ours.substr(8, 200),
            "{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[8,10]},\"c\":{\"dtype\":\"BOOL\",\"shape\":[],"
            "\"data_offsets\":[10,11]}}      ");
}

TEST(SafetensorsWriter, GoldenEscapingAndPadding) {
  // serde_json escaping: quote, backslash, \b \f \n \r \t, other C0 as \u00XX, DEL and
  // non-ASCII raw. Pinned header text (what safetensors 0.8 writes for this name).
  Value v = Value::dict();
  v.as_dict().set(Value::str(std::string("q\"b\\\b\f\n\r\t\x01\x1f\x7f\xc3\xa9", 14)),
                  Value(tensor_of(DType::kUInt8, {1}, "z")));
  const std::string out = write_bytes(v, Format::kSafetensors);
  const Split s = split(out);
  EXPECT_EQ(s.header,
            "{\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1],"
            "\"data_offsets\":[0,1]}}     ");
  EXPECT_EQ(s.header.size() % 8, 0u);
  EXPECT_EQ(s.buffer, "z");
  // An empty tree is "{}" padded to 8.
  EXPECT_EQ(write_bytes(Value::dict(), Format::kSafetensors), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
}

TEST(SafetensorsWriter, DeterministicAcrossThreadsAndSinks) {
  const Checkpoint read = read_file(dir() / "large.safetensors");
  const std::string theirs = testing::read_all(dir() / "large.safetensors");
  const Value tree = rebuild(read.root);
  for (unsigned threads : {1u, 2u, 8u, 0u}) {
    WriteOptions o;
    o.threads = threads;
    EXPECT_EQ(write_bytes(tree, Format::kSafetensors, o), theirs) << threads;
  }
  // The mapped (zero-copy) tree writes the same as the copied one.
  EXPECT_EQ(write_bytes(read.root, Format::kSafetensors), theirs);
  // write_file goes through the atomic file sink (1 MiB buffering) and gives the same bytes.
  const auto tmp = fs::temp_directory_path() / ("tseal_st_writer_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  write_file(tree, tmp / "out.safetensors", Format::kSafetensors);
  EXPECT_EQ(testing::read_all(tmp / "out.safetensors"), theirs);
  WriteOptions nosync;
  nosync.fsync = false;
  write_file(tree, tmp / "out.safetensors", Format::kSafetensors, nosync);  // replaces
  EXPECT_EQ(testing::read_all(tmp / "out.safetensors"), theirs);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()), 1);
  fs::remove_all(tmp);
}

TEST(SafetensorsWriter, StridedViewsAreWrittenRowMajor) {
  // A transposed view of a 2x3 int16 matrix writes the same bytes as its contiguous copy.
  const std::string base("\x00\x00\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00", 12);
  auto t = tensor_of(DType::kInt16, {3, 2}, base);
  t->strides = {1, 3};  // t = m.T where m is [[0,1,2],[3,4,5]]
  ASSERT_NO_THROW(t->validate());
  const std::string transposed("\x00\x00\x03\x00\x01\x00\x04\x00\x02\x00\x05\x00", 12);
  Value a = Value::dict(), b = Value::dict();
  a.as_dict().set(Value::str("m"), Value(t));
  b.as_dict().set(Value::str("m"), Value(tensor_of(DType::kInt16, {3, 2}, transposed)));
  EXPECT_EQ(write_bytes(a, Format::kSafetensors), write_bytes(b, Format::kSafetensors));
  EXPECT_EQ(split(write_bytes(a, Format::kSafetensors)).buffer, transposed);
  // Tensors sharing one storage (tied weights) are not a flat safetensors dict; they are
  // written as a whole checkpoint (structure.h) and read back to the same content.
  auto whole = tensor_of(DType::kInt16, {6}, base);
  Value c = Value::dict();
  c.as_dict().set(Value::str("x"), Value(whole));
  c.as_dict().set(Value::str("y"), Value(std::shared_ptr<const Tensor>(whole)));
  const std::string out = write_bytes(c, Format::kSafetensors);
  EXPECT_EQ(content_hash(read_bytes(testing::bytes_of(out), "tied").root), content_hash(c));
}

TEST(SafetensorsWriter, RoundTripsEveryFixture) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c);
    const Checkpoint read = read_file(dir() / (c + ".safetensors"));
    WriteOptions o;
    o.metadata = read.metadata;
    const std::string once = write_bytes(read.root, Format::kSafetensors, o);
    const Checkpoint back = read_bytes(testing::bytes_of(once), c);
    EXPECT_EQ(content_hash(back.root), content_hash(read.root));
    std::map<std::string, std::string> m1(read.metadata.begin(), read.metadata.end()),
        m2(back.metadata.begin(), back.metadata.end());
    EXPECT_EQ(m1, m2);
    // Canonical: writing what was read from our own output changes nothing.
    WriteOptions o2;
    o2.metadata = back.metadata;
    EXPECT_EQ(write_bytes(back.root, Format::kSafetensors, o2), once);
  }
}

}  // namespace
}  // namespace tensorseal
