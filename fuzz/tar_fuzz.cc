// libFuzzer target: the tar reader (src/tar/reader.cc: ustar, GNU and pax headers,
// long names, hard links) on arbitrary bytes, then torch's tar format on top of it
// (src/torch/tar_reader.cc) with hash, scan, canonical .pt re-write and re-read
// (fuzz_util.h). Any tensorseal::Error is accepted.
// Seeds: fuzz/corpus/tar/ (tests/py/producers/torch_tar.py's files: Python's tarfile in
// its three formats, torch 0.1's members; gen_tar_seeds.py).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tensorseal::fuzz::fuzz_one("tar", data, size);
}
