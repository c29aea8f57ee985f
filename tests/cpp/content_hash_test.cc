// The content hash (docs/content-hash.md). Golden vectors are checked three ways: the
// library, the literals pinned here, and an independent Python implementation of the
// documented encoding (tests/fixtures/gen_content_hash.py, hashlib only) must agree.
// The trees below are built exactly as in that script's trees().
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.h"

namespace tensorseal {
namespace {

using json = nlohmann::json;

// ---- building blocks ------------------------------------------------------------

std::vector<std::byte> raw(const void* p, std::size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  return {b, b + n};
}
template <typename T>
std::vector<std::byte> pack(std::initializer_list<T> xs) {
  std::vector<T> v(xs);
  return raw(v.data(), v.size() * sizeof(T));
}
std::shared_ptr<Tensor> tensor(DType d, std::vector<std::int64_t> shape, std::vector<std::byte> bytes) {
  return make_contiguous(d, std::move(shape), Storage::owned(std::move(bytes), d));
}
void put(Value& dict, Value key, Value v) { dict.as_dict().set(std::move(key), std::move(v)); }
Value big(std::string le) { return Value(BigInt{std::move(le)}); }
double from_bits(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// ---- the trees (same as gen_content_hash.py) --------------------------------------

Value empty_dict() { return Value::dict(); }

Value one_f32() {
  Value v = Value::dict();
  put(v, testing::str("w"), Value(tensor(DType::kFloat32, {3}, pack<float>({1.0f, -2.5f, 0.0f}))));
  return v;
}

Value scalars() {
  Value v = Value::dict();
  put(v, testing::str("none"), Value());
  put(v, testing::str("true"), Value(true));
  put(v, testing::str("false"), Value(false));
  put(v, testing::str("i0"), Value(0));
  put(v, testing::str("i1"), Value(1));
  put(v, testing::str("im1"), Value(-1));
  put(v, testing::str("i127"), Value(127));
  put(v, testing::str("i128"), Value(128));
  put(v, testing::str("im128"), Value(-128));
  put(v, testing::str("im129"), Value(-129));
  put(v, testing::str("imax"), Value(std::int64_t{INT64_MAX}));
  put(v, testing::str("imin"), Value(std::int64_t{INT64_MIN}));
  put(v, testing::str("big"), big(std::string("\0\0\0\0\0\0\0\0\x01", 9)));       // 2**64
  put(v, testing::str("bigneg"), big(std::string("\x03\0\0\0\0\0\0\0\xc0", 9)));  // -(2**70) + 3
  put(v, testing::str("fz"), Value(0.0));
  put(v, testing::str("nz"), Value(-0.0));
  put(v, testing::str("nan"), Value(from_bits(0x7FF8000000000123ull)));
  put(v, testing::str("pi"), Value(3.141592653589793));
  put(v, testing::str("s"), testing::str("h\xc3\xa9llo \xf0\x9f\x99\x82"));
  put(v, testing::str("es"), testing::str(""));
  put(v, testing::str("b"), Value::bytes(std::string("\x00\xff", 2)));
  put(v, testing::str("ba"), Value::bytes("xy", /*bytearray=*/true));
  put(v, testing::str("l"), Value::list({Value(1), testing::str("a"), Value(), Value::list()}));
  put(v, testing::str("tu"), Value::tuple({Value(1), Value::tuple({Value(2)})}));
  Value deep = Value::dict(), k = Value::dict();
  put(deep, testing::str("deep"), Value::list({Value(1.5)}));
  put(k, testing::str("k"), deep);
  put(v, testing::str("nested"), k);
  put(v, Value(3), testing::str("int key"));
  auto set = std::make_shared<Set>();
  set->items = {Value(3), Value(1), Value(2)};
  put(v, testing::str("set"), Value(set));
  auto fset = std::make_shared<Set>();
  fset->items = {testing::str("a")};
  fset->frozen = true;
  put(v, testing::str("fset"), Value(fset));
  put(v, testing::str("t"), Value(tensor(DType::kInt64, {2, 2}, pack<std::int64_t>({1, -2, 3, -4}))));
  return v;
}

Value opaque() {
  Value v = Value::dict();
  put(v, testing::str("g"), Value::global("collections", "OrderedDict"));
  auto o = std::make_shared<Object>();
  o->how = Construct::kNewObj;
  o->callable = std::make_shared<Value>(Value::global("torch._utils", "_rebuild_parameter"));
  o->args =
      std::make_shared<Value>(Value::tuple({Value(tensor(DType::kFloat32, {1}, pack<float>({1.0f}))), Value(true)}));
  Value state = Value::dict();
  put(state, testing::str("x"), Value(1));
  o->state = std::make_shared<Value>(state);
  o->list_items = {Value(1)};
  o->dict_items = {{testing::str("k"), testing::str("v")}, {testing::str("a"), Value()}};
  put(v, testing::str("o"), Value(o));
  return v;
}

constexpr std::size_t kLargeU8 = (5u << 19) + 3;   // 2.5 MiB + 3 bytes: 3 chunks
constexpr std::size_t kLargeF32 = (1u << 18) + 1;  // 1 MiB + 4 bytes: 2 chunks

Value large() {
  std::vector<std::byte> u8(kLargeU8);
  for (std::size_t i = 0; i < u8.size(); ++i) u8[i] = static_cast<std::byte>((i * 31 + 7) & 0xff);
  std::vector<float> f(kLargeF32);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i % 1000) * 0.5f;
  Value v = Value::dict();
  put(v, testing::str("u8"), Value(tensor(DType::kUInt8, {static_cast<std::int64_t>(kLargeU8)}, std::move(u8))));
  put(v, testing::str("f32"),
      Value(tensor(DType::kFloat32, {static_cast<std::int64_t>(kLargeF32)}, raw(f.data(), f.size() * 4))));
  return v;
}

// m = [[0,1,2],[3,4,5]] (int16); the tree holds the strided view m.T.
std::shared_ptr<Tensor> transposed_view() {
  auto t = tensor(DType::kInt16, {3, 2}, pack<std::int16_t>({0, 1, 2, 3, 4, 5}));
  t->strides = {1, 3};
  return t;
}
Value strided() {
  Value v = Value::dict();
  put(v, testing::str("m"), Value(transposed_view()));
  return v;
}
Value strided_copy() {
  Value v = Value::dict();
  put(v, testing::str("m"), Value(tensor(DType::kInt16, {3, 2}, pack<std::int16_t>({0, 3, 1, 4, 2, 5}))));
  return v;
}

constexpr std::int64_t kRows = 600, kCols = 512;
std::vector<float> big_matrix() {  // rows x cols, m[c][r] = (c * cols + r) * 0.25
  std::vector<float> m(kRows * kCols);
  for (std::int64_t i = 0; i < kRows * kCols; ++i) m[i] = static_cast<float>(i) * 0.25f;
  return m;
}
Value large_strided() {
  auto m = big_matrix();
  auto t = tensor(DType::kFloat32, {kCols, kRows}, raw(m.data(), m.size() * 4));
  t->strides = {1, kCols};
  Value v = Value::dict();
  put(v, testing::str("t"), Value(t));
  return v;
}
Value large_strided_copy() {
  auto m = big_matrix();
  std::vector<float> tr(m.size());
  for (std::int64_t r = 0; r < kCols; ++r)
    for (std::int64_t c = 0; c < kRows; ++c) tr[r * kRows + c] = m[c * kCols + r];
  Value v = Value::dict();
  put(v, testing::str("t"), Value(tensor(DType::kFloat32, {kCols, kRows}, raw(tr.data(), tr.size() * 4))));
  return v;
}

Value shared() {
  auto storage = Storage::owned(pack<float>({1.0f, 2.0f, 3.0f, 4.0f}), DType::kFloat32);
  auto a = make_contiguous(DType::kFloat32, {2}, storage);
  auto b = make_contiguous(DType::kFloat32, {3}, storage);
  b->storage_offset = 1;  // overlaps a
  Value v = Value::dict();
  put(v, testing::str("a"), Value(a));
  put(v, testing::str("b"), Value(b));
  put(v, testing::str("c"), Value(std::shared_ptr<const Tensor>(a)));  // the same node again
  return v;
}

Value storage_leaf() {
  Value v = Value::dict();
  put(v, testing::str("s"), Value(Storage::owned(pack<float>({1.0f, 2.0f}), DType::kFloat32)));
  return v;
}

Value param() {
  auto p = tensor(DType::kFloat32, {2}, pack<float>({1.0f, 2.0f}));
  p->requires_grad = true;
  p->is_parameter = true;
  auto g = tensor(DType::kFloat32, {2}, pack<float>({1.0f, 2.0f}));
  g->requires_grad = true;
  Value v = Value::dict();
  put(v, testing::str("p"), Value(p));
  put(v, testing::str("g"), Value(g));
  return v;
}

Value zero_size() {
  Value v = Value::dict();
  put(v, testing::str("e"), Value(tensor(DType::kFloat32, {0, 3}, {})));
  put(v, testing::str("s"), Value(tensor(DType::kFloat64, {}, pack<double>({2.0}))));
  put(v, testing::str("b"), Value(tensor(DType::kBool, {2}, pack<std::uint8_t>({1, 0}))));
  put(v, testing::str("bf"), Value(tensor(DType::kBFloat16, {1}, pack<std::uint8_t>({0x80, 0x3f}))));
  return v;
}

// An OrderedDict with _metadata, keys in another order: hashes as the plain dict
// {"b": f32[1] 2.0, "a": [1, 2]} of the Python tree "ordered".
Value ordered(DictKind kind, bool reversed, bool with_attrs) {
  Value v = Value::dict(kind);
  Value b = Value(tensor(DType::kFloat32, {1}, pack<float>({2.0f})));
  Value a = Value::list({Value(1), Value(2)});
  if (reversed) {
    put(v, testing::str("a"), a);
    put(v, testing::str("b"), b);
  } else {
    put(v, testing::str("b"), b);
    put(v, testing::str("a"), a);
  }
  if (with_attrs) {
    v.as_dict().attrs = std::make_shared<Dict>();
    Value meta = Value::dict();
    put(meta, testing::str("version"), Value(1));
    v.as_dict().attrs->set(testing::str("_metadata"), meta);
  }
  return v;
}

// Python complex values (tag 'C'), next to the float they must differ from.
Value complex_values() {
  Value v = Value::dict();
  put(v, testing::str("z"), Value(Complex{1.5, -2.0}));
  put(v, testing::str("nz"), Value(Complex{-0.0, 0.0}));
  put(v, testing::str("inf"), Value(Complex{std::numeric_limits<double>::infinity(), 3.0}));
  put(v, testing::str("l"), Value::list({Value(Complex{0.0, 1.0}), Value(Complex{2.0, 0.0}), Value(2.0)}));
  return v;
}

// The same element as a torch tensor, a numpy.ndarray and a numpy scalar (flag bits 2
// and 3), and a numpy array inside a tuple like np.random.get_state()'s.
Value numpy_values() {
  auto typed = [](NumpyType n, DType dt, std::vector<std::int64_t> shape, std::vector<std::byte> data) {
    auto t = tensor(dt, std::move(shape), std::move(data));
    t->numpy = n;
    return Value(std::shared_ptr<const Tensor>(t));
  };
  Value v = Value::dict();
  put(v, testing::str("t"), typed(NumpyType::kNone, DType::kFloat64, {}, pack<double>({1.5})));
  put(v, testing::str("a"), typed(NumpyType::kArray, DType::kFloat64, {}, pack<double>({1.5})));
  put(v, testing::str("s"), typed(NumpyType::kScalar, DType::kFloat64, {}, pack<double>({1.5})));
  put(v, testing::str("rng"),
      Value::tuple({testing::str("MT19937"),
                    typed(NumpyType::kArray, DType::kUInt32, {3}, pack<std::uint32_t>({5, 6, 7})), Value(624), Value(0),
                    Value(0.0)}));
  return v;
}

// Quantized tensors (tag 'Q'): per-tensor and per-channel parameters, and the same
// integers as a plain int8 tensor.
Value quantized_values() {
  auto ints = pack<std::int8_t>({-3, -2, -1, 0, 1, 2});
  auto pt = tensor(DType::kQInt8, {2, 3}, ints);
  auto q = std::make_shared<Quantization>();
  q->scale = 0.5;
  q->zero_point = 3;
  pt->quantization = q;
  auto pc = tensor(DType::kQUInt8, {2, 3}, pack<std::uint8_t>({0, 1, 2, 3, 4, 5}));
  auto qc = std::make_shared<Quantization>();
  qc->scheme = Quantization::Scheme::kPerChannelAffine;
  qc->scales = tensor(DType::kFloat64, {2}, pack<double>({0.1, 0.2}));
  qc->zero_points = tensor(DType::kInt64, {2}, pack<std::int64_t>({1, 2}));
  qc->axis = 0;
  pc->quantization = qc;
  Value v = Value::dict();
  put(v, testing::str("pt"), Value(pt));
  put(v, testing::str("pc"), Value(pc));
  put(v, testing::str("plain"), Value(tensor(DType::kInt8, {2, 3}, ints)));
  return v;
}

// Tensors with Python attributes (flag bit 4), a Parameter with some, and the same
// tensor without.
Value attribute_values() {
  auto one = pack<float>({1.0f, -2.0f});
  auto cloned = tensor(DType::kFloat32, {2}, one);
  Value a = Value::dict();
  put(a, testing::str("_has_been_cloned"), Value(true));
  cloned->attributes = std::make_shared<const Value>(a);
  auto param = tensor(DType::kFloat32, {2}, one);
  param->is_parameter = true;
  param->requires_grad = true;
  Value b = Value::dict();
  put(b, testing::str("tag"), testing::str("w"));
  put(b, testing::str("n"), Value::list({Value(1), Value(2)}));
  param->attributes = std::make_shared<const Value>(b);
  Value v = Value::dict();
  put(v, testing::str("cloned"), Value(std::shared_ptr<const Tensor>(cloned)));
  put(v, testing::str("param"), Value(std::shared_ptr<const Tensor>(param)));
  put(v, testing::str("plain"), Value(tensor(DType::kFloat32, {2}, one)));
  return v;
}

// Recursive values (docs/content-hash.md "Recursive values"), as the Python reference
// builds them: the back edges are Refs here, plain references there.
Value recursive_values() {
  Value selfish = Value::list();
  selfish.as_list().items.push_back(Value::ref_to(selfish));
  Value d = Value::dict();
  put(d, testing::str("name"), testing::str("root"));
  put(d, testing::str("me"), Value::ref_to(d));
  auto object = [](const char* module, const char* name) {
    auto o = std::make_shared<Object>();
    o->how = Construct::kNewObj;
    o->callable = std::make_shared<Value>(Value::global(module, name));
    o->args = std::make_shared<Value>(Value::tuple());
    return o;
  };
  auto parent = object("omegaconf.dictconfig", "DictConfig");
  auto child = object("omegaconf.listconfig", "ListConfig");
  Value cstate = Value::dict();
  put(cstate, testing::str("_parent"), Value::ref_to(Value(parent)));
  put(cstate, testing::str("_content"), Value::list({Value(1), Value(2)}));
  child->state = std::make_shared<Value>(cstate);
  Value content = Value::dict();
  put(content, testing::str("lr"), Value(0.1));
  put(content, testing::str("layers"), Value(child));
  Value pstate = Value::dict();
  put(pstate, testing::str("_parent"), Value());
  put(pstate, testing::str("_content"), content);
  parent->state = std::make_shared<Value>(pstate);
  Value v = Value::dict();
  put(v, testing::str("list"), selfish);
  put(v, testing::str("dict"), d);
  put(v, testing::str("hparams"), Value(parent));
  put(v, testing::str("pair"), Value::list({selfish, Value::list({selfish})}));
  return v;
}

// ---- golden vectors -----------------------------------------------------------------

struct Golden {
  const char* name;
  Value (*build)();
  const char* sha256;
  const char* xxh3;
};

Value ordered_default() { return ordered(DictKind::kOrderedDict, true, true); }

const Golden kGolden[] = {
    {"empty_dict", empty_dict, "sha256:c9e552885b83fc0b0b06bbcab7cdbab09d6a3761ff99a75a41a5dd3dd0c966d6",
     "xxh3:6c2d57bd934b796e407be229433d06c0"},
    {"one_f32", one_f32, "sha256:b14ccbcdf28cc991cf70ee93852499d0b2ce7a40b048fb99b3e39b432dda463b",
     "xxh3:960c708f7bd7d1415a3a86ea54f966f5"},
    {"scalars", scalars, "sha256:76a10ae5add12f38bbb53abbd20fd9457a125003727810583a302c2a43982387",
     "xxh3:ea64483996c82d61cf00c30fa1c2bb79"},
    {"opaque", opaque, "sha256:57a2384bb0e825a52d035f17f5bfd8b81db93872eabb0bcf04cb95feb85c97f9",
     "xxh3:ef8077c06e2521c4a3e1ebcb6f50726a"},
    {"large", large, "sha256:37ac65e86b26642e1a3da8251e31ec23a3c4d987bc24012987d86caabbe5a96e",
     "xxh3:851a415c2bdb793713b50e495de7bba3"},
    {"strided", strided, "sha256:4006bf25cf74d57dcb5c47023ee57c07a134fb77f0203f629ea5c94c2c95eb84",
     "xxh3:f4162d7f00fe922582af5d94762f2a15"},
    {"strided", strided_copy, "sha256:4006bf25cf74d57dcb5c47023ee57c07a134fb77f0203f629ea5c94c2c95eb84",
     "xxh3:f4162d7f00fe922582af5d94762f2a15"},
    {"large_strided", large_strided, "sha256:9507de43a59901e0ba3d6c9ca5e9b194cebc7b1359222ac61f9118ad37c9b629",
     "xxh3:ac8969987d0809cc5f14ac93ff91abd5"},
    {"large_strided", large_strided_copy, "sha256:9507de43a59901e0ba3d6c9ca5e9b194cebc7b1359222ac61f9118ad37c9b629",
     "xxh3:ac8969987d0809cc5f14ac93ff91abd5"},
    {"shared", shared, "sha256:3cd104acd339c524139c998f7098d85c733decc6679472adc795af3fbee21e9f",
     "xxh3:aceb45d9f518ed5528a9978a5721db00"},
    {"storage_leaf", storage_leaf, "sha256:e208cb4cef6dd9f326fc702a27e1e3fbe5055d6e74104a681d6fb46d1309ffbc",
     "xxh3:c8a03877e56dd315ab33289ba942a294"},
    {"param", param, "sha256:21aca2fe32fcd88030111ab033d5baf492cbfac2f41263797e58a1c909663eed",
     "xxh3:0f0fbea91e66974520c620fb6430b5fa"},
    {"zero_size", zero_size, "sha256:26523acae4ef6364e2d4debd3b50ebf6797d396dfc02471600a9f96f0e356526",
     "xxh3:4d3bc74a4f9a15bc01c56f6a5b01a8e8"},
    {"ordered", ordered_default, "sha256:43796f961547d00088862390dedcff7a2623186158a5ce742a8774babf6ca294",
     "xxh3:db0fb62bf1de2970543ffbaf60bd9989"},
    {"complex", complex_values, "sha256:4437007572c4e419ad7028650a6b2ce42267f5c091306524ca48246345eea4c6",
     "xxh3:a2c1c305c4039bc312e6a4991546a5b3"},
    {"numpy", numpy_values, "sha256:4b109047efe90ed674324d90b5fac06ff4755ec96ffe0da58df98f5d0014bc56",
     "xxh3:bb20378aa8290f19c3915ee4fadc903c"},
    {"quantized", quantized_values, "sha256:39267447d46cc98d8e8a8451e89efb644c8101ef3031bbae65f814914972fc55",
     "xxh3:2c1ae659733229acb199268a07b4579e"},
    {"attributes", attribute_values, "sha256:fb9cae5fb676567a3efca08415d34822815fce03a25c6717c5d7e03aacda34a4",
     "xxh3:2a9825ddfe50fbeb2f7c9dfbed112e26"},
    {"recursive", recursive_values, "sha256:270c00738ec8c86be9b45bcda47f87b29614e055d54e79487ef3baeee621dd3a",
     "xxh3:e55030a03cc52ce2ecd610cf3bce054a"},
};

json reference() {
  const auto text = testing::read_all(testing::fixture_dir("gen_content_hash") / "vectors.json");
  return text.empty() ? json() : json::parse(text);
}

std::string hash(const Value& v, HashAlgo algo = HashAlgo::kSha256, unsigned threads = 0) {
  HashOptions o;
  o.algo = algo;
  o.threads = threads;
  return content_hash(v, o);
}

TEST(ContentHash, GoldenVectorsSha256MatchPinsAndPythonReference) {
  const json ref = reference();
  ASSERT_TRUE(ref.is_object()) << "run tests/fixtures/gen_content_hash.py (ctest does it)";
  for (const auto& g : kGolden) {
    SCOPED_TRACE(g.name);
    const std::string got = hash(g.build());
    EXPECT_EQ(got, g.sha256);  // code == pin
    ASSERT_TRUE(ref.contains(g.name));
    EXPECT_EQ(ref[g.name]["sha256"].get<std::string>(), g.sha256);  // Python reference == pin
  }
}

TEST(ContentHash, GoldenVectorsXxh3) {
  const json ref = reference();
  for (const auto& g : kGolden) {
    SCOPED_TRACE(g.name);
    const std::string got = hash(g.build(), HashAlgo::kXxh3);
    EXPECT_EQ(got, g.xxh3);
    // The pins were computed by the Python reference with the xxhash module; it runs
    // the xxh3 part only where that module is installed.
    if (ref.is_object() && ref[g.name].contains("xxh3")) EXPECT_EQ(ref[g.name]["xxh3"].get<std::string>(), g.xxh3);
    EXPECT_EQ(got.size(), 5u + 32u);
    EXPECT_EQ(got.rfind("xxh3:", 0), 0u);
  }
}

TEST(ContentHash, FormatIsAlgoColonLowercaseHex) {
  const std::string h = hash(one_f32());
  ASSERT_EQ(h.size(), 7u + 64u);
  EXPECT_EQ(h.substr(0, 7), "sha256:");
  for (char c : h.substr(7)) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << c;
}

// ---- invariance -----------------------------------------------------------------------

TEST(ContentHash, IndependentOfDictOrderAndKind) {
  const std::string want = hash(ordered(DictKind::kDict, false, false));
  EXPECT_EQ(hash(ordered(DictKind::kDict, true, false)), want);
  EXPECT_EQ(hash(ordered(DictKind::kOrderedDict, false, false)), want);
  EXPECT_EQ(hash(ordered(DictKind::kOrderedDict, true, true)), want);
  EXPECT_EQ(hash(ordered(DictKind::kCounter, true, false)), want);
  // But a dict is not a list of pairs.
  Value pairs = Value::list({Value::tuple({testing::str("a"), Value::list({Value(1), Value(2)})})});
  EXPECT_NE(hash(pairs), want);
}

TEST(ContentHash, IndependentOfThreadCount) {
  for (Value (*build)() : {large, large_strided, scalars, shared}) {
    const Value v = build();
    const std::string one = hash(v, HashAlgo::kSha256, 1);
    for (unsigned t : {2u, 8u, 0u}) EXPECT_EQ(hash(v, HashAlgo::kSha256, t), one) << t;
    const std::string x1 = hash(v, HashAlgo::kXxh3, 1);
    for (unsigned t : {2u, 8u}) EXPECT_EQ(hash(v, HashAlgo::kXxh3, t), x1) << t;
  }
}

TEST(ContentHash, StridedEqualsContiguousAndSharingDoesNotMatter) {
  EXPECT_EQ(hash(strided()), hash(strided_copy()));
  EXPECT_EQ(hash(large_strided()), hash(large_strided_copy()));
  // Shared storage vs separate copies of the same elements.
  Value separate = Value::dict();
  put(separate, testing::str("a"), Value(tensor(DType::kFloat32, {2}, pack<float>({1.0f, 2.0f}))));
  put(separate, testing::str("b"), Value(tensor(DType::kFloat32, {3}, pack<float>({2.0f, 3.0f, 4.0f}))));
  put(separate, testing::str("c"), Value(tensor(DType::kFloat32, {2}, pack<float>({1.0f, 2.0f}))));
  EXPECT_EQ(hash(separate), hash(shared()));
  // A view with a storage offset in a larger storage.
  auto s = Storage::owned(pack<float>({9.0f, 1.0f, -2.5f, 0.0f, 9.0f}), DType::kFloat32);
  auto view = make_contiguous(DType::kFloat32, {3}, s);
  view->storage_offset = 1;
  Value v = Value::dict();
  put(v, testing::str("w"), Value(view));
  EXPECT_EQ(hash(v), hash(one_f32()));
}

TEST(ContentHash, StorageDtypeOfTensorsDoesNotMatter) {
  auto t = tensor(DType::kFloat32, {3}, pack<float>({1.0f, -2.5f, 0.0f}));
  auto s = Storage::owned(pack<float>({1.0f, -2.5f, 0.0f}), DType::kUInt8);
  t->storage = s;
  Value v = Value::dict();
  put(v, testing::str("w"), Value(t));
  EXPECT_EQ(hash(v), hash(one_f32()));
}

// ---- sensitivity ---------------------------------------------------------------------

TEST(ContentHash, EveryMeaningfulChangeChangesTheHash) {
  const std::string base = hash(one_f32());
  auto variant = [](auto&& edit) {
    auto t = tensor(DType::kFloat32, {3}, pack<float>({1.0f, -2.5f, 0.0f}));
    edit(*t);
    Value v = Value::dict();
    put(v, testing::str("w"), Value(t));
    return hash(v);
  };
  std::map<std::string, std::string> seen;
  // One bit flipped in one element.
  for (int bit : {0, 7, 31}) {
    auto b = pack<float>({1.0f, -2.5f, 0.0f});
    b[4 + bit / 8] ^= static_cast<std::byte>(1 << (bit % 8));
    Value v = Value::dict();
    put(v, testing::str("w"), Value(tensor(DType::kFloat32, {3}, b)));
    seen["bit" + std::to_string(bit)] = hash(v);
  }
  seen["dtype"] = variant([](Tensor& t) { t.dtype = DType::kInt32; });
  seen["shape"] = variant([](Tensor& t) {
    t.shape = {3, 1};
    t.strides = {1, 1};
  });
  seen["shape1"] = variant([](Tensor& t) {
    t.shape = {1, 3};
    t.strides = {3, 1};
  });
  seen["requires_grad"] = variant([](Tensor& t) { t.requires_grad = true; });
  seen["parameter"] = variant([](Tensor& t) { t.is_parameter = true; });
  {
    Value v = Value::dict();
    put(v, testing::str("W"), Value(tensor(DType::kFloat32, {3}, pack<float>({1.0f, -2.5f, 0.0f}))));
    seen["key"] = hash(v);
  }
  {
    Value v = Value::dict(), inner = Value::dict();
    put(inner, testing::str("w"), Value(tensor(DType::kFloat32, {3}, pack<float>({1.0f, -2.5f, 0.0f}))));
    put(v, testing::str("m"), inner);
    seen["nesting"] = hash(v);
  }
  std::set<std::string> distinct{base};
  for (const auto& [what, h] : seen) {
    EXPECT_NE(h, base) << what;
    distinct.insert(h);
  }
  EXPECT_EQ(distinct.size(), seen.size() + 1);  // all different from each other too
}

TEST(ContentHash, ScalarKindsAreDistinguished) {
  auto one = [](Value x) {
    Value v = Value::list({std::move(x)});
    return hash(v);
  };
  std::set<std::string> h{one(Value()),
                          one(Value(false)),
                          one(Value(0)),
                          one(Value(0.0)),
                          one(Value(-0.0)),
                          one(testing::str("")),
                          one(Value::bytes("")),
                          one(Value::list()),
                          one(Value::tuple()),
                          one(Value::dict()),
                          one(Value(from_bits(0x7FF8000000000000ull))),
                          one(Value(from_bits(0x7FF8000000000001ull)))};
  EXPECT_EQ(h.size(), 12u);
  // bytes and bytearray hash alike; set and frozenset alike.
  EXPECT_EQ(one(Value::bytes("xy")), one(Value::bytes("xy", true)));
  auto s1 = std::make_shared<Set>(), s2 = std::make_shared<Set>();
  s1->items = {Value(1), Value(2)};
  s2->items = {Value(2), Value(1)};
  s2->frozen = true;
  EXPECT_EQ(one(Value(s1)), one(Value(s2)));
  // An int that fits is the same whether it came as BigInt or int.
  EXPECT_EQ(one(Value(BigInt{std::string("\x80\0", 2)})), one(Value(128)));
}

// ---- tensor_sha256 ---------------------------------------------------------------------

TEST(ContentHash, TensorSha256IsPlainSha256OfElementBytes) {
  // sha256 of f32 [1.0, -2.5, 0.0] little-endian, as hashlib computes it.
  auto t = tensor(DType::kFloat32, {3}, pack<float>({1.0f, -2.5f, 0.0f}));
  EXPECT_EQ(tensor_sha256(*t), sha256_hex(pack<float>({1.0f, -2.5f, 0.0f})));
  // hashlib.sha256(b"").hexdigest() and hashlib.sha256(b"abc").hexdigest().
  EXPECT_EQ(tensor_sha256(*tensor(DType::kFloat32, {0}, {})),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string abc = "abc";
  EXPECT_EQ(tensor_sha256(*tensor(DType::kUInt8, {3}, raw(abc.data(), 3))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Strided: the row-major gather.
  EXPECT_EQ(tensor_sha256(*transposed_view()), sha256_hex(pack<std::int16_t>({0, 3, 1, 4, 2, 5})));
  // Many at once, any thread count, same order.
  std::vector<TensorRef> refs = {
      {"a", t}, {"b", transposed_view()}, {"c", tensor(DType::kUInt8, {3}, raw(abc.data(), 3))}};
  for (unsigned threads : {1u, 3u, 0u}) {
    const auto all = tensor_sha256_all(refs, threads);
    ASSERT_EQ(all.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(all[i], tensor_sha256(*refs[i].tensor));
  }
}

// A tensor over a pieced storage (DCP chunks streamed, Storage::pieced) hashes as the
// same tensor over one buffer: 1 MiB units inside one piece are hashed in place, units
// across pieces are copied together first; nothing joins the storage.
TEST(ContentHash, PiecedStorageHashesAsOneBufferWithoutJoining) {
  std::vector<std::byte> all(3 * (1u << 20) + 12345);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::byte>((i * 131) ^ (i >> 9));
  auto owner = std::make_shared<std::vector<std::byte>>(all);
  const std::span<const std::byte> b(*owner);
  // Pieces: 1.5 MiB, 7 bytes, 600 KiB, then the rest (cuts inside and across units).
  const std::size_t cuts[] = {0, 3u << 19, (3u << 19) + 7, (3u << 19) + 7 + 600 * 1024, all.size()};
  std::vector<std::span<const std::byte>> pieces;
  for (std::size_t i = 0; i + 1 < std::size(cuts); ++i) pieces.push_back(b.subspan(cuts[i], cuts[i + 1] - cuts[i]));
  int joins = 0;
  auto pieced = Storage::pieced(pieces, {owner}, [&] {
    ++joins;
    return Storage::owned(all);
  });
  auto whole = Storage::owned(all);
  const std::int64_t n = static_cast<std::int64_t>(all.size() / 4);
  for (unsigned threads : {1u, 2u}) {
    EXPECT_EQ(hash(Value(make_contiguous(DType::kFloat32, {n}, pieced)), HashAlgo::kSha256, threads),
              hash(Value(make_contiguous(DType::kFloat32, {n}, whole)), HashAlgo::kSha256, threads));
  }
  EXPECT_EQ(joins, 0);
  std::size_t runs = 0;
  make_contiguous(DType::kFloat32, {n}, pieced)->for_each_run([&](std::span<const std::byte>) { ++runs; });
  EXPECT_EQ(runs, 4u);
  // A view starting inside the first piece and ending inside the third: cut runs.
  Tensor mid = *make_contiguous(DType::kUInt8, {1 << 20}, pieced);
  mid.storage_offset = 1 << 19;
  std::vector<std::byte> got;
  mid.for_each_run([&](std::span<const std::byte> r) { got.insert(got.end(), r.begin(), r.end()); });
  EXPECT_EQ(got, std::vector<std::byte>(all.begin() + (1 << 19), all.begin() + (1 << 19) + (1 << 20)));
  EXPECT_EQ(joins, 0);
  // Whoever needs one buffer gets it, joined once.
  std::vector<std::byte> scratch;
  const auto cb = mid.contiguous_bytes(scratch);
  EXPECT_EQ(std::vector<std::byte>(cb.begin(), cb.end()), got);
  EXPECT_EQ(joins, 1);
  // A window of a pieced storage is pieced (what the DCP writer cuts chunks with).
  int joins2 = 0;
  auto again = Storage::pieced(pieces, {owner}, [&] {
    ++joins2;
    return Storage::owned(all);
  });
  auto window = Storage::slice(again, 100, 2u << 20);
  EXPECT_EQ(window->pieces().size(), 3u);
  std::vector<std::byte> w;
  for (const auto& p : window->pieces()) w.insert(w.end(), p.begin(), p.end());
  EXPECT_EQ(w, std::vector<std::byte>(all.begin() + 100, all.begin() + 100 + (2u << 20)));
  EXPECT_EQ(joins2, 0);
  EXPECT_EQ(std::vector<std::byte>(window->bytes().begin(), window->bytes().end()), w);
  EXPECT_EQ(joins2, 1);
}

}  // namespace
}  // namespace tensorseal
