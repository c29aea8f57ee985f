// Recognising a zip archive by its first bytes, for format detection. Nothing is
// validated here: the reader (zip/reader.h) checks the whole structure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "util/endian.h"
#include "zip/constants.h"

namespace tensorseal::detail::zip {

// True when `head` opens with a local file header signature.
inline bool starts_with_local_header(std::span<const std::byte> head) noexcept {
  return head.size() >= 4 && util::load_le<std::uint32_t>(head.data()) == zip::kLocalHeaderSig;
}

// True when `head` opens with an end-of-central-directory record: an archive without
// entries.
inline bool starts_with_end_record(std::span<const std::byte> head) noexcept {
  return head.size() >= 4 && util::load_le<std::uint32_t>(head.data()) == zip::kEocdSig;
}

// The name in the first local file header (name length at byte 26, name at 30), when
// `head` holds all of it.
inline std::optional<std::string_view> first_local_name(std::span<const std::byte> head) noexcept {
  if (!starts_with_local_header(head) || head.size() < zip::kLocalHeaderSize) return std::nullopt;
  const std::uint16_t n = util::load_le<std::uint16_t>(head.data() + 26);
  if (head.size() < zip::kLocalHeaderSize + n) return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(head.data() + zip::kLocalHeaderSize), n);
}

}  // namespace tensorseal::detail::zip
