// libFuzzer target: the nested-file path. The input becomes the payload of
//   torch.storage._load_from_bytes(<input>)
// inside a protocol-4 pickle (what pickle.dumps(storage) writes), which is read with
// read_bytes: the pickle VM, the rebuild table, then format detection and the reader of
// whatever the payload is (legacy, zip, another pickle -> deeper nesting). Then hash,
// scan, canonical .pt re-write and re-read (fuzz_util.h).
// Seeds: fuzz/corpus/nested_pickle/ (the _load_from_bytes payloads of real
// pickle.dumps(tensor/storage) from torch 2.13 and 1.13, plus small torch.save files).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tensorseal::fuzz::fuzz_one("nested_pickle", data, size);
}
