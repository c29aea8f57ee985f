// libFuzzer target: the public entry point tensorseal::read_bytes on arbitrary bytes:
// content-based format detection and every reader behind it (safetensors, torch zip,
// torch legacy, pickle with nested files, npy, npz). Then hash, scan, and a canonical
// re-write in the file's own family and re-read to the same content (fuzz_util.h).
// Seeds: fuzz/corpus/read_bytes/ (small real files of every format; gen_seeds.py).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tensorseal;
  static const ReadOptions options = fuzz::small_options();
  try {
    const Checkpoint c = read_bytes(fuzz::as_bytes(data, size), "fuzz", options);
    Format family = Format::kTorchZip;
    if (c.format == Format::kSafetensors || c.format == Format::kNpy || c.format == Format::kNpz) family = c.format;
    fuzz::exercise(c, family, options);
  } catch (const Error&) {
  }
  return 0;
}
