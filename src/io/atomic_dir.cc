#include "io/atomic_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <system_error>

#include "io/os_error.h"
#include "io/sink.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::io {
namespace fs = std::filesystem;

void fsync_directory(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_os(rules::kIoWrite, "cannot open directory to fsync", errno, p);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail_os(rules::kIoWrite, "fsync failed", err, p);
}

namespace {

// Removes temp directories of earlier writers of `target` whose process is gone (the
// pid is in the name, as for AtomicFileSink's temp files).
void remove_stale(const fs::path& parent, const std::string& base) {
  std::error_code ec;
  const std::string prefix = "." + base + std::string(AtomicFileSink::kTempMarker);
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string n = e.path().filename().string();
    if (!n.starts_with(prefix) || !e.is_directory(ec)) continue;
    const long pid = std::strtol(n.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // writer alive
    fs::remove_all(e.path(), ec);
  }
}

}  // namespace

AtomicDirectory::AtomicDirectory(fs::path target, bool fsync, std::function<void(const fs::path&)> check_replace)
    : target_(std::move(target)), fsync_(fsync), check_replace_(std::move(check_replace)) {
  if (target_.filename().empty()) target_ = target_.parent_path();  // "out/" names "out"
  fs::path parent = target_.parent_path();
  if (parent.empty()) parent = ".";
  const std::string base = target_.filename().string();
  remove_stale(parent, base);
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    temp_ = parent / ("." + base + std::string(AtomicFileSink::kTempMarker) + std::to_string(::getpid()) + "." +
                      std::to_string(rd() % 1000000000u));
    if (::mkdir(temp_.c_str(), 0755) == 0) return;
    if (errno != EEXIST) fail_os(rules::kIoOpen, "cannot create a temp directory beside it", errno, target_);
  }
  fail_os(rules::kIoOpen, "cannot create a temp directory beside it", EEXIST, target_);
}

AtomicDirectory::~AtomicDirectory() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

void swap_into_place(const fs::path& temp, const fs::path& target, bool fsync,
                     const std::function<void(const fs::path&)>& check_replace) {
  if (fsync) fsync_directory(temp);
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  const auto st = fs::symlink_status(target, ec);
  if (!ec && fs::exists(st)) {
    check_replace(target);
    // Swap in one step, then remove the old tree (now at the temp name).
    if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0)
      fail_os(rules::kIoWrite, "cannot swap the new directory into place", errno, target);
    if (fsync) fsync_directory(parent);
    fs::remove_all(temp, ec);
  } else {
    if (::rename(temp.c_str(), target.c_str()) != 0) fail_os(rules::kIoWrite, "rename failed", errno, target);
  }
  if (fsync) fsync_directory(parent);
}

void AtomicDirectory::commit() {
  swap_into_place(temp_, target_, fsync_, check_replace_);
  committed_ = true;
}

}  // namespace tensorseal::detail::io
