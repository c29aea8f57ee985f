// libFuzzer target: the public entry point tensorseal::read_bytes on arbitrary bytes:
// content-based format detection and every reader behind it (safetensors, torch zip,
// torch legacy, pickle with nested files, npy, npz). Then hash, scan, and a canonical
// re-write in the file's own family and re-read to the same content (fuzz_util.h).
// Seeds: fuzz/corpus/read_bytes/ (small real files of every format; gen_seeds.py).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tensorseal::fuzz::fuzz_one("read_bytes", data, size);
}
