// Recognisers of the torch formats (rows of src/api/formats.cc).
#include <cstring>
#include <string_view>

#include "torch/format.h"
#include "zip/sniff.h"

namespace tensorseal::detail {
namespace {

bool starts_with(std::span<const std::byte> b, std::string_view magic) {
  return b.size() >= magic.size() && std::memcmp(b.data(), magic.data(), magic.size()) == 0;
}

// The legacy format opens with the pickled magic number 0x1950a86a20f9469cfc6c
// (protocol 2: PROTO 2, LONG1 of 10 bytes).
constexpr std::string_view kLegacyMagicPickle{"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14};

}  // namespace

bool detect_torch_zip(std::span<const std::byte> head) noexcept {
  if (!zip::starts_with_local_header(head)) return false;
  const auto first = zip::first_local_name(head);
  return !first || !first->ends_with(".npy");
}

bool detect_torch_legacy(std::span<const std::byte> head) noexcept { return starts_with(head, kLegacyMagicPickle); }

bool detect_pickle(std::span<const std::byte> b) noexcept {
  if (b.empty()) return false;
  const auto c = static_cast<unsigned char>(b[0]);
  // Protocol 2+: PROTO n.
  if (c == 0x80) return b.size() > 1 && static_cast<unsigned char>(b[1]) <= 5;
  // Protocol 0/1 pickles start with an opcode such as MARK, EMPTY_* or GLOBAL.
  return c != 0 && std::strchr("(]})cNIFLSVXUTJKMG\x8c\x95", static_cast<char>(c)) != nullptr;
}

}  // namespace tensorseal::detail
