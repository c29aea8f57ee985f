#include "tensorseal/error.h"

#include <fmt/format.h>

#include <utility>

#include "util/hex.h"
#include "util/utf8.h"

namespace tensorseal {

std::string_view kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid-argument";
    case ErrorKind::kIo:
      return "io";
    case ErrorKind::kCorrupt:
      return "corrupt";
    case ErrorKind::kUnsafe:
      return "unsafe";
    case ErrorKind::kUnsupported:
      return "unsupported";
    case ErrorKind::kLimit:
      return "limit";
    case ErrorKind::kInternal:
      return "internal";
  }
  return "internal";
}

Error::Error(Rule rule, std::string detail, std::string file, std::uint64_t offset)
    : kind_(rule.kind), rule_(rule.id), detail_(std::move(detail)), file_(std::move(file)), offset_(offset) {
  render();
}

Error Error::located(std::string file, std::uint64_t base_offset) const {
  Error e = *this;
  if (e.file_.empty())
    e.file_ = std::move(file);
  else if (!file.empty() && e.file_ != file)
    e.file_ = file + ": " + e.file_;
  if (e.offset_ != kNoOffset) e.offset_ += base_offset;
  e.render();
  return e;
}

void Error::render() {
  detail_ = printable(detail_);  // detail() is handed out on its own too (Python .detail)
  file_ = printable(file_);
  message_.clear();
  if (!file_.empty()) message_ += file_ + ": ";
  if (offset_ != kNoOffset) message_ += fmt::format("byte {}: ", offset_);
  message_ += "[" + rule_ + "] " + detail_;
  message_ = printable(message_);
}

// One line of valid UTF-8, always: the CLI prints what() as the whole report and the
// Python binding turns it into a str. Details may quote bytes from hostile files, so
// control characters and invalid UTF-8 are escaped as \xNN here, in the one place
// every error passes through.
std::string Error::printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const auto bad = detail::util::first_invalid_utf8(s);
    const std::size_t good = bad ? *bad : s.size();
    for (std::size_t i = 0; i < good; ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x20 || c == 0x7f) {
        if (c == '\n' || c == '\r' || c == '\t') {
          out += ' ';
        } else {
          out += "\\x";
          detail::util::append_hex(out, c);
        }
      } else {
        out += static_cast<char>(c);
      }
    }
    if (!bad) break;
    const auto c = static_cast<unsigned char>(s[good]);
    out += "\\x";
    detail::util::append_hex(out, c);
    s.remove_prefix(good + 1);
  }
  return out;
}

}  // namespace tensorseal
