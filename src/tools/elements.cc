// Element decoding for `diff` (see elements.h for each float format's conventions).
#include "tools/elements.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "tensorseal/diff.h"
#include "util/hex.h"

namespace tensorseal::detail::tools {
namespace {

FloatVariant variant_of(DType d) {
  switch (d) {
    case DType::kFloat8E4M3FN:
      return FloatVariant::kFn;
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2FNUZ:
      return FloatVariant::kFnuz;
    case DType::kFloat8E8M0FNU:
      return FloatVariant::kE8m0;
    default:
      return FloatVariant::kIeee;
  }
}

ElementCodec make_codec(const DTypeInfo& i) {
  ElementCodec c;
  c.dtype = i.dtype;
  c.kind = i.kind;
  c.size = i.bits % 8 == 0 ? i.bits / 8 : 0;
  c.comp_size = c.size;
  switch (i.kind) {
    case DTypeKind::kBool:
      c.decodable = true;
      c.precision = 1;
      break;
    case DTypeKind::kUnsigned:
      c.decodable = true;
      c.precision = i.bits;
      break;
    case DTypeKind::kSigned:
      c.decodable = true;
      c.precision = i.bits - 1;
      break;
    case DTypeKind::kFloat:
    case DTypeKind::kComplex:
      // Packed sub-byte floats (float4/float6) are compared by bytes only.
      if (i.bits % 8 != 0) break;
      c.decodable = true;
      c.complex = i.kind == DTypeKind::kComplex;
      c.comp_size = c.complex ? c.size / 2 : c.size;
      c.variant = variant_of(i.dtype);
      c.exponent_bits = i.exponent_bits;
      c.mantissa_bits = i.mantissa_bits;
      c.bias = (1 << (i.exponent_bits - 1)) - 1;
      if (c.variant == FloatVariant::kFnuz) c.bias += 1;
      c.precision = i.mantissa_bits + 1;
      break;
    case DTypeKind::kRaw:
      break;
  }
  return c;
}

double decode_generic(const ElementCodec& c, std::uint64_t bits);

struct Codecs {
  std::vector<ElementCodec> all;
  std::vector<std::vector<double>> tables;  // value of every bit pattern, small floats
  Codecs() {
    for (const auto& i : all_dtypes()) all.push_back(make_codec(i));
    tables.reserve(all.size());
    for (auto& c : all) {
      if (!c.decodable || (c.kind != DTypeKind::kFloat && c.kind != DTypeKind::kComplex) || c.comp_size > 2) continue;
      std::vector<double> t(std::size_t{1} << (c.comp_size * 8));
      for (std::size_t b = 0; b < t.size(); ++b) t[b] = decode_generic(c, b);
      tables.push_back(std::move(t));
      c.table = tables.back().data();
    }
  }
};

const Codecs& codecs() {
  static const Codecs c;
  return c;
}

// The generic decoder: sign | exponent | mantissa with the variant's specials.
double decode_generic(const ElementCodec& c, std::uint64_t bits) {
  const int e = c.exponent_bits, m = c.mantissa_bits;
  const std::uint64_t exp_max = (std::uint64_t{1} << e) - 1;
  const std::uint64_t man_mask = (std::uint64_t{1} << m) - 1;
  if (c.variant == FloatVariant::kE8m0) {
    if (bits == exp_max) return std::numeric_limits<double>::quiet_NaN();
    return std::ldexp(1.0, static_cast<int>(bits) - c.bias);
  }
  const bool sign = (bits >> (e + m)) & 1;
  const std::uint64_t exp = (bits >> m) & exp_max;
  const std::uint64_t man = bits & man_mask;
  switch (c.variant) {
    case FloatVariant::kIeee:
      if (exp == exp_max) return man == 0 ? (sign ? -INFINITY : INFINITY) : std::numeric_limits<double>::quiet_NaN();
      break;
    case FloatVariant::kFn:
      if (exp == exp_max && man == man_mask) return std::numeric_limits<double>::quiet_NaN();
      break;
    case FloatVariant::kFnuz:
      if (sign && exp == 0 && man == 0) return std::numeric_limits<double>::quiet_NaN();
      break;
    default:
      break;
  }
  double v = exp == 0
                 ? std::ldexp(static_cast<double>(man), 1 - c.bias - m)
                 : std::ldexp(static_cast<double>((std::uint64_t{1} << m) | man), static_cast<int>(exp) - c.bias - m);
  return sign ? -v : v;
}

std::string int128_text(__int128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  unsigned __int128 u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string s;
  while (u > 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  return neg ? "-" + s : s;
}

}  // namespace

const ElementCodec& codec(DType dtype) noexcept { return codecs().all[static_cast<std::size_t>(dtype)]; }

double ulp_size(const ElementCodec& c, double x) noexcept {
  if (c.kind != DTypeKind::kFloat && c.kind != DTypeKind::kComplex) return 1.0;
  const int min_exp = 1 - c.bias;  // exponent of the smallest normal
  x = std::fabs(x);
  int e = min_exp;
  if (std::isfinite(x) && x > 0) {
    int fe;
    std::frexp(x, &fe);  // x = f * 2^fe, f in [0.5, 1): leading bit at 2^(fe-1)
    e = std::max(fe - 1, min_exp);
  } else if (std::isinf(x)) {
    e = (1 << (c.exponent_bits - 1));
  }
  if (c.variant == FloatVariant::kE8m0) return std::ldexp(1.0, e);  // next power of two
  return std::ldexp(1.0, e - c.mantissa_bits);
}

std::string element_text(const ElementCodec& c, const std::byte* p) {
  if (!c.decodable) return element_bits_text(c, p);
  switch (c.kind) {
    case DTypeKind::kBool:
      return int_value(c, p) ? "True" : "False";
    case DTypeKind::kUnsigned:
    case DTypeKind::kSigned:
      return int128_text(int_value(c, p));
    case DTypeKind::kFloat:
      return number_text(component_value(c, p), c.comp_size >= 8 ? 17 : 9);
    case DTypeKind::kComplex: {
      const int digits = c.comp_size >= 8 ? 17 : 9;
      const double im = component_value(c, p, 1);
      std::string s = "(" + number_text(component_value(c, p, 0), digits);
      s += (std::signbit(im) || std::isnan(im)) ? "" : "+";
      return s + number_text(im, digits) + "j)";
    }
    case DTypeKind::kRaw:
      break;
  }
  return element_bits_text(c, p);
}

std::string element_bits_text(const ElementCodec& c, const std::byte* p) {
  const std::uint32_t n = c.size == 0 ? 1 : c.size;
  std::string s = "0x";
  for (std::uint32_t i = n; i-- > 0;) {
    util::append_hex(s, static_cast<unsigned char>(p[i]));
  }
  return s;
}

}  // namespace tensorseal::detail::tools

namespace tensorseal {

std::string number_text(double v, int significant_digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", significant_digits, v);
  return buf;
}

}  // namespace tensorseal
