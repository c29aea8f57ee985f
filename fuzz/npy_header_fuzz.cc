// libFuzzer target: the .npy header parser (src/numpy/npy.cc) called directly, without
// format detection: numpy::object_array_data (what scan and the npy reader read first)
// and numpy::parse on one image. npy_fuzz.cc reaches the parser only through read_bytes,
// whose detection and zip layers spend most mutations elsewhere.
// Input: byte 0 picks the format version (1, 2 or 3: v2/v3 have a 4-byte header
// length), byte 1 the number of data bytes after the header (0..255), the rest is the
// header text. Whatever parses must agree with object_array_data, and the header numpy
// would write for the parsed descr/fortran_order/shape must parse to the same values.
// Seeds: fuzz/corpus/npy_header/ (the header text and data size of real np.save files,
// gen_seeds.py).
#include <cstddef>
#include <cstdint>
#include <string>

#include "numpy/npy.h"
#include "tensorseal/error.h"
#include "tensorseal/storage.h"

namespace {

std::string image_of(int major, std::string_view text, std::size_t data) {
  std::string f("\x93NUMPY", 6);
  f += static_cast<char>(major);
  f += '\0';
  const std::size_t n = text.size();
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) f += static_cast<char>((n >> (8 * i)) & 0xff);
  f += text;
  for (std::size_t i = 0; i < data; ++i) f += static_cast<char>(i * 37 + 11);
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tensorseal;
  namespace np = detail::numpy;
  if (size < 2 || size > (1u << 20)) return 0;
  const int major = 1 + data[0] % 3;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  if (major == 1 && text.size() > 0xffff) return 0;
  const std::string image = image_of(major, text, data[1]);
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(image.data()), image.size());
  std::optional<std::uint64_t> object;
  bool header_ok = true;
  try {
    object = np::object_array_data(bytes);
  } catch (const Error&) {
    header_ok = false;
  }
  Limits limits;
  limits.max_alloc = 1 << 24;
  try {
    const np::Parsed p = np::parse(Storage::owned(std::vector<std::byte>(bytes.begin(), bytes.end())), limits);
    // A header that parses is one object_array_data reads, and not an object array.
    if (!header_ok || object) __builtin_trap();
    p.tensor->validate();
    // numpy's own header for the values read parses back to them.
    std::string again = np::header(p.descr, p.fortran_order, p.tensor->shape);
    again.append(image.substr(p.data_offset));
    const np::Parsed q = np::parse(
        Storage::owned(std::vector<std::byte>(reinterpret_cast<const std::byte*>(again.data()),
                                              reinterpret_cast<const std::byte*>(again.data()) + again.size())),
        limits);
    if (q.descr != p.descr || q.fortran_order != p.fortran_order || q.tensor->shape != p.tensor->shape)
      __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
