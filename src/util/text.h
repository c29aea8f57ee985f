// Text codecs shared by the pickle VM, the pickle writer and the torch layer: code
// points <-> UTF-8 and the latin-1 codec (the only legacy codec pickles use for bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tensorseal::detail::util {

// Appends the UTF-8 encoding of code point `cp` (cp <= 0x10FFFF; surrogates are the
// caller's concern).
void append_utf8(std::string& out, std::uint32_t cp);

// The code points of `utf8`, which must be valid UTF-8 (see first_invalid_utf8).
std::vector<std::uint32_t> code_points(std::string_view utf8);

// str -> bytes with the latin-1 codec (Python's s.encode('latin1')): nullopt when the
// text holds a code point above U+00FF or is not valid UTF-8 there.
std::optional<std::string> latin1_encode(std::string_view utf8);

// bytes -> str with the latin-1 codec (Python's b.decode('latin1')): always valid UTF-8.
std::string latin1_decode(std::string_view bytes);

// True when every byte of `s` is below 0x80 (eight bytes at a time).
bool is_ascii(std::string_view s);

// `s` for an error message: in single quotes, printable ASCII as is, every other byte
// (and \ and ') as \xNN, cut with "..." after 160 characters.
std::string quoted(std::string_view s);

// The parts with `sep` between them (Python's sep.join(parts)).
std::string join(const std::vector<std::string>& parts, std::string_view sep);

}  // namespace tensorseal::detail::util
