// libFuzzer target: the two safetensors header parsers against each other. Input as for
// safetensors_header (u16 LE data length, then the header text, framed into a file).
// The fast scanner for the JSON subset writers produce and nlohmann's SAX parser
// (src/safetensors/header.cc) must give the same index or the same error, and the full
// reader must agree with them (fuzz_util.h: index_agreement); any difference traps.
// Seeds: the safetensors_header corpus (fuzz/corpus/safetensors_header/, real headers).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tensorseal::fuzz::fuzz_one("safetensors_index", data, size);
}
