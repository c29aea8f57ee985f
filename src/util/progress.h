// ProgressMeter: counts bytes done by any thread and calls a tensorseal::Progress
// callback under the contract of tensorseal/progress.h (serialised, monotone, at most
// ~512 calls, a final call with done == total).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "tensorseal/progress.h"

namespace tensorseal::detail::util {

class ProgressMeter {
 public:
  static constexpr std::uint64_t kSteps = 512;

  // `fn` may be null (then every call is a no-op) and must outlive the meter.
  ProgressMeter(const Progress* fn, std::uint64_t total)
      : fn_(fn != nullptr && *fn ? fn : nullptr), total_(total), step_(std::max<std::uint64_t>(1, total / kSteps)) {}

  bool active() const noexcept { return fn_ != nullptr; }
  std::uint64_t total() const noexcept { return total_; }

  // Counts `n` more bytes done (clamped to the total). Thread-safe; the callback runs
  // in the calling thread when `done` crossed another step.
  void add(std::uint64_t n) {
    if (fn_ == nullptr || n == 0) return;
    const std::uint64_t now = done_.fetch_add(n, std::memory_order_relaxed) + n;
    if (now / step_ == (now - n) / step_) return;
    report(std::min(now, total_));
  }

  // The work is done: reports done == total (once).
  void finish() {
    if (fn_ != nullptr) report(total_);
  }

 private:
  void report(std::uint64_t done) {
    std::lock_guard lock(mu_);
    if (done < reported_ || (done == reported_ && called_)) return;  // a later count won the race
    reported_ = done;
    called_ = true;
    (*fn_)(done, total_);
  }

  const Progress* fn_;
  const std::uint64_t total_, step_;
  std::atomic<std::uint64_t> done_{0};
  std::mutex mu_;
  std::uint64_t reported_ = 0;
  bool called_ = false;
};

}  // namespace tensorseal::detail::util
