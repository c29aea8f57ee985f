#include "util/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <vector>

namespace tensorseal::detail::util {
namespace {

// The shared state of one parallel_for; a named type with internal linkage, so the
// std::thread state made from it stays inside the library (a lambda of an inline
// function in a header made the shared library export its typeinfo and vtable).
struct Work {
  std::size_t n;
  const std::function<void(std::size_t)>& fn;
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::size_t err_index;
  std::exception_ptr err;

  void operator()() {
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
  }
};

struct Worker {
  Work* work;
  void operator()() const { (*work)(); }
};

}  // namespace

void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn) {
  const unsigned t = static_cast<unsigned>(std::min<std::size_t>(resolve_threads(threads), n));
  if (t <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Work work{n, fn, {}, {}, n, {}};
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  // A thread the system refuses (EAGAIN under a process or memory limit) is work the
  // others take over; never an abort (a joinable std::thread left to unwind terminates).
  try {
    for (unsigned k = 1; k < t; ++k) pool.emplace_back(Worker{&work});
  } catch (const std::system_error&) {
  }
  work();
  for (auto& th : pool) th.join();
  if (work.err) std::rethrow_exception(work.err);
}

}  // namespace tensorseal::detail::util
