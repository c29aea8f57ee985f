#include "io/scratch.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/os_error.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::io {
namespace fs = std::filesystem;

namespace {

// An unlinked file in the temp directory: O_TMPFILE, else mkstemp + unlink.
int temp_fd(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string tmpl = (dir / "tseal-scratch.XXXXXX").string();
  fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) fail_os(rules::kIoWrite, "cannot create a scratch file", errno, dir);
  ::unlink(tmpl.c_str());
  return fd;
}

}  // namespace

Scratch scratch(std::uint64_t size, DType dtype) {
  Scratch s;
  if (size < kScratchFileMin) {
    std::vector<std::byte> b(size);
    s.data = b.data();
    s.storage = Storage::owned(std::move(b), dtype);
    return s;
  }
  std::error_code ec;
  fs::path dir = fs::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  const int fd = temp_fd(dir);
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    ::close(fd);
    fail_os(rules::kIoWrite, "cannot size a scratch file", err, dir);
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) fail_os(rules::kIoWrite, "cannot map a scratch file", err, dir);
  auto owner = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, size); });
  s.data = static_cast<std::byte*>(p);
  s.storage = Storage::external(s.data, size, std::move(owner), dtype);
  return s;
}

}  // namespace tensorseal::detail::io
