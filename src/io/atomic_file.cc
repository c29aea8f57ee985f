#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <system_error>

#include "io/sink.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::io {
namespace {

constexpr std::size_t kBufferSize = 1 << 20;  // small writes are batched to 1 MiB

[[noreturn]] void fail(const Rule& rule, const std::filesystem::path& p, int err, std::string_view what) {
  throw Error(rule, std::string(what) + ": " + std::strerror(err), p.string());
}

// A killed writer that its parent has not reaped yet still answers kill(pid, 0).
bool is_zombie(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');  // "pid (comm) S ..."
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

// Removes temp files of earlier writers of `target` that no longer run. The temp name
// embeds the writer's pid: ".<name>.tseal-tmp.<pid>.<random>".
void remove_stale_temps(const std::filesystem::path& dir, const std::string& base) {
  std::error_code ec;
  const std::string prefix = "." + base + std::string(AtomicFileSink::kTempMarker);
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (!n.starts_with(prefix)) continue;
    const std::string rest = n.substr(prefix.size());
    const auto dot = rest.find('.');
    if (dot == std::string::npos) continue;
    char* end = nullptr;
    long pid = std::strtol(rest.c_str(), &end, 10);
    if (end != rest.c_str() + dot || pid <= 0) continue;
    if ((::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) && !is_zombie(pid)) continue;  // writer alive
    std::filesystem::remove(e.path(), ec);
  }
}

}  // namespace

AtomicFileSink::AtomicFileSink(std::filesystem::path target, bool fsync)
    : target_(std::move(target)), fsync_(fsync) {
  std::filesystem::path dir = target_.parent_path();
  if (dir.empty()) dir = ".";
  const std::string base = target_.filename().string();
  remove_stale_temps(dir, base);
  std::random_device rd;
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    temp_ = dir / ("." + base + std::string(kTempMarker) + std::to_string(::getpid()) + "." +
                   std::to_string(rd() % 1000000000u));
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) fail(rules::kIoOpen, target_, errno, "cannot create temp file in its directory");
  }
  if (fd_ < 0) fail(rules::kIoOpen, target_, EEXIST, "cannot create temp file");
  // Keep the mode an existing target had (umask applies to new files as usual).
  struct stat st {};
  if (::stat(target_.c_str(), &st) == 0) ::fchmod(fd_, st.st_mode & 07777);
  buffer_.reserve(kBufferSize);
}

AtomicFileSink::~AtomicFileSink() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFileSink::flush_buffer() {
  const char* p = buffer_.data();
  std::size_t left = buffer_.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(rules::kIoWrite, target_, errno, "write failed");
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  buffer_.clear();
}

void AtomicFileSink::write(std::span<const std::byte> data) {
  position_ += data.size();
  if (buffer_.size() + data.size() <= kBufferSize) {
    buffer_.append(reinterpret_cast<const char*>(data.data()), data.size());
    return;
  }
  flush_buffer();
  if (data.size() < kBufferSize) {
    buffer_.append(reinterpret_cast<const char*>(data.data()), data.size());
    return;
  }
  // Large runs go straight from the source (often a memory map) to the file.
  const char* p = reinterpret_cast<const char*>(data.data());
  std::size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, std::min<std::size_t>(left, std::size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(rules::kIoWrite, target_, errno, "write failed");
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void AtomicFileSink::commit() {
  flush_buffer();
  if (fsync_ && ::fsync(fd_) != 0) fail(rules::kIoWrite, target_, errno, "fsync failed");
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail(rules::kIoWrite, target_, errno, "close failed");
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail(rules::kIoWrite, target_, errno, "rename failed");
  committed_ = true;
  if (fsync_) {
    std::filesystem::path dir = target_.parent_path();
    if (dir.empty()) dir = ".";
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
}

void write_file_atomically(const std::filesystem::path& target, std::string_view bytes, bool fsync) {
  AtomicFileSink sink(target, fsync);
  static_cast<Sink&>(sink).write(bytes);
  sink.commit();
}

}  // namespace tensorseal::detail::io
