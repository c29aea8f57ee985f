// libFuzzer target: the nested-file path. The input becomes the payload of
//   torch.storage._load_from_bytes(<input>)
// inside a protocol-4 pickle (what pickle.dumps(storage) writes), which is read with
// read_bytes: the pickle VM, the rebuild table, then format detection and the reader of
// whatever the payload is (legacy, zip, another pickle -> deeper nesting). Then hash,
// scan, canonical .pt re-write and re-read (fuzz_util.h).
// Seeds: fuzz/corpus/nested_pickle/ (the _load_from_bytes payloads of real
// pickle.dumps(tensor/storage) from torch 2.13 and 1.13, plus small torch.save files).
#include <cstring>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tensorseal;
  static const ReadOptions options = fuzz::small_options();
  if (size > (1u << 22)) return 0;
  // PROTO 4; SHORT_BINUNICODE x2 + STACK_GLOBAL; BINBYTES <u32 len> <payload>; TUPLE1; REDUCE; STOP
  std::string p("\x80\x04", 2);
  p += '\x8c'; p += char(13); p += "torch.storage";
  p += '\x8c'; p += char(16); p += "_load_from_bytes";
  p += '\x93';
  p += 'B';
  const std::uint32_t n = static_cast<std::uint32_t>(size);
  for (int i = 0; i < 4; ++i) p += static_cast<char>((n >> (8 * i)) & 0xff);
  p.append(reinterpret_cast<const char*>(data), size);
  p += "\x85R.";
  try {
    const Checkpoint c = read_bytes({reinterpret_cast<const std::byte*>(p.data()), p.size()}, "fuzz.pkl", options);
    fuzz::exercise(c, Format::kTorchZip, options);
  } catch (const Error&) {
  }
  return 0;
}
