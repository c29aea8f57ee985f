// torch's lazy conj/neg bits (tensor.h LazyBits): the deferred values of a view.
#include <cstring>
#include <string>

#include "tensorseal/error.h"
#include "tensorseal/tensor.h"

namespace tensorseal {
namespace {

bool is_complex(DType d) { return d == DType::kComplex32 || d == DType::kComplex64 || d == DType::kComplex128; }
bool is_floating(DType d) {
  return d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat32 || d == DType::kFloat64;
}
bool is_integer(DType d) {
  return d == DType::kInt8 || d == DType::kInt16 || d == DType::kInt32 || d == DType::kInt64 || d == DType::kUInt8 ||
         d == DType::kUInt16 || d == DType::kUInt32 || d == DType::kUInt64;
}

// Flips bit `bit` (0 = least significant) of the little-endian value at `p`.
void flip_bit(std::byte* p, unsigned bit) { p[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8)); }

// Two's complement negation of a little-endian integer of `width` bytes.
void negate_int(std::byte* p, unsigned width) {
  unsigned carry = 1;
  for (unsigned i = 0; i < width; ++i) {
    const unsigned v = (~static_cast<unsigned>(p[i]) & 0xFFu) + carry;
    p[i] = static_cast<std::byte>(v & 0xFFu);
    carry = v >> 8;
  }
}

// `raw`'s bytes with the bits applied to every whole element; a trailing partial
// element (no view reaches it) is copied unchanged.
std::shared_ptr<const Storage> apply_bits(const Storage& raw, DType dtype, bool neg, bool conj) {
  const auto src = raw.bytes();
  std::vector<std::byte> out(src.begin(), src.end());
  const unsigned width = info(dtype).bits / 8;
  const bool complex = is_complex(dtype), integer = is_integer(dtype);
  const unsigned part = complex ? width / 2 : width;  // a real element or one complex part
  const unsigned sign = part * 8 - 1;                 // the sign bit of a part
  for (std::size_t at = 0; at + width <= out.size(); at += width) {
    std::byte* e = out.data() + at;
    if (integer) {
      negate_int(e, width);
      continue;
    }
    if (neg) flip_bit(e, sign);                            // real part (or the real value)
    if (complex && neg != conj) flip_bit(e + part, sign);  // imaginary part
  }
  return Storage::owned(std::move(out), raw.dtype);
}

}  // namespace

bool can_carry_lazy_bits(DType dtype, bool neg, bool conj) noexcept {
  if (conj && !is_complex(dtype)) return false;
  if (neg && !(is_complex(dtype) || is_floating(dtype) || is_integer(dtype))) return false;
  return true;
}

std::shared_ptr<const Tensor> lazy_view(const Tensor& raw, bool neg, bool conj) {
  if (raw.lazy) throw Error(rules::kInvalidArgument, "a conj/neg view of a conj/neg view (pass its raw view)");
  if (!can_carry_lazy_bits(raw.dtype, neg, conj))
    throw Error(rules::kInvalidArgument,
                std::string(conj ? "conj" : "neg") + " bit on a " + std::string(name(raw.dtype)) + " tensor");
  auto t = std::make_shared<Tensor>(raw);
  if (!neg && !conj) return t;
  auto base = raw.storage;
  const DType dtype = raw.dtype;
  t->storage = Storage::deferred(
      base->size(), [base, dtype, neg, conj] { return apply_bits(*base, dtype, neg, conj); }, base->dtype);
  t->lazy = std::make_shared<const LazyBits>(LazyBits{std::move(base), neg, conj});
  return t;
}

Tensor raw_view(const Tensor& t) {
  Tensor r = t;
  if (t.lazy) {
    r.storage = t.lazy->raw;
    r.lazy = nullptr;
  }
  return r;
}

}  // namespace tensorseal
