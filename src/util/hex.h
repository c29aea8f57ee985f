// Hexadecimal digits: the one encoder and decoder of the library (lower-case).
#pragma once

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

}  // namespace tensorseal::detail::util
