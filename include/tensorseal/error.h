// tensorseal/error.h — the one error type of the library.
//
// Every failure is a tensorseal::Error carrying:
//   kind   — a broad category (corrupt file, unsafe content, limit, ...) that the CLI
//            maps to exit status 2 and the Python module maps to an exception subclass;
//   rule   — a stable identifier of the exact rule that was broken, e.g.
//            "safetensors/header-too-large"; each format's constants header lists its
//            rules, and each rule has a named test;
//   file, offset — where: the file (or a logical name like "<bytes>") and the byte
//            offset inside it (kNoOffset when there is no meaningful one);
//   detail — a short human explanation with the values involved.
// what() renders all of it as one line:  FILE: byte N: [rule] detail
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "tensorseal/export.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

enum class ErrorKind : std::uint8_t {
  kInvalidArgument,  // the caller asked for something impossible
  kIo,               // the operating system refused (open, read, write, rename, ...)
  kCorrupt,          // the file breaks a rule of its format
  kUnsafe,           // the file asks for something tensorseal refuses to do (code execution)
  kUnsupported,      // valid, but a feature tensorseal does not handle
  kLimit,            // a resource limit was reached (sizes, depth, counts)
  kInternal,         // a bug in tensorseal
};

// Name of a kind as used in messages and by the Python exception mapping.
std::string_view kind_name(ErrorKind kind) noexcept;

// A rule: stable id plus the kind of error breaking it produces. Declared as
// constexpr constants next to each format's other constants.
struct Rule {
  std::string_view id;
  ErrorKind kind;
};

inline constexpr std::uint64_t kNoOffset = ~std::uint64_t{0};

class Error : public std::exception {
 public:
  Error(Rule rule, std::string detail, std::string file = {}, std::uint64_t offset = kNoOffset);

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& rule() const noexcept { return rule_; }
  const std::string& file() const noexcept { return file_; }
  std::uint64_t offset() const noexcept { return offset_; }
  const std::string& detail() const noexcept { return detail_; }
  const char* what() const noexcept override { return message_.c_str(); }

  // Returns a copy naming `file` and, when this error has no offset yet, `offset`.
  // Lets inner parsers (that see only a byte span) throw and the caller add where.
  [[nodiscard]] Error located(std::string file, std::uint64_t base_offset = 0) const;

 private:
  void render();
  static std::string printable(std::string_view s);
  ErrorKind kind_;
  std::string rule_, detail_, file_;
  std::uint64_t offset_;
  std::string message_;
};

// Rules shared by every part of the library.
namespace rules {
inline constexpr Rule kIoOpen{"io/open", ErrorKind::kIo};
inline constexpr Rule kIoRead{"io/read", ErrorKind::kIo};
inline constexpr Rule kIoWrite{"io/write", ErrorKind::kIo};
inline constexpr Rule kIoMap{"io/mmap", ErrorKind::kIo};
inline constexpr Rule kInvalidArgument{"api/invalid-argument", ErrorKind::kInvalidArgument};
inline constexpr Rule kUnknownFormat{"detect/unknown-format", ErrorKind::kUnsupported};
inline constexpr Rule kFormatMismatch{"detect/format-mismatch", ErrorKind::kInvalidArgument};
inline constexpr Rule kAmbiguousFormat{"detect/ambiguous", ErrorKind::kUnsafe};
inline constexpr Rule kTruncated{"file/truncated", ErrorKind::kCorrupt};
inline constexpr Rule kSizeOverflow{"file/size-overflow", ErrorKind::kCorrupt};
inline constexpr Rule kViewOutOfBounds{"tensor/view-out-of-bounds", ErrorKind::kCorrupt};
inline constexpr Rule kBadShape{"tensor/bad-shape", ErrorKind::kCorrupt};
// An overlapping view describing more bytes beyond its storage than Limits::max_expanded_bytes.
inline constexpr Rule kExpandedTooLarge{"tensor/expanded-too-large", ErrorKind::kLimit};
inline constexpr Rule kUnsupportedValue{"value/unsupported", ErrorKind::kUnsupported};
inline constexpr Rule kInternal{"internal", ErrorKind::kInternal};
}  // namespace rules

}  // namespace tensorseal
TENSORSEAL_API_END
