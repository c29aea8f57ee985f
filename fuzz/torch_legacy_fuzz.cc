// libFuzzer target: the legacy torch reader (src/torch/legacy_reader.cc: five pickles,
// then raw storages) called directly on arbitrary bytes, then hash, scan, canonical
// .pt re-write and re-read (fuzz_util.h). Any tensorseal::Error is accepted.
// Seeds: fuzz/corpus/torch_legacy/ (torch.save(..., _use_new_zipfile_serialization=False)
// from torch 2.13 and 1.13; gen_seeds.py).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tensorseal::fuzz::fuzz_one("torch_legacy", data, size);
}
