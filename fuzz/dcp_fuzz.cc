// libFuzzer target: a torch.distributed.checkpoint directory (src/dcp/): .metadata
// through the restricted VM and the typed decoding, storage_data bounds, item reading
// and chunk assembly. Input: u32 LE length L, then L bytes of .metadata, then the bytes
// of the one data file "__0_0.distcp", optionally preceded by a tensorseal.dcp manifest
// ("TSM1", u32 LE length, .tensorseal.json); all are written into a temp directory that is
// read as one checkpoint (fuzz_util.h: run_dcp_target). Whatever reads must hash, scan
// and round-trip through the canonical writer like every other reader.
// Seeds: fuzz/corpus/dcp/ (fuzz/corpus/gen_dcp_seeds.py: real dcp.save output).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tensorseal::fuzz::fuzz_one("dcp", data, size);
}
