// libFuzzer target: the zip reader (src/zip/reader.h) on arbitrary bytes.
// Parses the archive, then reads (inflating, limit-checked) and CRC-checks every entry.
// Any tensorseal::Error is an accepted outcome; crashes, hangs, leaks and sanitizer
// reports are bugs. Seed corpus: fuzz/corpus/zip/ (tiny files from torch.save,
// np.savez, np.savez_compressed and python's zipfile).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tensorseal/error.h"
#include "tensorseal/limits.h"
#include "zip/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tensorseal;
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  Limits limits;
  limits.max_alloc = 1 << 24;  // keep inflation small under the fuzzer
  limits.max_entries = 1 << 16;
  try {
    const auto archive = detail::zip::read(file, "fuzz.zip", limits);
    for (const auto& e : archive.entries) {
      std::vector<std::byte> scratch;
      const auto bytes = detail::zip::entry_bytes(file, e, scratch, "fuzz.zip", limits);
      detail::zip::verify_crc(e, bytes, "fuzz.zip");
    }
  } catch (const Error&) {
  }
  return 0;
}
