// tensorseal/dtype.h — element types.
//
// One table (src/core/dtype.cc) maps every dtype to its torch name, size in bits,
// safetensors code, numpy descr and torch legacy storage class; nothing else in the
// library spells these names. Names are torch's ("float32", "bfloat16", ...).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "tensorseal/export.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

enum class DType : std::uint8_t {
  kBool,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex32,
  kComplex64,
  kComplex128,
  kFloat8E4M3FN,
  kFloat8E5M2,
  kFloat8E4M3FNUZ,
  kFloat8E5M2FNUZ,
  kFloat8E8M0FNU,
  // Sub-byte floats as safetensors stores them (F4, F6_*): bits < 8, packed.
  kFloat4E2M1FN,
  kFloat6E2M3FN,
  kFloat6E3M2FN,
  // torch.float4_e2m1fn_x2: two fp4 values packed per byte element.
  kFloat4E2M1FNx2,
  // torch's sub-byte integer placeholders: one byte per element in memory.
  kUInt1,
  kUInt2,
  kUInt3,
  kUInt4,
  kUInt5,
  kUInt6,
  kUInt7,
  kInt1,
  kInt2,
  kInt3,
  kInt4,
  kInt5,
  kInt6,
  kInt7,
  // Quantized storage types (raw bytes; scale/zero-point live outside the storage).
  kQInt8,
  kQUInt8,
  kQInt32,
  kQUInt4x2,
  kQUInt2x4,
  // torch.bits* raw types.
  kBits1x8,
  kBits2x4,
  kBits4x2,
  kBits8,
  kBits16,
};

enum class DTypeKind : std::uint8_t { kBool, kUnsigned, kSigned, kFloat, kComplex, kRaw };

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // torch name without "torch.": "float32"
  std::uint16_t bits;     // size of one element in bits
  DTypeKind kind;
  std::string_view safetensors;     // "F32", or empty when safetensors cannot hold it
  std::string_view numpy;           // little-endian numpy descr "<f4", or empty
  std::string_view legacy_storage;  // "FloatStorage", or empty (then UntypedStorage)
  // For floats: exponent and mantissa bits (IEEE-like layouts), 0 otherwise. Complex
  // types describe one component.
  std::uint8_t exponent_bits, mantissa_bits;
};

const DTypeInfo& info(DType dtype) noexcept;
std::span<const DTypeInfo> all_dtypes() noexcept;

inline std::string_view name(DType d) noexcept { return info(d).name; }
// Size of one element in bytes; for packed sub-byte types (bits % 8 != 0) this is 0.
inline std::uint64_t itemsize(DType d) noexcept { return info(d).bits % 8 == 0 ? info(d).bits / 8 : 0; }

std::optional<DType> dtype_from_name(std::string_view torch_name) noexcept;
std::optional<DType> dtype_from_safetensors(std::string_view code) noexcept;
// Accepts "<f4", "|u1", "f4" (native = little here) and ">f4"; reports big-endianness.
std::optional<DType> dtype_from_numpy(std::string_view descr, bool* big_endian) noexcept;
std::optional<DType> dtype_from_legacy_storage(std::string_view cls) noexcept;

// Element size used for byte-order swaps (a complex value swaps per component).
std::uint32_t swap_unit(DType d) noexcept;

}  // namespace tensorseal
TENSORSEAL_API_END
