#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <system_error>

#include "io/os_error.h"
#include "io/replaced_file.h"
#include "io/sink.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::io {
namespace {

// Small writes are copied into a buffer of kBufferSize; borrowed runs of at least
// kBorrowAtLeast bytes are written from where they lie. Both queue up for one writev
// of at most kMaxRuns pieces (IOV_MAX) or kBatchBytes.
constexpr std::size_t kBufferSize = std::size_t{256} << 10;
constexpr std::size_t kBorrowAtLeast = 256;
constexpr std::size_t kMaxRuns = IOV_MAX;
constexpr std::uint64_t kBatchBytes = std::uint64_t{64} << 20;

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

// Writes all of `runs`, in order: with writev at the file offset, or pwritev from `at`;
// IOV_MAX runs per call, resuming inside a run after a partial write.
void write_runs(int fd, std::optional<std::uint64_t> at, std::span<const std::span<const std::byte>> runs,
                const std::filesystem::path& target) {
  std::size_t next = 0;  // first run not written yet
  std::size_t skip = 0;  // bytes of runs[next] already written
  iovec iov[kMaxRuns];
  while (next < runs.size()) {
    int count = 0;
    std::uint64_t asked = 0;
    for (std::size_t i = next; i < runs.size() && count < static_cast<int>(kMaxRuns); ++i, ++count) {
      const auto r = i == next ? runs[i].subspan(skip) : runs[i];
      iov[count].iov_base = const_cast<std::byte*>(r.data());
      iov[count].iov_len = r.size();
      asked += r.size();
    }
    const ssize_t n = at ? ::pwritev(fd, iov, count, static_cast<off_t>(*at)) : ::writev(fd, iov, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_os(rules::kIoWrite, "write failed", errno, target);
    }
    if (n == 0 && asked > 0) fail_os(rules::kIoWrite, "write made no progress", EIO, target);
    if (at) *at += static_cast<std::uint64_t>(n);
    auto left = static_cast<std::size_t>(n);
    while (next < runs.size() && left >= runs[next].size() - skip) {
      left -= runs[next++].size() - skip;
      skip = 0;
    }
    skip += left;
  }
}

}  // namespace

AtomicFileSink::AtomicFileSink(std::filesystem::path target, bool fsync) : target_(std::move(target)), fsync_(fsync) {
  std::filesystem::path dir = target_.parent_path();
  if (dir.empty()) dir = ".";
  const std::string base = target_.filename().string();
  remove_stale_temps(dir, base);
  std::random_device rd;
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    temp_ = dir / ("." + base + std::string(kTempMarker) + std::to_string(::getpid()) + "." +
                   std::to_string(rd() % 1000000000u));
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) fail_os(rules::kIoOpen, "cannot create temp file in its directory", errno, target_);
  }
  if (fd_ < 0) fail_os(rules::kIoOpen, "cannot create temp file", EEXIST, target_);
  // Keep the mode an existing target had (umask applies to new files as usual).
  struct stat st {};
  if (::stat(target_.c_str(), &st) == 0) ::fchmod(fd_, st.st_mode & 07777);
}

AtomicFileSink::~AtomicFileSink() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFileSink::write_all(const std::byte* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd_, data, std::min<std::size_t>(size, std::size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_os(rules::kIoWrite, "write failed", errno, target_);
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFileSink::flush() {
  write_runs(fd_, std::nullopt, pending_, target_);
  pending_.clear();
  pending_bytes_ = 0;
  buffered_ = 0;
}

void AtomicFileSink::queue(const std::byte* data, std::size_t size) {
  // A run that continues the last one (buffer pieces, contiguous borrowed runs) extends it.
  if (!pending_.empty() && pending_.back().data() + pending_.back().size() == data)
    pending_.back() = {pending_.back().data(), pending_.back().size() + size};
  else
    pending_.emplace_back(data, size);
  pending_bytes_ += size;
  if (pending_.size() >= kMaxRuns || pending_bytes_ >= kBatchBytes) flush();
}

void AtomicFileSink::write(std::span<const std::byte> data) {
  position_ += data.size();
  if (data.empty()) return;
  if (data.size() > kBufferSize - buffered_) {
    flush();
    if (data.size() >= kBufferSize) {  // large runs go straight from the source to the file
      write_all(data.data(), data.size());
      return;
    }
  }
  if (!buffer_) buffer_ = std::make_unique_for_overwrite<std::byte[]>(kBufferSize);
  std::byte* at = buffer_.get() + buffered_;
  std::memcpy(at, data.data(), data.size());
  buffered_ += data.size();
  queue(at, data.size());
}

void AtomicFileSink::write_borrowed(std::span<const std::byte> data) {
  if (data.size() < kBorrowAtLeast) {
    write(data);
    return;
  }
  position_ += data.size();
  queue(data.data(), data.size());
}

void Sink::skip(std::uint64_t n) {
  throw Error(rules::kInternal, "this sink cannot leave a gap of " + std::to_string(n) + " bytes");
}

void AtomicFileSink::write_at(std::uint64_t at, std::span<const std::span<const std::byte>> runs) const {
  write_runs(fd_, at, runs, target_);
}

void AtomicFileSink::commit() {
  flush();
  if (fsync_ && ::fsync(fd_) != 0) fail_os(rules::kIoWrite, "fsync failed", errno, target_);
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail_os(rules::kIoWrite, "close failed", errno, target_);
  }
  fd_ = -1;
  {
    const ReplacedFile replaced(target_);  // released after the rename, off this thread
    if (::rename(temp_.c_str(), target_.c_str()) != 0) fail_os(rules::kIoWrite, "rename failed", errno, target_);
  }
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
