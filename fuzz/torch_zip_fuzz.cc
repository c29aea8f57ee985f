// libFuzzer target: the torch zip reader (src/torch/zip_reader.cc) called directly on
// arbitrary bytes (no format detection in front, so a zip whose first entry ends in
// .npy still reaches it), then the checks in fuzz_util.h: hash, scan, canonical .pt
// re-write and re-read to the same content hash. Any tensorseal::Error is accepted;
// crashes, hangs, leaks, sanitizer reports and round-trip mismatches are bugs.
// Seeds: fuzz/corpus/torch_zip/ (torch.save from torch 2.13 and 1.13; gen_seeds.py).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tensorseal::fuzz::fuzz_one("torch_zip", data, size);
}
