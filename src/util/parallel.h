// Minimal deterministic parallelism: results are stored by index, so output never
// depends on scheduling or on the number of threads.
#pragma once

#include <cstddef>
#include <functional>
#include <thread>

namespace tensorseal::detail::util {

inline unsigned resolve_threads(unsigned requested) {
  if (requested != 0) return requested;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : hw;
}

// Runs fn(i) for i in [0, n) on up to `threads` threads (0 = all cores). If any call
// throws, the exception of the lowest index is rethrown after all threads finish.
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn);

}  // namespace tensorseal::detail::util
