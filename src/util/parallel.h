// Minimal deterministic parallelism: results are stored by index, so output never
// depends on scheduling or on the number of threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tensorseal::detail::util {

inline unsigned resolve_threads(unsigned requested) {
  if (requested != 0) return requested;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : hw;
}

// Runs fn(i) for i in [0, n) on up to `threads` threads (0 = all cores). If any call
// throws, the exception of the lowest index is rethrown after all threads finish.
inline void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn) {
  const unsigned t = static_cast<unsigned>(std::min<std::size_t>(resolve_threads(threads), n));
  if (t <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::size_t err_index = n;
  std::exception_ptr err;
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(mu);
        if (i < err_index) {
          err_index = i;
          err = std::current_exception();
        }
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  for (unsigned k = 1; k < t; ++k) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (err) std::rethrow_exception(err);
}

}  // namespace tensorseal::detail::util
