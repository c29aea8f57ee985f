#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace tseal {
namespace {

// "512.0 MiB" / "1.21 GiB": binary units, three significant digits.
std::string size_text(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes < 10 && u > 0 ? "%.2f %s" : "%.1f %s", bytes, kUnits[u]);
  return buf;
}

std::string clock_text(double seconds) {
  const long s = seconds < 0 ? 0 : static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, bool quiet)
    : label_(std::move(label)),
      enabled_(!quiet && ::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { clear(); }

void ProgressBar::clear() {
  if (drawn_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
  drawn_ = false;
  enabled_ = false;
}

tensorseal::Progress ProgressBar::callback() {
  if (!enabled_) return {};
  return [this](std::uint64_t done, std::uint64_t total) { update(done, total); };
}

void ProgressBar::update(std::uint64_t done, std::uint64_t total) {
  if (!enabled_ || total < kMinBytes) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  const double frac = static_cast<double>(done) / static_cast<double>(total);
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * frac);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  const std::string eta =
      rate > 0 && done < total ? " ETA " + clock_text(static_cast<double>(total - done) / rate) : "";
  std::fprintf(stderr, "\r%s [%s] %3d%% %s/%s %s/s%s\033[K", label_.c_str(), bar.c_str(), static_cast<int>(100 * frac),
               size_text(static_cast<double>(done)).c_str(), size_text(static_cast<double>(total)).c_str(),
               size_text(rate).c_str(), eta.c_str());
  std::fflush(stderr);
}

std::shared_ptr<bool> add_quiet(CLI::App* cmd) {
  auto quiet = std::make_shared<bool>(false);
  cmd->add_flag("-q,--quiet", *quiet, "no progress bar (it is drawn only on a terminal anyway)");
  return quiet;
}

}  // namespace tseal
