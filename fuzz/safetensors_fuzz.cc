// libFuzzer target for the safetensors reader (docs/formats/safetensors.md).
//
// Any input must either parse or throw tensorseal::Error; anything else (a crash, a
// sanitizer report, another exception type, a hang) is a bug. A successful parse must
// also survive hashing and re-writing, which touch every tensor byte it claims.
// Seeds: fuzz/corpus/safetensors/ (small files written by safetensors 0.8).
#include <tensorseal/tensorseal.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The small limits every reader target uses (fuzz_util.h): with the default max_alloc
  // (8 GiB of charged pickle values) one hostile 1.7 KB pickle legitimately costs 0.6 s
  // (5 s under ASan) before pickle/max-alloc stops it.
  static const tensorseal::ReadOptions options = tensorseal::fuzz::small_options();
  try {
    const auto c = tensorseal::read_bytes({reinterpret_cast<const std::byte*>(data), size}, "fuzz", options);
    (void)tensorseal::content_hash(c.root, {tensorseal::HashAlgo::kXxh3, 1});
    if (c.format == tensorseal::Format::kSafetensors) {
      tensorseal::WriteOptions w;
      w.metadata = c.metadata;
      w.threads = 1;
      (void)tensorseal::write_bytes(c.root, tensorseal::Format::kSafetensors, w);
    }
  } catch (const tensorseal::Error&) {
    // Rejected input: expected.
  }
  return 0;
}
