// The dtype table: the only place dtype names, sizes and codes are spelled.
#include "tensorseal/dtype.h"

#include <array>

namespace tensorseal {
namespace {

using K = DTypeKind;
using D = DType;

// Order follows the enum; a static_assert below checks it.
constexpr DTypeInfo kTable[] = {
    // dtype            name                bits kind          st            numpy   legacy storage     e  m
    {D::kBool, "bool", 8, K::kBool, "BOOL", "|b1", "BoolStorage", 0, 0},
    {D::kUInt8, "uint8", 8, K::kUnsigned, "U8", "|u1", "ByteStorage", 0, 0},
    {D::kUInt16, "uint16", 16, K::kUnsigned, "U16", "<u2", "", 0, 0},
    {D::kUInt32, "uint32", 32, K::kUnsigned, "U32", "<u4", "", 0, 0},
    {D::kUInt64, "uint64", 64, K::kUnsigned, "U64", "<u8", "", 0, 0},
    {D::kInt8, "int8", 8, K::kSigned, "I8", "|i1", "CharStorage", 0, 0},
    {D::kInt16, "int16", 16, K::kSigned, "I16", "<i2", "ShortStorage", 0, 0},
    {D::kInt32, "int32", 32, K::kSigned, "I32", "<i4", "IntStorage", 0, 0},
    {D::kInt64, "int64", 64, K::kSigned, "I64", "<i8", "LongStorage", 0, 0},
    {D::kFloat16, "float16", 16, K::kFloat, "F16", "<f2", "HalfStorage", 5, 10},
    {D::kBFloat16, "bfloat16", 16, K::kFloat, "BF16", "", "BFloat16Storage", 8, 7},
    {D::kFloat32, "float32", 32, K::kFloat, "F32", "<f4", "FloatStorage", 8, 23},
    {D::kFloat64, "float64", 64, K::kFloat, "F64", "<f8", "DoubleStorage", 11, 52},
    {D::kComplex32, "complex32", 32, K::kComplex, "", "", "", 5, 10},
    {D::kComplex64, "complex64", 64, K::kComplex, "C64", "<c8", "ComplexFloatStorage", 8, 23},
    {D::kComplex128, "complex128", 128, K::kComplex, "", "<c16", "ComplexDoubleStorage", 11, 52},
    {D::kFloat8E4M3FN, "float8_e4m3fn", 8, K::kFloat, "F8_E4M3", "", "", 4, 3},
    {D::kFloat8E5M2, "float8_e5m2", 8, K::kFloat, "F8_E5M2", "", "", 5, 2},
    {D::kFloat8E4M3FNUZ, "float8_e4m3fnuz", 8, K::kFloat, "F8_E4M3FNUZ", "", "", 4, 3},
    {D::kFloat8E5M2FNUZ, "float8_e5m2fnuz", 8, K::kFloat, "F8_E5M2FNUZ", "", "", 5, 2},
    {D::kFloat8E8M0FNU, "float8_e8m0fnu", 8, K::kFloat, "F8_E8M0", "", "", 8, 0},
    {D::kFloat4E2M1FN, "float4_e2m1fn", 4, K::kFloat, "F4", "", "", 2, 1},
    {D::kFloat6E2M3FN, "float6_e2m3fn", 6, K::kFloat, "F6_E2M3", "", "", 2, 3},
    {D::kFloat6E3M2FN, "float6_e3m2fn", 6, K::kFloat, "F6_E3M2", "", "", 3, 2},
    {D::kFloat4E2M1FNx2, "float4_e2m1fn_x2", 8, K::kRaw, "", "", "", 0, 0},
    {D::kUInt1, "uint1", 8, K::kRaw, "", "", "", 0, 0},
    {D::kUInt2, "uint2", 8, K::kRaw, "", "", "", 0, 0},
    {D::kUInt3, "uint3", 8, K::kRaw, "", "", "", 0, 0},
    {D::kUInt4, "uint4", 8, K::kRaw, "", "", "", 0, 0},
    {D::kUInt5, "uint5", 8, K::kRaw, "", "", "", 0, 0},
    {D::kUInt6, "uint6", 8, K::kRaw, "", "", "", 0, 0},
    {D::kUInt7, "uint7", 8, K::kRaw, "", "", "", 0, 0},
    {D::kInt1, "int1", 8, K::kRaw, "", "", "", 0, 0},
    {D::kInt2, "int2", 8, K::kRaw, "", "", "", 0, 0},
    {D::kInt3, "int3", 8, K::kRaw, "", "", "", 0, 0},
    {D::kInt4, "int4", 8, K::kRaw, "", "", "", 0, 0},
    {D::kInt5, "int5", 8, K::kRaw, "", "", "", 0, 0},
    {D::kInt6, "int6", 8, K::kRaw, "", "", "", 0, 0},
    {D::kInt7, "int7", 8, K::kRaw, "", "", "", 0, 0},
    {D::kQInt8, "qint8", 8, K::kRaw, "", "", "QInt8Storage", 0, 0},
    {D::kQUInt8, "quint8", 8, K::kRaw, "", "", "QUInt8Storage", 0, 0},
    {D::kQInt32, "qint32", 32, K::kRaw, "", "", "QInt32Storage", 0, 0},
    {D::kQUInt4x2, "quint4x2", 8, K::kRaw, "", "", "QUInt4x2Storage", 0, 0},
    {D::kQUInt2x4, "quint2x4", 8, K::kRaw, "", "", "QUInt2x4Storage", 0, 0},
    {D::kBits1x8, "bits1x8", 8, K::kRaw, "", "", "", 0, 0},
    {D::kBits2x4, "bits2x4", 8, K::kRaw, "", "", "", 0, 0},
    {D::kBits4x2, "bits4x2", 8, K::kRaw, "", "", "", 0, 0},
    {D::kBits8, "bits8", 8, K::kRaw, "", "", "", 0, 0},
    {D::kBits16, "bits16", 16, K::kRaw, "", "", "", 0, 0},
};

constexpr bool table_in_enum_order() {
  for (std::size_t i = 0; i < std::size(kTable); ++i)
    if (static_cast<std::size_t>(kTable[i].dtype) != i) return false;
  return true;
}
static_assert(table_in_enum_order(), "kTable must list dtypes in enum order");
static_assert(std::size(kTable) == static_cast<std::size_t>(DType::kBits16) + 1);

}  // namespace

const DTypeInfo& info(DType dtype) noexcept { return kTable[static_cast<std::size_t>(dtype)]; }
std::span<const DTypeInfo> all_dtypes() noexcept { return kTable; }

std::optional<DType> dtype_from_name(std::string_view n) noexcept {
  if (n.starts_with("torch.")) n.remove_prefix(6);
  for (const auto& e : kTable)
    if (e.name == n) return e.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view code) noexcept {
  if (code.empty()) return std::nullopt;
  for (const auto& e : kTable)
    if (e.safetensors == code) return e.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_numpy(std::string_view descr, bool* big_endian) noexcept {
  if (descr.empty()) return std::nullopt;
  char order = descr[0];
  bool big = false;
  std::string_view rest = descr;
  if (order == '<' || order == '>' || order == '|' || order == '=') {
    big = order == '>';
    rest.remove_prefix(1);
  }
  for (const auto& e : kTable) {
    if (e.numpy.size() > 1 && e.numpy.substr(1) == rest) {
      // One-byte types carry no byte order; '>' on them is harmless.
      if (big_endian) *big_endian = big && e.bits > 8;
      return e.dtype;
    }
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_legacy_storage(std::string_view cls) noexcept {
  if (cls.empty()) return std::nullopt;
  for (const auto& e : kTable)
    if (e.legacy_storage == cls) return e.dtype;
  return std::nullopt;
}

std::uint32_t swap_unit(DType d) noexcept {
  const auto& i = info(d);
  if (i.bits % 8 != 0) return 1;
  std::uint32_t bytes = i.bits / 8;
  return i.kind == DTypeKind::kComplex ? bytes / 2 : bytes;
}

}  // namespace tensorseal
