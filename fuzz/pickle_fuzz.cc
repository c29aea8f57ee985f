// libFuzzer target for the restricted pickle VM (src/pickle/vm.cc).
//
// Small limits keep each input cheap; every failure must be a tensorseal::Error.
// The parsed value is also written back with the canonical writer, which must accept
// anything the VM produced (tensors and storages cannot occur: no hooks are set, so
// persistent ids are refused). Seeds: fuzz/corpus/pickle/ (real CPython pickles).
#include <cstddef>
#include <cstdint>
#include <span>

#include "pickle/stdlib.h"
#include "pickle/vm.h"
#include "pickle/writer.h"
#include "tensorseal/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tensorseal::Limits limits;
  limits.max_pickle_bytes = 1 << 20;
  limits.max_pickle_ops = 100'000;
  limits.max_depth = 200;
  limits.max_stack = 10'000;
  limits.max_memo = 10'000;
  limits.max_string = 1 << 16;
  limits.max_alloc = 1 << 24;
  tensorseal::detail::pickle::Hooks hooks;
  hooks.reduce = [](const tensorseal::Object& o, std::uint64_t) {
    return tensorseal::detail::pickle::stdlib_reduce(o);
  };
  try {
    tensorseal::detail::pickle::Parsed p =
        tensorseal::detail::pickle::parse({reinterpret_cast<const std::byte*>(data), size}, "fuzz", 0, limits, hooks);
    tensorseal::detail::pickle::Writer w({});
    (void)w.finish(p.value);
  } catch (const tensorseal::Error&) {
  }
  return 0;
}
