// libFuzzer target: the .npy and .npz readers on arbitrary bytes (through read_bytes,
// which detects the format from the content; .npz goes through the zip reader), then
// hashes every tensor so that each view is walked, re-writes and re-reads it. Any tensorseal::Error is an
// accepted outcome; crashes, hangs, leaks and sanitizer reports are bugs.
// Seed corpus: fuzz/corpus/npy/ (tiny files from np.save, np.lib.format.write_array,
// np.savez and np.savez_compressed).
#include <cstddef>
#include <cstdint>
#include <span>

#include "tensorseal/checkpoint.h"
#include "tensorseal/error.h"
#include "tensorseal/hash.h"
#include "tensorseal/write.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tensorseal;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const Format f = detect_format(bytes);
  if (f != Format::kNpy && f != Format::kNpz) return 0;
  ReadOptions options;
  options.limits.max_alloc = 1 << 24;
  try {
    const Checkpoint c = read_bytes(bytes, "fuzz.npy", options);
    for (const auto& t : collect_tensors(c.root)) (void)tensor_sha256(*t.tensor);
    // Whatever parses must re-write canonically and read back to the same content.
    const std::string out = write_bytes(c.root, c.format);
    const Checkpoint back =
        read_bytes({reinterpret_cast<const std::byte*>(out.data()), out.size()}, "fuzz.out", options);
    if (content_hash(back.root) != content_hash(c.root)) __builtin_trap();
    if (option_value(c.layout, "compress") == "1") {  // canon's form of a compressed npz: members through zip::deflate
      WriteOptions deflated;
      deflated.format_options = c.layout;
      const std::string z = write_bytes(c.root, c.format, deflated);
      const Checkpoint zb = read_bytes({reinterpret_cast<const std::byte*>(z.data()), z.size()}, "fuzz.z", options);
      if (option_value(zb.layout, "compress") != "1" || content_hash(zb.root) != content_hash(c.root)) __builtin_trap();
    }
  } catch (const Error&) {
  }
  return 0;
}
