// libFuzzer target: the safetensors JSON header. Input: u16 LE data-buffer length D
// (at most 4096), then the header text. The harness builds a well-framed file
// (u64 header length, header, D bytes of data) so that every input reaches the JSON
// parse and the entry/offset/dtype/shape rules instead of failing at the framing.
// Then hash, scan, safetensors re-write and re-read (fuzz_util.h).
// Seeds: fuzz/corpus/safetensors_header/ (headers of real safetensors 0.8 files, with
// their data length in front; gen_seeds.py).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tensorseal;
  static const ReadOptions options = fuzz::small_options();
  if (size < 2) return 0;
  const std::size_t d = (data[0] | (data[1] << 8)) & 0x1fff;
  if (d > 4096) return 0;
  const std::size_t h = size - 2;
  std::string f(8, '\0');
  for (int i = 0; i < 8; ++i) f[i] = static_cast<char>((static_cast<std::uint64_t>(h) >> (8 * i)) & 0xff);
  f.append(reinterpret_cast<const char*>(data + 2), h);
  for (std::size_t i = 0; i < d; ++i) f += static_cast<char>(i * 131 + 7);
  try {
    const Checkpoint c = detail::read_safetensors(
        fuzz::input_of({reinterpret_cast<const std::byte*>(f.data()), f.size()}, options));
    fuzz::exercise(c, Format::kSafetensors, options);
  } catch (const Error&) {
  }
  return 0;
}
