// libFuzzer target: the safetensors JSON header. Input: u16 LE data-buffer length D
// (at most 4096), then the header text. The harness builds a well-framed file
// (u64 header length, header, D bytes of data) so that every input reaches the JSON
// parse and the entry/offset/dtype/shape rules instead of failing at the framing.
// Then hash, scan, safetensors re-write and re-read (fuzz_util.h).
// Seeds: fuzz/corpus/safetensors_header/ (headers of real safetensors 0.8 files, with
// their data length in front; gen_seeds.py).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tensorseal::fuzz::fuzz_one("safetensors_header", data, size);
}
