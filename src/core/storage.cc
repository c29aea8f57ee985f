#include "tensorseal/storage.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "tensorseal/error.h"

namespace tensorseal {

struct Storage::Pieced {
  std::vector<std::span<const std::byte>> pieces;
  std::vector<std::shared_ptr<const void>> owners;
  std::function<std::shared_ptr<const Storage>()> join;
  Reader read;  // set for streamed storages only
  std::once_flag once;
  std::shared_ptr<const Storage> whole;  // set by the first joined()
  std::atomic<bool> joined{false};       // whole is set (for readers outside call_once)
};

std::shared_ptr<Storage> Storage::pieced(std::vector<std::span<const std::byte>> pieces,
                                         std::vector<std::shared_ptr<const void>> owners,
                                         std::function<std::shared_ptr<const Storage>()> join, DType dtype) {
  auto s = make();
  for (const auto& p : pieces) s->size_ += p.size();
  s->pieced_ = std::make_shared<Pieced>();
  s->pieced_->pieces = std::move(pieces);
  s->pieced_->owners = std::move(owners);
  s->pieced_->join = std::move(join);
  s->dtype = dtype;
  return s;
}

std::shared_ptr<Storage> Storage::deferred(std::uint64_t size, std::function<std::shared_ptr<const Storage>()> make,
                                           DType dtype) {
  auto s = pieced({}, {}, std::move(make), dtype);
  s->size_ = size;
  return s;
}

std::shared_ptr<Storage> Storage::streamed(std::uint64_t size, Reader read,
                                           std::function<std::shared_ptr<const Storage>()> join, DType dtype) {
  auto s = pieced({}, {}, std::move(join), dtype);
  s->size_ = size;
  s->pieced_->read = std::move(read);
  return s;
}

bool Storage::is_streamed() const noexcept { return pieced_ && pieced_->read; }

void Storage::stream(std::uint64_t offset, std::uint64_t size, const Sink& sink) const {
  if (offset > size_ || size > size_ - offset)
    throw Error(rules::kInternal, fmt::format("stream of {} bytes at {} outside a storage of {}", size, offset, size_));
  if (size == 0) return;
  if (pieced_ && pieced_->read && !pieced_->joined.load(std::memory_order_acquire))
    return pieced_->read(offset, size, sink);
  if (pieced_ && !pieced_->pieces.empty()) {  // the pieces that hold the range, cut to it
    std::uint64_t at = offset, left = size;
    for (const auto& p : pieced_->pieces) {
      if (left == 0) break;
      if (at >= p.size()) {
        at -= p.size();
        continue;
      }
      const std::uint64_t take = std::min<std::uint64_t>(p.size() - at, left);
      sink(p.subspan(at, take));
      at = 0;
      left -= take;
    }
    return;
  }
  sink(bytes().subspan(offset, size));
}

std::span<const std::span<const std::byte>> Storage::pieces() const noexcept {
  if (!pieced_) return {};
  return pieced_->pieces;
}

std::span<const std::byte> Storage::joined() const {
  std::call_once(pieced_->once, [this] {
    auto whole = pieced_->join();
    if (!whole || whole->size() != size_)
      throw Error(rules::kInternal,
                  fmt::format("a pieced storage joined into {} bytes instead of {}", whole ? whole->size() : 0, size_));
    pieced_->whole = std::move(whole);
    pieced_->joined.store(true, std::memory_order_release);
  });
  return pieced_->whole->bytes();
}

std::shared_ptr<Storage> Storage::owned(std::vector<std::byte> bytes, DType dtype) {
  auto holder = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  auto s = make();
  s->data_ = holder->data();
  s->size_ = holder->size();
  s->keepalive_ = std::move(holder);
  s->dtype = dtype;
  return s;
}

std::shared_ptr<Storage> Storage::mapped(std::shared_ptr<const MappedFile> file, std::uint64_t offset,
                                         std::uint64_t size, DType dtype) {
  if (offset > file->size() || size > file->size() - offset)
    throw Error(
        rules::kTruncated,
        fmt::format("storage of {} bytes at {} runs past the end of the file ({} bytes)", size, offset, file->size()),
        file->path(), offset);
  auto s = make();
  s->data_ = file->bytes().data() + offset;
  s->size_ = size;
  s->file_ = file;
  s->file_offset_ = offset;
  s->keepalive_ = file;
  s->dtype = dtype;
  return s;
}

std::shared_ptr<Storage> Storage::external(const std::byte* data, std::uint64_t size, std::shared_ptr<const void> owner,
                                           DType dtype) {
  auto s = make();
  s->data_ = data;
  s->size_ = size;
  s->keepalive_ = std::move(owner);
  s->dtype = dtype;
  return s;
}

std::shared_ptr<Storage> Storage::slice(std::shared_ptr<const Storage> parent, std::uint64_t offset,
                                        std::uint64_t size) {
  if (offset > parent->size() || size > parent->size() - offset)
    throw Error(
        rules::kTruncated,
        fmt::format("range of {} bytes at {} runs past the end of its buffer ({} bytes)", size, offset, parent->size()),
        {}, offset);
  if (parent->is_streamed()) {  // a window of the stream: still streamed, nothing joined
    auto read = [parent, offset](std::uint64_t at, std::uint64_t n, const Sink& sink) {
      parent->stream(offset + at, n, sink);
    };
    auto join = [parent, offset, size]() -> std::shared_ptr<const Storage> {
      return Storage::external(parent->bytes().data() + offset, size, parent, parent->dtype);
    };
    return streamed(size, std::move(read), std::move(join), parent->dtype);
  }
  if (parent->pieced_) {  // a window of the pieces: still pieced, nothing joined
    std::vector<std::span<const std::byte>> cut;
    std::uint64_t at = offset, left = size;
    for (const auto& p : parent->pieced_->pieces) {
      if (left == 0) break;
      if (at >= p.size()) {
        at -= p.size();
        continue;
      }
      const std::uint64_t take = std::min<std::uint64_t>(p.size() - at, left);
      cut.push_back(p.subspan(at, take));
      at = 0;
      left -= take;
    }
    auto join = [parent, offset, size]() -> std::shared_ptr<const Storage> {
      return Storage::external(parent->bytes().data() + offset, size, parent, parent->dtype);
    };
    auto owner = std::shared_ptr<const void>(parent);
    return pieced(std::move(cut), {std::move(owner)}, std::move(join), parent->dtype);
  }
  auto s = make();
  s->data_ = parent->data_ + offset;
  s->size_ = size;
  s->file_ = parent->file_;
  s->file_offset_ = parent->file_offset_ + offset;
  s->dtype = parent->dtype;
  s->keepalive_ = std::move(parent);
  return s;
}

}  // namespace tensorseal
