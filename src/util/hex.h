// Hexadecimal digits: the one encoder and decoder of the library (lower-case).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tensorseal::detail::util {

inline constexpr char kHexDigits[] = "0123456789abcdef";

// Appends the two lower-case hex digits of `byte`.
inline void append_hex(std::string& out, unsigned char byte) {
  out += kHexDigits[byte >> 4];
  out += kHexDigits[byte & 15];
}

// Lower-case hex of raw bytes, two digits per byte, in order.
inline std::string to_hex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) append_hex(out, c);
  return out;
}

// Value of one hex digit (either case), or -1.
inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Raw bytes of lower- or upper-case hex; nullopt for an odd length or a non-digit.
inline std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<char>(hi * 16 + lo);
  }
  return out;
}

}  // namespace tensorseal::detail::util
