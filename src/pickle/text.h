// pickle: Python's text codecs for the protocol-0 text opcodes.
#pragma once

#include <string>
#include <string_view>

namespace tensorseal::detail::pickle {

// codecs.escape_decode of a STRING body (the repr of a Python 2 str, quotes removed):
// \\ \' \" \a \b \f \n \r \t \v \xHH \ooo and line continuations; unknown escapes stay
// as written. Throws Error{pickle/bad-string-literal} without a location (the caller
// adds it).
std::string escape_decode(std::string_view body);

// raw-unicode-escape decoding (UNICODE opcode) into UTF-8: bytes are latin-1 code
// points except \uXXXX and \UXXXXXXXX after an odd run of backslashes. Throws
// Error{pickle/bad-string-literal} or Error{pickle/surrogate} without a location.
std::string raw_unicode_escape_decode(std::string_view line);

}  // namespace tensorseal::detail::pickle
