// Shared pieces of the libFuzzer harnesses: small limits (so that every input is cheap
// and an allocation beyond them is a bug, not a slow run) and the round-trip check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "io/input.h"
#include "tensorseal/checkpoint.h"
#include "tensorseal/error.h"
#include "tensorseal/hash.h"
#include "tensorseal/scan.h"
#include "tensorseal/write.h"

namespace tensorseal::fuzz {

inline ReadOptions small_options() {
  ReadOptions o;
  o.limits.max_safetensors_header = 1 << 20;
  o.limits.max_pickle_bytes = 1 << 22;
  o.limits.max_pickle_ops = 200'000;
  o.limits.max_depth = 200;
  o.limits.max_stack = 50'000;
  o.limits.max_memo = 50'000;
  o.limits.max_string = 1 << 22;
  o.limits.max_alloc = 1 << 25;
  o.limits.max_entries = 10'000;
  return o;
}

inline std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

// An Input over a copy of the bytes, as read_bytes builds it, for calling one
// format's reader directly (no detection).
inline detail::Input input_of(std::span<const std::byte> bytes, const ReadOptions& options) {
  detail::Input in;
  in.name = "fuzz";
  in.whole = Storage::owned(std::vector<std::byte>(bytes.begin(), bytes.end()));
  in.options = &options;
  return in;
}

// Whatever parsed must hash (which walks every element of every view), scan, and,
// when the canonical writer accepts it, read back to the same content.
inline void exercise(const Checkpoint& c, Format write_as, const ReadOptions& options) {
  const std::string h = content_hash(c.root, {HashAlgo::kXxh3, 1});
  (void)scan(c);
  std::string out;
  try {
    WriteOptions w;
    w.threads = 1;
    if (write_as == Format::kSafetensors) w.metadata = c.metadata;
    out = write_bytes(c.root, write_as, w);
  } catch (const Error&) {
    return;  // not representable in that format (e.g. non-tensor leaves in npz)
  }
  const Checkpoint back = read_bytes({reinterpret_cast<const std::byte*>(out.data()), out.size()}, "fuzz.out", options);
  if (content_hash(back.root, {HashAlgo::kXxh3, 1}) != h) __builtin_trap();
}

}  // namespace tensorseal::fuzz
