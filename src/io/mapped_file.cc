// MappedFile: the one place the library maps files (declared in tensorseal/storage.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensorseal/error.h"
#include "tensorseal/storage.h"

namespace tensorseal {

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(rules::kIoOpen, std::strerror(errno), name);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error(rules::kIoOpen, std::strerror(e), name);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(rules::kIoOpen, "not a regular file", name);
  }
  auto file = std::shared_ptr<MappedFile>(new MappedFile());
  file->path_ = name;
  file->size_ = static_cast<std::uint64_t>(st.st_size);
  if (file->size_ > 0) {
    // Private copy-on-write mapping: the library only reads, but tensors handed to
    // torch/numpy may be written to; such writes stay in memory, never in the file.
    void* p = ::mmap(nullptr, file->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw Error(rules::kIoMap, std::strerror(e), name);
    }
    file->data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace tensorseal
