// libFuzzer target: tensorseal's DEFLATE encoder (src/zip/deflate.h) on arbitrary
// bytes. Every stream must inflate (zlib) back to exactly its input, end where it
// says, and be the same when made twice; anything else is a bug (__builtin_trap).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "zip/deflate.h"
#include "zip/inflate.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tensorseal::detail::zip;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  const auto stream = deflate(in);
  const Inflated back = inflate_bounded(stream, size + 1);
  if (!back.ended || back.invalid || back.over || back.consumed != stream.size()) __builtin_trap();
  if (back.data.size() != size || !std::equal(back.data.begin(), back.data.end(), in.begin())) __builtin_trap();
  if (deflate(in) != stream) __builtin_trap();
  return 0;
}
