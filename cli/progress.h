// The progress bar every long command draws on stderr: "LABEL [####    ] 42%
// 1.2/2.9 GiB 850 MiB/s ETA 0:02". Drawn only when stderr is a terminal, --quiet was
// not given and the work is at least kMinBytes; at most ten redraws a second (and
// always the first and the last); the line is erased when the bar is destroyed, so
// the command's own output is never interleaved with it. Nothing at all when piped.
#pragma once

#include <tensorseal/progress.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace tseal {

class ProgressBar {
 public:
  static constexpr std::uint64_t kMinBytes = std::uint64_t{1} << 20;

  ProgressBar(std::string label, bool quiet);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // The callback for the library's options (null when nothing will be drawn, so the
  // library skips the counting); valid while this bar lives.
  tensorseal::Progress callback();
  void update(std::uint64_t done, std::uint64_t total);
  // Erases the bar (before the command prints its result); later updates draw nothing.
  void clear();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_{};
};

// Adds --quiet (-q) to a command: no progress bar.
std::shared_ptr<bool> add_quiet(CLI::App* cmd);

}  // namespace tseal
