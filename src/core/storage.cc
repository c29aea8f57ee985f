#include "tensorseal/storage.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensorseal/error.h"

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

void MappedFile::advise_sequential(std::uint64_t offset, std::uint64_t length) const noexcept {
  if (data_ == nullptr || offset >= size_) return;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t start = offset / page * page;
  std::uint64_t end = std::min(size_, offset + length);
  // Not called by the library's own passes (hash, canon, convert): measured on a 1 GiB
  // torch file, `tseal hash --fast` took the same time with and without this advice,
  // warm (page cache: nothing to read ahead) and cold (the kernel's fault-driven
  // read-around already streams a sequential mmap reader).
  auto* p = const_cast<std::byte*>(data_) + start;
  // Two calls: madvise takes one advice value. (MADV_SEQUENTIAL | MADV_WILLNEED is
  // 2 | 3 == 3, i.e. only MADV_WILLNEED.)
  ::madvise(p, end - start, MADV_SEQUENTIAL);
  ::madvise(p, end - start, MADV_WILLNEED);
}

std::shared_ptr<Storage> Storage::owned(std::vector<std::byte> bytes, DType dtype) {
  auto holder = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  auto s = std::shared_ptr<Storage>(new Storage());
  s->data_ = holder->data();
  s->size_ = holder->size();
  s->keepalive_ = std::move(holder);
  s->dtype = dtype;
  return s;
}

std::shared_ptr<Storage> Storage::mapped(std::shared_ptr<const MappedFile> file, std::uint64_t offset,
                                         std::uint64_t size, DType dtype) {
  if (offset > file->size() || size > file->size() - offset)
    throw Error(rules::kTruncated,
                "storage of " + std::to_string(size) + " bytes at " + std::to_string(offset) +
                    " runs past the end of the file (" + std::to_string(file->size()) + " bytes)",
                file->path(), offset);
  auto s = std::shared_ptr<Storage>(new Storage());
  s->data_ = file->bytes().data() + offset;
  s->size_ = size;
  s->file_ = file;
  s->file_offset_ = offset;
  s->keepalive_ = file;
  s->dtype = dtype;
  return s;
}

std::shared_ptr<Storage> Storage::external(const std::byte* data, std::uint64_t size,
                                          std::shared_ptr<const void> owner, DType dtype) {
  auto s = std::shared_ptr<Storage>(new Storage());
  s->data_ = data;
  s->size_ = size;
  s->keepalive_ = std::move(owner);
  s->dtype = dtype;
  return s;
}

std::shared_ptr<Storage> Storage::slice(std::shared_ptr<const Storage> parent, std::uint64_t offset,
                                        std::uint64_t size) {
  if (offset > parent->size() || size > parent->size() - offset)
    throw Error(rules::kTruncated,
                "range of " + std::to_string(size) + " bytes at " + std::to_string(offset) +
                    " runs past the end of its buffer (" + std::to_string(parent->size()) + " bytes)",
                {}, offset);
  auto s = std::shared_ptr<Storage>(new Storage());
  s->data_ = parent->data_ + offset;
  s->size_ = size;
  s->file_ = parent->file_;
  s->file_offset_ = parent->file_offset_ + offset;
  s->dtype = parent->dtype;
  s->byte_order = parent->byte_order;
  s->location = parent->location;
  s->keepalive_ = std::move(parent);
  return s;
}

}  // namespace tensorseal
