// The dtype table (src/core/dtype.cc) against the real producers: torch 2.x's dtypes,
// numpy's descrs and safetensors 0.8's codes, as dumped by
// tests/fixtures/gen_safetensors_dtypes.py.
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.h"

namespace tensorseal {
namespace {

using json = nlohmann::json;

json facts() {
  const auto text = testing::read_all(testing::fixture_dir("gen_safetensors_dtypes") / "dtypes.json");
  return text.empty() ? json() : json::parse(text);
}

TEST(CoreDtype, TableIsInEnumOrderAndNamesAreUnique) {
  std::set<std::string_view> names, codes, numpy;
  std::size_t i = 0;
  for (const auto& e : all_dtypes()) {
    EXPECT_EQ(static_cast<std::size_t>(e.dtype), i++);
    EXPECT_EQ(&info(e.dtype), &e);
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    if (!e.safetensors.empty()) EXPECT_TRUE(codes.insert(e.safetensors).second) << e.safetensors;
    if (!e.numpy.empty()) EXPECT_TRUE(numpy.insert(e.numpy).second) << e.numpy;
    EXPECT_GT(e.bits, 0);
  }
  EXPECT_EQ(i, static_cast<std::size_t>(DType::kBits16) + 1);
}

TEST(CoreDtype, EveryTorchDtypeIsPresentWithItsSize) {
  const json f = facts();
  ASSERT_TRUE(f.is_object()) << "run tests/fixtures/gen_safetensors_dtypes.py (ctest does it)";
  std::set<std::string> torch_names;
  for (const auto& row : f["torch"]) {
    const std::string n = row["name"];
    SCOPED_TRACE(n);
    torch_names.insert(n);
    const auto d = dtype_from_name(n);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(name(*d), n);                       // name -> enum -> name
    EXPECT_EQ(dtype_from_name("torch." + n), d);  // "torch." prefix accepted
    EXPECT_EQ(itemsize(*d), row["itemsize"].get<std::uint64_t>());
    EXPECT_EQ(info(*d).bits, 8 * row["itemsize"].get<unsigned>());
    EXPECT_EQ(info(*d).kind == DTypeKind::kComplex, row["is_complex"].get<bool>());
    // float4_e2m1fn_x2 is a float to torch, but one element is two packed fp4 values:
    // the table keeps it raw so no tool reads a byte as one float.
    if (row["is_floating_point"].get<bool>() && n != "float4_e2m1fn_x2") EXPECT_EQ(info(*d).kind, DTypeKind::kFloat);
    // numpy descr where torch converts to numpy.
    if (row["numpy"].is_string()) {
      EXPECT_EQ(info(*d).numpy, row["numpy"].get<std::string>());
      bool big = true;
      EXPECT_EQ(dtype_from_numpy(row["numpy"].get<std::string>(), &big), d);
      EXPECT_FALSE(big);
    }
  }
  EXPECT_GE(torch_names.size(), 45u);
  // The only table entries torch lacks are safetensors' sub-byte floats.
  std::set<std::string> extra;
  for (const auto& e : all_dtypes())
    if (!torch_names.count(std::string(e.name))) extra.insert(std::string(e.name));
  EXPECT_EQ(extra, (std::set<std::string>{"float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"}));
  // torch's aliases are not dtype names of their own (str(torch.half) == "torch.float16").
  for (auto it = f["aliases"].begin(); it != f["aliases"].end(); ++it) {
    if (it.key() == it.value()) continue;
    EXPECT_FALSE(dtype_from_name(it.key()).has_value()) << it.key();
    EXPECT_TRUE(dtype_from_name(it.value().get<std::string>()).has_value()) << it.value();
  }
}

TEST(CoreDtype, SafetensorsCodesMatchTheBinding) {
  const json f = facts();
  ASSERT_TRUE(f.is_object());
  for (auto it = f["safetensors"].begin(); it != f["safetensors"].end(); ++it) {
    SCOPED_TRACE(it.key());
    const auto d = dtype_from_safetensors(it.key());
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(name(*d), it.value().get<std::string>());
    EXPECT_EQ(info(*d).safetensors, it.key());
  }
  // Every code in safetensors' Dtype enum is in the table (F4/F6 have no torch dtype).
  for (const char* code : {"BOOL",    "F4",          "F6_E2M3",     "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
                           "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16",     "U16", "F16", "BF16",    "I32",
                           "U32",     "F32",         "C64",         "F64",     "I64", "U64"})
    EXPECT_TRUE(dtype_from_safetensors(code).has_value()) << code;
  // Bits of the sub-byte codes (safetensors' Dtype::bitsize).
  EXPECT_EQ(info(*dtype_from_safetensors("F4")).bits, 4);
  EXPECT_EQ(info(*dtype_from_safetensors("F6_E2M3")).bits, 6);
  EXPECT_EQ(info(*dtype_from_safetensors("F6_E3M2")).bits, 6);
  EXPECT_EQ(itemsize(DType::kFloat4E2M1FN), 0u);  // packed: no whole-byte item size
  EXPECT_FALSE(dtype_from_safetensors("").has_value());
  EXPECT_FALSE(dtype_from_safetensors("f32").has_value());
  EXPECT_FALSE(dtype_from_safetensors("C128").has_value());
}

TEST(CoreDtype, NumpyDescrVariants) {
  bool big = false;
  EXPECT_EQ(dtype_from_numpy("<f4", &big), DType::kFloat32);
  EXPECT_FALSE(big);
  EXPECT_EQ(dtype_from_numpy(">f4", &big), DType::kFloat32);
  EXPECT_TRUE(big);
  EXPECT_EQ(dtype_from_numpy("f4", &big), DType::kFloat32);
  EXPECT_FALSE(big);
  EXPECT_EQ(dtype_from_numpy("=i8", &big), DType::kInt64);
  EXPECT_FALSE(big);
  EXPECT_EQ(dtype_from_numpy(">u1", &big), DType::kUInt8);
  EXPECT_FALSE(big);  // one byte: no byte order
  EXPECT_EQ(dtype_from_numpy("|b1", &big), DType::kBool);
  EXPECT_EQ(dtype_from_numpy(">c16", &big), DType::kComplex128);
  EXPECT_TRUE(big);
  EXPECT_FALSE(dtype_from_numpy("", &big).has_value());
  EXPECT_FALSE(dtype_from_numpy("<f3", &big).has_value());
  EXPECT_FALSE(dtype_from_numpy("<U4", &big).has_value());
  EXPECT_FALSE(dtype_from_numpy("O", nullptr).has_value());
}

TEST(CoreDtype, LegacyStorageClassesAndSwapUnits) {
  EXPECT_EQ(dtype_from_legacy_storage("FloatStorage"), DType::kFloat32);
  EXPECT_EQ(dtype_from_legacy_storage("BFloat16Storage"), DType::kBFloat16);
  EXPECT_EQ(dtype_from_legacy_storage("ComplexDoubleStorage"), DType::kComplex128);
  EXPECT_EQ(dtype_from_legacy_storage("QUInt4x2Storage"), DType::kQUInt4x2);
  EXPECT_FALSE(dtype_from_legacy_storage("UntypedStorage").has_value());
  EXPECT_FALSE(dtype_from_legacy_storage("").has_value());
  for (const auto& e : all_dtypes())
    if (!e.legacy_storage.empty()) EXPECT_EQ(dtype_from_legacy_storage(e.legacy_storage), e.dtype);
  EXPECT_EQ(swap_unit(DType::kFloat64), 8u);
  EXPECT_EQ(swap_unit(DType::kComplex64), 4u);  // per component
  EXPECT_EQ(swap_unit(DType::kComplex128), 8u);
  EXPECT_EQ(swap_unit(DType::kComplex32), 2u);
  EXPECT_EQ(swap_unit(DType::kUInt8), 1u);
  EXPECT_EQ(swap_unit(DType::kFloat4E2M1FN), 1u);
}

TEST(CoreDtype, FloatLayouts) {
  auto em = [](DType d) { return std::pair<int, int>(info(d).exponent_bits, info(d).mantissa_bits); };
  EXPECT_EQ(em(DType::kFloat16), std::pair(5, 10));
  EXPECT_EQ(em(DType::kBFloat16), std::pair(8, 7));
  EXPECT_EQ(em(DType::kFloat32), std::pair(8, 23));
  EXPECT_EQ(em(DType::kFloat64), std::pair(11, 52));
  EXPECT_EQ(em(DType::kFloat8E4M3FN), std::pair(4, 3));
  EXPECT_EQ(em(DType::kFloat8E5M2), std::pair(5, 2));
  EXPECT_EQ(em(DType::kFloat8E8M0FNU), std::pair(8, 0));
  for (const auto& e : all_dtypes())
    if (e.kind == DTypeKind::kFloat)
      EXPECT_EQ(1 + e.exponent_bits + e.mantissa_bits - (e.dtype == DType::kFloat8E8M0FNU ? 1 : 0), e.bits) << e.name;
}

}  // namespace
}  // namespace tensorseal
