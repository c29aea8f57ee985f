// Recognisers of the torch formats (rows of src/api/formats.cc).
#include <algorithm>
#include <cstring>
#include <string_view>

#include "pickle/vm.h"
#include "torch/constants.h"
#include "torch/format.h"
#include "zip/sniff.h"

namespace tensorseal::detail::torch {
namespace {

// Limits for parsing the first pickle of a file during detection: the legacy magic
// pickle is a dozen opcodes; anything larger is not one.
Limits magic_limits() {
  Limits l;
  l.max_pickle_bytes = 64;
  l.max_pickle_ops = 16;
  l.max_depth = 4;
  l.max_stack = 16;
  l.max_memo = 16;
  l.max_string = 64;
  l.max_alloc = 4096;
  l.max_nested_files = 0;
  return l;
}

}  // namespace

bool detect_torch_zip(std::span<const std::byte> head) noexcept {
  if (!zip::starts_with_local_header(head)) return false;
  const auto first = zip::first_local_name(head);
  return !first || !first->ends_with(".npy");
}

// A legacy file is a sequence of pickles whose first one is torch's magic number
// 0x1950a86a20f9469cfc6c, at whatever protocol torch.save(pickle_protocol=...) used
// (LONG1 at protocol 2+, possibly framed; the text LONG at protocols 0 and 1): the
// first pickle's value decides, not a byte prefix.
bool detect_torch_legacy(std::span<const std::byte> head) noexcept {
  if (!detect_pickle(head)) return false;
  try {
    static const Limits limits = magic_limits();
    const pickle::Parsed p = pickle::parse(head.first(std::min<std::size_t>(head.size(), 64)), "", 0, limits);
    return p.value.is(Value::Kind::kBigInt) && p.value.as_bigint().to_decimal() == torch::kLegacyMagic;
  } catch (...) {
    return false;
  }
}

bool detect_pickle(std::span<const std::byte> b) noexcept {
  if (b.empty()) return false;
  const auto c = static_cast<unsigned char>(b[0]);
  // Protocol 2+: PROTO n.
  if (c == 0x80) return b.size() > 1 && static_cast<unsigned char>(b[1]) <= 5;
  // Protocol 0/1 pickles start with an opcode such as MARK, EMPTY_* or GLOBAL.
  return c != 0 && std::strchr("(]})cNIFLSVXUTJKMG\x8c\x95", static_cast<char>(c)) != nullptr;
}

}  // namespace tensorseal::detail::torch
