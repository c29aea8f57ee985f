// pickle: integers as pickle's LONG1/LONG4 encode them (two's complement,
// little-endian, minimal length), shared by the VM and the writer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tensorseal::detail::pickle {

// Drops redundant sign-extension bytes: the result is the shortest two's complement
// little-endian form of the same number ("" stays "", meaning 0).
inline std::string minimal_le(std::string_view le) {
  std::size_t n = le.size();
  while (n > 1) {
    auto last = static_cast<std::uint8_t>(le[n - 1]);
    auto prev = static_cast<std::uint8_t>(le[n - 2]);
    if ((last == 0x00 && !(prev & 0x80)) || (last == 0xFF && (prev & 0x80)))
      --n;
    else
      break;
  }
  if (n == 1 && le[0] == 0) n = 0;  // CPython's encode_long(0) is b''
  return std::string(le.substr(0, n));
}

// CPython's pickle.encode_long for a 64-bit value (minimal, b'' for 0).
inline std::string le_from_int64(std::int64_t v) {
  std::string le(8, '\0');
  auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) le[i] = static_cast<char>((u >> (8 * i)) & 0xFF);
  return minimal_le(le);
}

}  // namespace tensorseal::detail::pickle
