// Reading tensor elements of every numeric dtype as numbers, for `diff`.
//
// Table-driven from DTypeInfo (exponent/mantissa bits) plus the one thing the table
// cannot say: each float format's special-value convention, as ml_dtypes/torch define
// them (tests/fixtures/gen_tools.py dumps torch's conversion of all 256 patterns of
// every float8 dtype, and elements_test checks this decoder against it):
//
//   kIeee  float16/bfloat16/float32/float64, float8_e5m2: exponent all ones is inf
//          (mantissa 0) or NaN; bias 2^(e-1)-1; signed zeros.
//   kFn    float8_e4m3fn: no inf; NaN only when exponent and mantissa are all ones
//          (S.1111.111); bias 7.
//   kFnuz  float8_e4m3fnuz/e5m2fnuz: no inf, no negative zero; the single NaN is the
//          pattern 1.000...0 (0x80); bias 2^(e-1) (one more than IEEE).
//   kE8m0  float8_e8m0fnu: unsigned powers of two 2^(bits-127); 0xFF is NaN; no zero.
//
// Packed sub-byte floats (float4/float6) and raw types (quantized, bits*, sub-byte ints)
// are not decoded: `diff` compares them by bytes only.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "tensorseal/dtype.h"

namespace tensorseal::detail::tools {

enum class FloatVariant : std::uint8_t { kNone, kIeee, kFn, kFnuz, kE8m0 };

// How to read one element (or one component of a complex element) of a dtype.
struct ElementCodec {
  DType dtype;
  DTypeKind kind;
  bool decodable = false;  // numbers can be read (else: compare bytes only)
  bool complex = false;
  std::uint32_t size = 0;       // bytes per element (0 for packed sub-byte types)
  std::uint32_t comp_size = 0;  // bytes per component (== size unless complex)
  FloatVariant variant = FloatVariant::kNone;
  int exponent_bits = 0, mantissa_bits = 0, bias = 0;
  // Bits of precision (floats: mantissa + 1; integers: value bits; bool: 1), used to
  // pick the coarser of two dtypes.
  int precision = 0;
  // Floats of at most 16 bits: the value of every bit pattern (built once).
  const double* table = nullptr;
};

const ElementCodec& codec(DType dtype) noexcept;

// The hot functions below are inline: diff calls them once per element.

// Raw bits of a component (0 real, 1 imaginary) of the element at `p` (little-endian),
// for components of at most 64 bits.
inline std::uint64_t load_bits(const ElementCodec& c, const std::byte* p, int component = 0) noexcept {
  p += static_cast<std::size_t>(component) * c.comp_size;
  switch (c.comp_size) {
    case 1:
      return static_cast<std::uint64_t>(p[0]);
    case 2: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

// Decodes a float component's bits to a double (exact for every format here).
inline double float_from_bits(const ElementCodec& c, std::uint64_t bits) noexcept {
  switch (c.comp_size) {
    case 4: {
      float f;
      const auto u = static_cast<std::uint32_t>(bits);
      std::memcpy(&f, &u, 4);
      return f;
    }
    case 8: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    default:
      return c.table[bits];
  }
}

inline bool float_is_nan(const ElementCodec& c, std::uint64_t bits) noexcept {
  return std::isnan(float_from_bits(c, bits));
}

// A monotonic integer ordering of a float format's non-NaN bit patterns: consecutive
// representable values have consecutive ordinals, +0 and -0 share 0. ULP distance of
// a and b is |ord(a) - ord(b)|.
inline __int128 float_ordinal(const ElementCodec& c, std::uint64_t bits) noexcept {
  if (c.variant == FloatVariant::kE8m0) return bits;  // unsigned, monotonic already
  const int sign_bit = static_cast<int>(c.comp_size) * 8 - 1;
  const std::uint64_t magnitude = bits & ~(std::uint64_t{1} << sign_bit);
  const bool neg = (bits >> sign_bit) & 1;
  return neg ? -static_cast<__int128>(magnitude) : static_cast<__int128>(magnitude);
}

// The value of an integer/bool element, exactly.
inline __int128 int_value(const ElementCodec& c, const std::byte* p) noexcept {
  const std::uint64_t bits = load_bits(c, p);
  if (c.kind == DTypeKind::kSigned && c.size < 8) {
    const int shift = 64 - static_cast<int>(c.size) * 8;
    return static_cast<std::int64_t>(bits << shift) >> shift;
  }
  if (c.kind == DTypeKind::kSigned) return static_cast<std::int64_t>(bits);
  if (c.kind == DTypeKind::kBool) return bits != 0;
  return bits;
}

// Any decodable element component as a double (integers rounded beyond 2^53).
inline double component_value(const ElementCodec& c, const std::byte* p, int component = 0) noexcept {
  if (c.kind == DTypeKind::kFloat || c.kind == DTypeKind::kComplex)
    return float_from_bits(c, load_bits(c, p, component));
  if (component != 0) return 0.0;
  return static_cast<double>(int_value(c, p));
}

// Spacing of the dtype's representable values at magnitude |x| (the size of one ULP
// there): 1 for integers; for floats 2^(exponent(x) - mantissa_bits), at least the
// subnormal spacing.
double ulp_size(const ElementCodec& c, double x) noexcept;

// Human rendering of the element at `p`: "1.5", "-inf", "nan", "(1+2j)", "7".
std::string element_text(const ElementCodec& c, const std::byte* p);
// The element's bytes as one hexadecimal number, most significant byte first: "0x3fc00000".
std::string element_bits_text(const ElementCodec& c, const std::byte* p);

}  // namespace tensorseal::detail::tools
