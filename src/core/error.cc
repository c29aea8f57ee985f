#include "tensorseal/error.h"

#include <utility>

namespace tensorseal {

std::string_view kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid-argument";
    case ErrorKind::kIo: return "io";
    case ErrorKind::kCorrupt: return "corrupt";
    case ErrorKind::kUnsafe: return "unsafe";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kLimit: return "limit";
    case ErrorKind::kInternal: return "internal";
  }
  return "internal";
}

Error::Error(Rule rule, std::string detail, std::string file, std::uint64_t offset)
    : kind_(rule.kind), rule_(rule.id), detail_(std::move(detail)), file_(std::move(file)),
      offset_(offset) {
  render();
}

Error Error::located(std::string file, std::uint64_t base_offset) const {
  Error e = *this;
  if (e.file_.empty()) e.file_ = std::move(file);
  else if (!file.empty() && e.file_ != file) e.file_ = file + ": " + e.file_;
  if (e.offset_ != kNoOffset) e.offset_ += base_offset;
  e.render();
  return e;
}

void Error::render() {
  message_.clear();
  if (!file_.empty()) message_ += file_ + ": ";
  if (offset_ != kNoOffset) message_ += "byte " + std::to_string(offset_) + ": ";
  message_ += "[" + rule_ + "] " + detail_;
  // One line, always: the CLI prints what() as the whole error report.
  for (char& c : message_)
    if (c == '\n' || c == '\r') c = ' ';
}

}  // namespace tensorseal
