// Overflow-checked arithmetic for sizes that come from files.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>

namespace tensorseal::detail::util {

inline std::optional<std::uint64_t> add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<std::uint64_t> mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<std::int64_t> smul(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<std::int64_t> sadd(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The product of the dimensions, each counted as at least 1: what the outermost stride
// of a contiguous layout of `shape` reaches, a zero-size tensor's included. nullopt
// when that does not fit int64 (torch refuses such a shape: "Stride calculation
// overflowed"). Negative dimensions count as 1 (the caller refuses them).
inline std::optional<std::uint64_t> stride_span(std::span<const std::int64_t> shape) {
  std::uint64_t span = 1;
  for (auto d : shape) {
    const auto s = mul(span, static_cast<std::uint64_t>(std::max<std::int64_t>(d, 1)));
    if (!s || *s > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    span = *s;
  }
  return span;
}

// The element count of `shape` as torch computes it (TensorImpl::safe_compute_numel):
// a uint64 product that must not overflow at any step, a zero dimension included (so
// [2^62, 4, 0] overflows while [0, 2^62, 2^62] is 0), and must fit int64. nullopt
// where torch refuses the shape ("numel: integer multiplication overflow").
// Dimensions must be non-negative (the caller checks).
inline std::optional<std::uint64_t> numel(std::span<const std::int64_t> shape) {
  std::uint64_t n = 1;
  bool overflow = false;
  for (auto d : shape) {
    const auto m = mul(n, static_cast<std::uint64_t>(d));
    overflow |= !m;
    n = m.value_or(0);  // (torch goes on with the wrapped product; the result is refused anyway)
  }
  if (overflow || n > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  return n;
}

}  // namespace tensorseal::detail::util
