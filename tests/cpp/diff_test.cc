// diff and the element decoder, against pairs made by real torch + safetensors
// (tests/fixtures/gen_tools.py) and a few hand-built value trees.
#include "tensorseal/diff.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tools/elements.h"

namespace tensorseal {
namespace {

using nlohmann::json;

json expected() { return json::parse(testing::read_all(testing::tools_fixture("expected.json"))); }

DiffReport diff_files(const std::string& a, const std::string& b, DiffOptions o = {}) {
  return diff(read_file(testing::tools_fixture(a)), read_file(testing::tools_fixture(b)), o);
}

const TensorDiff& tensor(const DiffReport& r, const std::string& path) {
  for (const auto& t : r.tensors)
    if (t.path == path) return t;
  throw std::runtime_error("no tensor " + path);
}

std::shared_ptr<Tensor> make(DType d, std::vector<std::int64_t> shape, const std::vector<std::byte>& bytes) {
  return make_contiguous(d, std::move(shape), Storage::owned(bytes));
}

template <typename T>
std::shared_ptr<Tensor> make_of(DType d, std::vector<std::int64_t> shape, const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return make(d, std::move(shape), b);
}

Checkpoint ckpt(Value root) {
  Checkpoint c;
  c.root = std::move(root);
  return c;
}

Value dict_of(std::vector<std::pair<std::string, Value>> kv) {
  Value d = Value::dict();
  for (auto& [k, v] : kv) d.as_dict().set(Value::str(k), v);
  return d;
}

// ---- element decoding ---------------------------------------------------------------

// Every bit pattern of every float8 dtype (and of float16/bfloat16) decodes to exactly
// the float32 torch gives for it.
TEST(Elements, DecodeMatchesTorchForEveryBitPattern) {
  Checkpoint c = read_file(testing::tools_fixture("dtypes.safetensors"));
  const Dict& d = c.root.as_dict();
  int checked = 0;
  for (const char* n : {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
                        "float16", "bfloat16"}) {
    SCOPED_TRACE(n);
    const auto& x = d.find(std::string_view(n))->as_tensor();
    const auto& f = d.find(std::string_view(std::string(n) + ".f32"))->as_tensor();
    ASSERT_EQ(x->dtype, *dtype_from_name(n));
    const auto& codec = detail::tools::codec(x->dtype);
    ASSERT_TRUE(codec.decodable);
    const auto xb = x->storage->bytes();
    const auto fb = f->storage->bytes();
    ASSERT_EQ(x->numel(), f->numel());
    for (std::uint64_t i = 0; i < x->numel(); ++i) {
      float want;
      std::memcpy(&want, fb.data() + 4 * i, 4);
      const double got = detail::tools::component_value(codec, xb.data() + i * codec.size);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << "pattern " << i << " got " << got;
        ASSERT_TRUE(detail::tools::float_is_nan(codec, detail::tools::load_bits(codec, xb.data() + i * codec.size)));
      } else {
        ASSERT_EQ(got, static_cast<double>(want)) << "pattern " << i;
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << "pattern " << i;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 * 256 + 2 * 65536);
}

// Consecutive representable values have consecutive ordinals (so ULP distance counts
// representable values between two numbers); both zeros share ordinal 0.
TEST(Elements, OrdinalIsMonotonicForEveryFloat8) {
  for (DType d : {DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2FNUZ,
                  DType::kFloat8E8M0FNU, DType::kFloat16}) {
    SCOPED_TRACE(std::string(name(d)));
    const auto& c = detail::tools::codec(d);
    std::map<double, __int128> by_value;  // value -> ordinal (zeros merge)
    const std::uint64_t n = std::uint64_t{1} << (8 * c.size);
    for (std::uint64_t b = 0; b < n; ++b) {
      const double v = detail::tools::float_from_bits(c, b);
      if (std::isnan(v)) continue;
      auto [it, fresh] = by_value.emplace(v, detail::tools::float_ordinal(c, b));
      if (!fresh) EXPECT_EQ(it->second, detail::tools::float_ordinal(c, b)) << "value " << v;
    }
    __int128 prev = 0;
    bool first = true;
    for (const auto& [v, ord] : by_value) {
      if (!first) EXPECT_EQ(ord, prev + 1) << "value " << v;
      prev = ord;
      first = false;
    }
  }
}

TEST(Elements, UlpSizeOfBfloat16AndFloat8) {
  EXPECT_EQ(detail::tools::ulp_size(detail::tools::codec(DType::kBFloat16), 1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(detail::tools::ulp_size(detail::tools::codec(DType::kBFloat16), 3.0), std::ldexp(1.0, -6));
  EXPECT_EQ(detail::tools::ulp_size(detail::tools::codec(DType::kFloat8E4M3FN), 448.0), 32.0);
  EXPECT_EQ(detail::tools::ulp_size(detail::tools::codec(DType::kFloat8E4M3FN), 0.0), std::ldexp(1.0, -9));
  EXPECT_EQ(detail::tools::ulp_size(detail::tools::codec(DType::kFloat8E4M3FNUZ), 0.0), std::ldexp(1.0, -10));
  EXPECT_EQ(detail::tools::ulp_size(detail::tools::codec(DType::kInt32), 12345.0), 1.0);
}

// ---- pairs made by torch / safetensors ------------------------------------------------

TEST(Diff, SameContentDifferentFileNamesIsIdentical) {
  DiffReport r = diff_files("base.safetensors", "base_copy.safetensors");
  EXPECT_TRUE(r.equal());
  EXPECT_EQ(r.total_tensors(), expected()["base"]["tensors"].get<std::size_t>());
  EXPECT_EQ(r.differing_tensors(), 0u);
  for (const auto& t : r.tensors) EXPECT_EQ(t.status, TensorStatus::kIdentical) << t.path;
  EXPECT_TRUE(r.values.empty());
}

TEST(Diff, OneUlpNudge) {
  const json e = expected()["ulp"];
  DiffReport r = diff_files("ulp_a.safetensors", "ulp_b.safetensors");
  EXPECT_FALSE(r.equal());
  EXPECT_EQ(r.differing_tensors(), 1u);
  const TensorDiff& t = tensor(r, "0.weight");
  EXPECT_EQ(t.status, TensorStatus::kDifferent);
  EXPECT_EQ(t.value_different, 1u);
  EXPECT_EQ(t.bit_different, 1u);
  EXPECT_EQ(t.max_ulp, 1.0);
  EXPECT_EQ(t.max_abs, e["abs"].get<double>());
  EXPECT_DOUBLE_EQ(t.max_rel, e["abs"].get<double>() / std::fabs(e["b"].get<double>()));
  ASSERT_TRUE(t.first.has_value());
  EXPECT_EQ(t.first->index, (std::vector<std::int64_t>{3, 5}));
  // float32 values print with 9 significant digits: enough to round-trip.
  EXPECT_EQ(static_cast<float>(std::stod(t.first->a)), static_cast<float>(e["a"].get<double>()));
  EXPECT_EQ(static_cast<float>(std::stod(t.first->b)), static_cast<float>(e["b"].get<double>()));
  // Within one ULP, or within an absolute tolerance above the error: equal.
  DiffOptions o;
  o.ulp = 1;
  DiffReport r1 = diff_files("ulp_a.safetensors", "ulp_b.safetensors", o);
  EXPECT_TRUE(r1.equal());
  EXPECT_EQ(tensor(r1, "0.weight").status, TensorStatus::kWithinTolerance);
  DiffOptions o2;
  o2.atol = 1e-8;
  EXPECT_TRUE(diff_files("ulp_a.safetensors", "ulp_b.safetensors", o2).equal());
  DiffOptions o3;
  o3.atol = 1e-10;
  EXPECT_FALSE(diff_files("ulp_a.safetensors", "ulp_b.safetensors", o3).equal());
}

TEST(Diff, Bfloat16RoundTripMatchesTorch) {
  const json e = expected()["bf16rt"];
  DiffReport r = diff_files("bf16rt_a.safetensors", "bf16rt_b.safetensors");
  EXPECT_FALSE(r.equal());
  for (const auto& [path, want] : e.items()) {
    SCOPED_TRACE(path);
    const TensorDiff& t = tensor(r, path);
    EXPECT_EQ(t.value_different, want["differing"].get<std::uint64_t>());
    EXPECT_EQ(t.max_abs, want["max_abs"].get<double>());
    // Rounding float32 to bfloat16 drops 16 mantissa bits: at most 2^15 float32 ULPs.
    EXPECT_LE(t.max_ulp, 32768.0);
    EXPECT_GT(t.max_ulp, 1000.0);
  }
  EXPECT_EQ(tensor(r, "steps").status, TensorStatus::kIdentical);
  EXPECT_EQ(tensor(r, "emb").status, TensorStatus::kIdentical);
}

TEST(Diff, Float32VersusBfloat16StatesTheConversion) {
  const json e = expected()["f32bf16"];
  DiffReport r = diff_files("f32bf16_a.safetensors", "f32bf16_b.safetensors");
  EXPECT_FALSE(r.equal());
  for (const auto& [path, want] : e.items()) {
    SCOPED_TRACE(path);
    const TensorDiff& t = tensor(r, path);
    EXPECT_EQ(t.conversion(), "float32 -> bfloat16");
    EXPECT_EQ(t.ulp_dtype, DType::kBFloat16);
    EXPECT_EQ(t.max_abs, want["max_abs"].get<double>());
    // torch rounds to nearest: never more than half a bfloat16 ULP away.
    EXPECT_LE(t.max_ulp, 0.5);
    EXPECT_GT(t.max_ulp, 0.0);
    EXPECT_EQ(t.status, TensorStatus::kDifferent);
  }
  // Half a bfloat16 ULP is within --ulp 1.
  DiffOptions o;
  o.ulp = 1;
  EXPECT_TRUE(diff_files("f32bf16_a.safetensors", "f32bf16_b.safetensors", o).equal());
}

TEST(Diff, RenamedTensorIsFoundByContent) {
  DiffReport r = diff_files("renamed_a.safetensors", "renamed_b.safetensors");
  EXPECT_FALSE(r.equal());
  ASSERT_EQ(r.renamed.size(), 1u);
  EXPECT_EQ(r.renamed[0].path_a, "2.weight");
  EXPECT_EQ(r.renamed[0].path_b, "head.weight");
  EXPECT_TRUE(r.only_in_a.empty());
  EXPECT_TRUE(r.only_in_b.empty());
  EXPECT_EQ(r.differing_tensors(), 1u);
  EXPECT_EQ(r.total_tensors(), 6u);
}

TEST(Diff, AddedAndRemovedTensors) {
  DiffReport r = diff_files("added_a.safetensors", "added_b.safetensors");
  EXPECT_FALSE(r.equal());
  ASSERT_EQ(r.only_in_a.size(), 1u);
  EXPECT_EQ(r.only_in_a[0].path, "2.bias");
  ASSERT_EQ(r.only_in_b.size(), 1u);
  EXPECT_EQ(r.only_in_b[0].path, "extra.scale");
  EXPECT_EQ(r.only_in_b[0].shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(r.only_in_b[0].sha256.size(), 64u);
  EXPECT_EQ(r.differing_tensors(), 2u);
}

TEST(Diff, NanPayloadsAreBitDifferentButNumericallyEqual) {
  DiffReport r = diff_files("nan_a.safetensors", "nan_b.safetensors");
  const TensorDiff& t = tensor(r, "x");
  EXPECT_EQ(t.status, TensorStatus::kNumericallyEqual);
  EXPECT_EQ(t.nan_payload, 1u);
  EXPECT_EQ(t.bit_different, 2u);  // the NaN and the -0.0
  EXPECT_EQ(t.value_different, 0u);
  ASSERT_TRUE(t.first);
  EXPECT_EQ(t.first->index, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(t.first->a_bits, "0x7fc00000");
  EXPECT_EQ(t.first->b_bits, "0x7fc00001");
  EXPECT_EQ(t.first->a, "nan");
  EXPECT_FALSE(r.equal());  // bits differ: not identical content without a tolerance
  DiffOptions o;
  o.atol = 1e-30;
  EXPECT_TRUE(diff_files("nan_a.safetensors", "nan_b.safetensors", o).equal());
}

TEST(Diff, NanAndInfMismatches) {
  DiffReport r = diff_files("nanmismatch_a.safetensors", "nanmismatch_b.safetensors");
  const TensorDiff& t = tensor(r, "x");
  EXPECT_EQ(t.nan_mismatch, 1u);
  EXPECT_EQ(t.inf_mismatch, 1u);
  EXPECT_EQ(t.value_different, 2u);
  EXPECT_TRUE(std::isinf(t.max_abs));
  DiffOptions o;
  o.atol = 1e300;  // NaN vs number is never within tolerance
  EXPECT_FALSE(diff_files("nanmismatch_a.safetensors", "nanmismatch_b.safetensors", o).equal());
}

TEST(Diff, Float8UlpDistance) {
  const json e = expected()["fp8"];
  DiffReport r = diff_files("fp8_a.safetensors", "fp8_b.safetensors");
  const TensorDiff& t = tensor(r, "x");
  EXPECT_EQ(t.dtype_a, DType::kFloat8E4M3FN);
  EXPECT_EQ(t.max_ulp, 3.0);
  ASSERT_TRUE(t.first);
  EXPECT_EQ(t.first->index, (std::vector<std::int64_t>{50}));
  EXPECT_EQ(std::stod(t.first->a), e["a"].get<double>());
  EXPECT_EQ(std::stod(t.first->b), e["b"].get<double>());
  EXPECT_EQ(t.max_abs, e["b"].get<double>() - e["a"].get<double>());
}

TEST(Diff, ResultDoesNotDependOnThreadCount) {
  const json e = expected()["big"];
  DiffOptions o1;
  o1.threads = 1;
  o1.histogram = true;
  DiffOptions o4 = o1;
  o4.threads = 4;
  std::uint64_t last_done = 0, calls = 0, total_seen = 0;
  o4.progress = [&](std::uint64_t done, std::uint64_t total) {
    EXPECT_LE(done, total);
    last_done = std::max(last_done, done);
    total_seen = total;
    ++calls;
  };
  DiffReport r1 = diff_files("big_a.safetensors", "big_b.safetensors", o1);
  DiffReport r4 = diff_files("big_a.safetensors", "big_b.safetensors", o4);
  EXPECT_EQ(to_json(r1), to_json(r4));
  const TensorDiff& w = tensor(r1, "w");
  EXPECT_EQ(w.value_different, e["differing"].get<std::uint64_t>());
  EXPECT_EQ(w.max_abs, e["max_abs"].get<double>());
  std::uint64_t hist_total = 0;
  for (auto c : w.ulp_histogram) hist_total += c;
  EXPECT_EQ(hist_total, w.numel);
  EXPECT_EQ(w.ulp_histogram[0], w.numel - w.value_different);
  EXPECT_EQ(tensor(r1, "v").status, TensorStatus::kIdentical);
  EXPECT_GT(calls, 5u);  // several chunks
  EXPECT_EQ(last_done, total_seen);
}

// ---- JSON -------------------------------------------------------------------------

TEST(Diff, JsonSchema) {
  DiffOptions o;
  o.histogram = true;
  json j = json::parse(to_json(diff_files("added_a.safetensors", "added_b.safetensors", o)));
  for (const char* k : {"file_a", "file_b"}) EXPECT_TRUE(j[k].is_string()) << k;
  EXPECT_TRUE(j["equal"].is_boolean());
  EXPECT_FALSE(j["equal"].get<bool>());
  for (const char* k : {"atol", "rtol", "ulp"}) EXPECT_TRUE(j["tolerance"][k].is_number()) << k;
  for (const char* k : {"tensors", "differing", "identical", "compared", "compared_differing", "only_in_a", "only_in_b",
                        "renamed", "value_differences"})
    EXPECT_TRUE(j["summary"][k].is_number_unsigned()) << k;
  ASSERT_TRUE(j["tensors"].is_array());
  ASSERT_FALSE(j["tensors"].empty());
  for (const auto& t : j["tensors"]) {
    for (const char* k : {"path", "status", "dtype_a", "dtype_b", "ulp_dtype"}) EXPECT_TRUE(t[k].is_string()) << k;
    for (const char* k : {"shape_a", "shape_b"}) EXPECT_TRUE(t[k].is_array()) << k;
    for (const char* k : {"numel", "bit_different", "value_different", "out_of_tolerance", "nan_payload",
                          "nan_mismatch", "inf_mismatch"})
      EXPECT_TRUE(t[k].is_number_unsigned()) << k;
    for (const char* k : {"max_abs_error", "max_rel_error", "max_ulp"})
      EXPECT_TRUE(t[k].is_number() || t[k].is_string()) << k;
    EXPECT_TRUE(t["equal"].is_boolean());
    EXPECT_TRUE(t["numeric"].is_boolean());
    EXPECT_TRUE(t["conversion"].is_null() || t["conversion"].is_string());
    EXPECT_TRUE(t["first_difference"].is_null() || t["first_difference"].is_object());
    EXPECT_TRUE(t["ulp_histogram"].is_array());
  }
  ASSERT_EQ(j["only_in_a"].size(), 1u);
  for (const char* k : {"path", "dtype", "sha256"}) EXPECT_TRUE(j["only_in_a"][0][k].is_string()) << k;
  EXPECT_TRUE(j["only_in_a"][0]["shape"].is_array());
  EXPECT_TRUE(j["renamed"].is_array());
  EXPECT_TRUE(j["values"].is_array());

  // first_difference and non-finite numbers.
  json m = json::parse(to_json(diff_files("nanmismatch_a.safetensors", "nanmismatch_b.safetensors")));
  const auto& fd = m["tensors"][0]["first_difference"];
  EXPECT_TRUE(fd["index"].is_array());
  for (const char* k : {"a", "b", "a_bits", "b_bits"}) EXPECT_TRUE(fd[k].is_string()) << k;
  EXPECT_EQ(m["tensors"][0]["max_abs_error"], "inf");
  json c = json::parse(to_json(diff_files("f32bf16_a.safetensors", "f32bf16_b.safetensors")));
  std::size_t conversions = 0;
  for (const auto& t : c["tensors"])
    if (t["dtype_a"] == "float32") {
      EXPECT_EQ(t["conversion"], "float32 -> bfloat16");
      EXPECT_EQ(t["ulp_dtype"], "bfloat16");
      ++conversions;
    } else {
      EXPECT_TRUE(t["conversion"].is_null());
    }
  EXPECT_EQ(conversions, 4u);
}

// ---- HTML report (rendering in Chromium: tests/py/test_report.py) --------------------

TEST(DiffReportHtml, SelfContainedWithPlotsAndTable) {
  DiffOptions o;
  o.histogram = true;
  DiffReport r = diff_files("bf16rt_a.safetensors", "bf16rt_b.safetensors", o);
  const std::string h = html_report(r);
  for (const char* id : {"id=\"summary\"", "id=\"error-plot\"", "id=\"ulp-histograms\"", "id=\"tensor-table\"",
                         "id=\"one-sided\"", "id=\"values\""})
    EXPECT_NE(h.find(id), std::string::npos) << id;
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (std::size_t at = h.find(needle); at != std::string::npos; at = h.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<tr class=\"row "), r.tensors.size());
  EXPECT_EQ(count("<rect class=\"bar\""), 4u);  // the four rounded float32 tensors
  EXPECT_EQ(count("<svg class=\"ulp-hist\""), 4u);
  EXPECT_EQ(count("<link"), 0u);
  EXPECT_EQ(count(" src="), 0u);
  EXPECT_EQ(count("https:"), 0u);
  const auto dir = std::filesystem::temp_directory_path() / ("tseal_report_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_html_report(r, dir / "r.html");
  EXPECT_EQ(testing::read_all(dir / "r.html"), h);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{}), 1);
  std::filesystem::remove_all(dir);
}

// ---- hand-built trees: values, views, integers, complex -----------------------------

TEST(Diff, NonTensorValuesAreComparedByPath) {
  auto w = make_of<float>(DType::kFloat32, {2}, {1.f, 2.f});
  Value a = dict_of({{"w", Value(w)},
                     {"lr", Value(0.1)},
                     {"name", Value::str("adam")},
                     {"betas", Value::tuple({Value(0.9), Value(0.999)})},
                     {"only_a", Value(1)}});
  Value b = dict_of({{"w", Value(w)},
                     {"lr", Value(0.2)},
                     {"name", Value::str("adam")},
                     {"betas", Value::list({Value(0.9), Value(0.999)})},
                     {"only_b", Value::str("x")}});
  DiffReport r = diff(ckpt(a), ckpt(b));
  EXPECT_FALSE(r.equal());
  EXPECT_EQ(r.differing_tensors(), 0u);
  std::map<std::string, std::pair<std::string, std::string>> got;
  for (const auto& v : r.values) got[v.path] = {v.a.value_or("-"), v.b.value_or("-")};
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(got["lr"], (std::pair<std::string, std::string>{"0.10000000000000001", "0.20000000000000001"}));
  EXPECT_EQ(got["betas"], (std::pair<std::string, std::string>{"<tuple>", "<list>"}));
  EXPECT_EQ(got["only_a"], (std::pair<std::string, std::string>{"1", "-"}));
  EXPECT_EQ(got["only_b"], (std::pair<std::string, std::string>{"-", "'x'"}));
}

TEST(Diff, StridedViewEqualsItsContiguousCopy) {
  // a: a 3x2 transpose view of a 2x3 storage; b: the same elements laid out contiguously.
  auto t = make_of<float>(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto view = std::make_shared<Tensor>(*t);
  view->shape = {3, 2};
  view->strides = {1, 3};
  auto copy = make_of<float>(DType::kFloat32, {3, 2}, {1, 4, 2, 5, 3, 6});
  DiffReport r = diff(ckpt(dict_of({{"x", Value(view)}})), ckpt(dict_of({{"x", Value(copy)}})));
  EXPECT_TRUE(r.equal());
  auto copy2 = make_of<float>(DType::kFloat32, {3, 2}, {1, 4, 2, 5, 3, 7});
  DiffReport r2 = diff(ckpt(dict_of({{"x", Value(view)}})), ckpt(dict_of({{"x", Value(copy2)}})));
  ASSERT_TRUE(r2.tensors[0].first);
  EXPECT_EQ(r2.tensors[0].first->index, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(r2.tensors[0].first->a, "6");
  EXPECT_EQ(r2.tensors[0].first->b, "7");
}

TEST(Diff, IntegersAreComparedExactly) {
  const std::int64_t big = std::int64_t{1} << 60;
  auto a = make_of<std::int64_t>(DType::kInt64, {3}, {big, -5, 0});
  auto b = make_of<std::int64_t>(DType::kInt64, {3}, {big + 1, -5, 0});
  DiffReport r = diff(ckpt(dict_of({{"i", Value(a)}})), ckpt(dict_of({{"i", Value(b)}})));
  const TensorDiff& t = r.tensors[0];
  EXPECT_EQ(t.value_different, 1u);
  EXPECT_EQ(t.max_ulp, 1.0);  // exact although 2^60 + 1 is not a double
  EXPECT_EQ(t.first->b, "1152921504606846977");
  auto u8a = make_of<std::uint8_t>(DType::kUInt8, {2}, {0, 255});
  auto u8b = make_of<std::uint8_t>(DType::kUInt8, {2}, {0, 250});
  DiffReport r2 = diff(ckpt(dict_of({{"u", Value(u8a)}})), ckpt(dict_of({{"u", Value(u8b)}})));
  EXPECT_EQ(r2.tensors[0].max_abs, 5.0);
}

TEST(Diff, ComplexErrorIsTheModulus) {
  auto a = make_of<float>(DType::kComplex64, {2}, {1, 2, 3, 4});
  auto b = make_of<float>(DType::kComplex64, {2}, {1, 2, 6, 8});
  DiffReport r = diff(ckpt(dict_of({{"c", Value(a)}})), ckpt(dict_of({{"c", Value(b)}})));
  const TensorDiff& t = r.tensors[0];
  EXPECT_EQ(t.value_different, 1u);
  EXPECT_DOUBLE_EQ(t.max_abs, 5.0);  // |(3+4j) - (6+8j)|
  EXPECT_DOUBLE_EQ(t.max_rel, 0.5);  // 5 / |6+8j|
  EXPECT_EQ(t.first->a, "(3+4j)");
}

TEST(Diff, ShapeChangeAndTiedWeights) {
  auto w = make_of<float>(DType::kFloat32, {2, 2}, {1, 2, 3, 4});
  auto w2 = make_of<float>(DType::kFloat32, {4}, {1, 2, 3, 4});
  // A ties "head" to "emb" (one tensor under two paths); B stores two copies.
  DiffReport r = diff(ckpt(dict_of({{"emb", Value(w)}, {"head", Value(w)}})),
                      ckpt(dict_of({{"emb", Value(make_of<float>(DType::kFloat32, {2, 2}, {1, 2, 3, 4}))},
                                    {"head", Value(make_of<float>(DType::kFloat32, {2, 2}, {1, 2, 3, 4}))}})));
  EXPECT_TRUE(r.equal());
  EXPECT_EQ(r.tensors.size(), 2u);
  DiffReport r2 = diff(ckpt(dict_of({{"w", Value(w)}})), ckpt(dict_of({{"w", Value(w2)}})));
  EXPECT_EQ(r2.tensors[0].status, TensorStatus::kShapeChanged);
  EXPECT_FALSE(r2.equal());
}

TEST(Diff, BrokenViewThrows) {
  auto t = make_of<float>(DType::kFloat32, {2}, {1, 2});
  auto bad = std::make_shared<Tensor>(*t);
  bad->shape = {5};
  bad->strides = {1};
  EXPECT_EQ(testing::rule_of([&] {
              (void)diff(ckpt(dict_of({{"x", Value(bad)}})), ckpt(dict_of({{"x", Value(t)}})));
            }),
            "tensor/view-out-of-bounds");
}

// ---- torch.save pairs (need the torch zip reader) --------------------------------------

// Reads a .pt fixture; skips the test while the torch zip reader has not landed.
#define READ_PT_OR_SKIP(var, name)                                                          \
  Checkpoint var;                                                                           \
  {                                                                                         \
    std::string rule_;                                                                      \
    try {                                                                                   \
      var = read_file(testing::tools_fixture(name));                                        \
    } catch (const Error& e) {                                                              \
      rule_ = e.rule();                                                                     \
      if (rule_ == "value/unsupported") FAIL() << "torch zip reader missing: " << e.what(); \
      throw;                                                                                \
    }                                                                                       \
  }

TEST(DiffTorch, SameContentInTwoFormatsIsIdentical) {
  READ_PT_OR_SKIP(b, "formats_b.pt");
  DiffReport r = diff(read_file(testing::tools_fixture("formats_a.safetensors")), b);
  EXPECT_TRUE(r.equal()) << to_json(r);
}

TEST(DiffTorch, PtPairsGiveTheSameReportsAsSafetensors) {
  for (const char* pair : {"ulp", "bf16rt", "f32bf16", "renamed", "added", "nan", "nanmismatch", "fp8"}) {
    SCOPED_TRACE(pair);
    READ_PT_OR_SKIP(a, std::string(pair) + "_a.pt");
    READ_PT_OR_SKIP(b, std::string(pair) + "_b.pt");
    DiffReport pt = diff(a, b);
    DiffReport st = diff_files(std::string(pair) + "_a.safetensors", std::string(pair) + "_b.safetensors");
    EXPECT_EQ(pt.equal(), st.equal());
    EXPECT_EQ(pt.differing_tensors(), st.differing_tensors());
    ASSERT_EQ(pt.tensors.size(), st.tensors.size());
    for (const auto& t : st.tensors) {
      const TensorDiff& p = tensor(pt, t.path);
      EXPECT_EQ(p.status, t.status) << t.path;
      EXPECT_EQ(p.max_ulp, t.max_ulp) << t.path;
      EXPECT_EQ(p.max_abs, t.max_abs) << t.path;
    }
  }
}

// ---- the CLI ------------------------------------------------------------------------

using testing::run_cli;

TEST(DiffCli, ExitStatusAndSummary) {
  if (!std::filesystem::exists(std::string(TENSORSEAL_BINARY_DIR) + "/tseal")) FAIL() << "tseal not built";
  std::string out;
  EXPECT_EQ(run_cli("diff " + testing::tools_fixture("base.safetensors").string() + " " +
                        testing::tools_fixture("base_copy.safetensors").string(),
                    &out),
            0);
  EXPECT_EQ(out.substr(0, out.find('\n')), "content identical: 6 tensors, 0 differ");
  EXPECT_EQ(run_cli("diff " + testing::tools_fixture("ulp_a.safetensors").string() + " " +
                        testing::tools_fixture("ulp_b.safetensors").string(),
                    &out),
            1);
  EXPECT_EQ(out.substr(0, out.find('\n')), "1 of 6 tensors differ");
  EXPECT_NE(out.find("0.weight"), std::string::npos);
  EXPECT_EQ(run_cli("diff --ulp 1 " + testing::tools_fixture("ulp_a.safetensors").string() + " " +
                    testing::tools_fixture("ulp_b.safetensors").string()),
            0);
  EXPECT_EQ(run_cli("diff " + testing::tools_fixture("ulp_a.safetensors").string() + " /nonexistent/x.safetensors"), 2);
  EXPECT_EQ(run_cli("diff --json " + testing::tools_fixture("renamed_a.safetensors").string() + " " +
                        testing::tools_fixture("renamed_b.safetensors").string(),
                    &out),
            1);
  json j = json::parse(out);
  EXPECT_EQ(j["renamed"][0]["path_a"], "2.weight");
  EXPECT_EQ(j["renamed"][0]["path_b"], "head.weight");
}

}  // namespace
}  // namespace tensorseal
