#include "pickle/text.h"

#include <fmt/format.h>

#include "pickle/constants.h"
#include "util/hex.h"
#include "util/text.h"

namespace tensorseal::detail::pickle {

std::string escape_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= s.size()) throw Error(rules::kBadStringLiteral, "STRING ends with a lone backslash");
    char e = s[i];
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x': {
        int h1 = i + 1 < s.size() ? util::hex_digit(s[i + 1]) : -1;
        int h2 = i + 2 < s.size() ? util::hex_digit(s[i + 2]) : -1;
        if (h1 < 0 || h2 < 0) throw Error(rules::kBadStringLiteral, "STRING has an invalid \\x escape");
        out += static_cast<char>(h1 * 16 + h2);
        i += 2;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          int v = e - '0';
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
            v = v * 8 + (s[++i] - '0');
          out += static_cast<char>(v & 0xFF);
        } else {
          out += '\\';  // unknown escapes stay as they are (Python: DeprecationWarning)
          out += e;
        }
    }
  }
  return out;
}

std::string raw_unicode_escape_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c != '\\') {
      util::append_utf8(out, c);
      ++i;
      continue;
    }
    std::size_t run = 0;
    while (i + run < s.size() && s[i + run] == '\\') ++run;
    std::size_t after = i + run;
    if (run % 2 == 0 || after >= s.size() || (s[after] != 'u' && s[after] != 'U')) {
      out.append(run, '\\');
      i = after;
      continue;
    }
    out.append(run - 1, '\\');
    std::size_t count = s[after] == 'u' ? 4 : 8;
    std::uint32_t cp = 0;
    for (std::size_t k = 0; k < count; ++k) {
      int h = after + 1 + k < s.size() ? util::hex_digit(s[after + 1 + k]) : -1;
      if (h < 0)
        throw Error(rules::kBadStringLiteral, std::string("UNICODE has a truncated \\") + s[after] + " escape");
      cp = cp * 16 + static_cast<std::uint32_t>(h);
    }
    if (cp > 0x10FFFF) throw Error(rules::kBadStringLiteral, "UNICODE escape is beyond U+10FFFF");
    if (cp >= 0xD800 && cp <= 0xDFFF)
      throw Error(rules::kSurrogate, fmt::format("UNICODE holds the surrogate code point {} (not representable)", cp));
    util::append_utf8(out, cp);
    i = after + 1 + count;
  }
  return out;
}

}  // namespace tensorseal::detail::pickle
