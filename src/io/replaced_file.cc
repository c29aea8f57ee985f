#include "io/replaced_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>
#include <system_error>
#include <thread>

namespace tensorseal::detail::io {
namespace {

// The one deferred close in flight. `mutex` is held while a close runs and across
// fork (pthread_atfork): the prepare handler makes the close no helper has made yet,
// so no child starts with the old file open.
struct Deferred {
  std::mutex mutex;
  int fd = -1;        // guarded by mutex: handed over, not closed yet
  bool busy = false;  // guarded by mutex: a helper owns the slot
};

Deferred& deferred();

void before_fork() {
  Deferred& d = deferred();
  d.mutex.lock();  // released in both processes after the fork
  if (d.fd >= 0) ::close(d.fd);
  d.fd = -1;
}
void after_fork_parent() { deferred().mutex.unlock(); }
void after_fork_child() {
  deferred().busy = false;  // no helper thread in the child
  deferred().mutex.unlock();
}

Deferred& deferred() {
  static Deferred* d = [] {
    auto* made = new Deferred;  // never destroyed: a helper may outlive exit's destructors
    ::pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    return made;
  }();
  return *d;
}

// The helper: closes what the slot holds (nothing when a fork closed it first).
void close_slot() {
  Deferred& d = deferred();
  std::lock_guard lock(d.mutex);
  if (d.fd >= 0) ::close(d.fd);
  d.fd = -1;
  d.busy = false;
}

}  // namespace

ReplacedFile::ReplacedFile(const std::filesystem::path& target) noexcept {
#ifdef O_PATH
  fd_ = ::open(target.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0) return;
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < kDeferAtLeast) {
    ::close(fd_);
    fd_ = -1;
  }
#else
  (void)target;
#endif
}

ReplacedFile::~ReplacedFile() {
  if (fd_ < 0) return;
  Deferred& d = deferred();
  bool handed = false;
  {
    std::unique_lock lock(d.mutex, std::try_to_lock);
    if (lock.owns_lock() && !d.busy) {
      d.busy = true;
      d.fd = fd_;
      handed = true;
    }
  }
  if (!handed) {  // a helper is at work: close here
    ::close(fd_);
    return;
  }
  try {
    std::thread(close_slot).detach();
  } catch (const std::system_error&) {
    close_slot();  // no thread to be had
  }
}

}  // namespace tensorseal::detail::io
