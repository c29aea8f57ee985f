// Little-endian loads and stores that are safe on any alignment.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace tensorseal::detail::util {

// std::byteswap is C++23; this covers the integer sizes files use.
template <typename T>
constexpr T bswap(T v) {
  if constexpr (sizeof(T) == 1)
    return v;
  else if constexpr (sizeof(T) == 2)
    return static_cast<T>(__builtin_bswap16(static_cast<std::uint16_t>(v)));
  else if constexpr (sizeof(T) == 4)
    return static_cast<T>(__builtin_bswap32(static_cast<std::uint32_t>(v)));
  else
    return static_cast<T>(__builtin_bswap64(static_cast<std::uint64_t>(v)));
}

template <typename T>
inline T load_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = bswap(v);
  return v;
}

template <typename T>
inline void append_le(std::string& out, T v) {
  if constexpr (std::endian::native == std::endian::big) v = bswap(v);
  char buf[sizeof v];
  std::memcpy(buf, &v, sizeof v);
  out.append(buf, sizeof v);
}

// Reverses each `unit`-byte group in place (big <-> little endian).
inline void byteswap_inplace(std::span<std::byte> data, std::size_t unit) {
  if (unit <= 1) return;
  for (std::size_t i = 0; i + unit <= data.size(); i += unit)
    for (std::size_t a = i, b = i + unit - 1; a < b; ++a, --b) std::swap(data[a], data[b]);
}

inline std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
inline std::string_view as_chars(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

}  // namespace tensorseal::detail::util
