// Byte sinks that writers stream into: memory or an atomic file.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/progress.h"

namespace tensorseal::detail::io {

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(std::span<const std::byte> data) = 0;
  void write(std::string_view s) { write({reinterpret_cast<const std::byte*>(s.data()), s.size()}); }
  // The same bytes as write(data), from memory the caller keeps valid and unchanged
  // until its next flush() of this sink (a tensor's storage, which the writer's input
  // holds). A file sink hands such runs to the kernel where they lie (one writev of
  // many runs) instead of copying them into its buffer first.
  virtual void write_borrowed(std::span<const std::byte> data) { write(data); }
  // Ends every borrow of write_borrowed: a writer calls it before memory it lent can go.
  virtual void flush() {}
  // Leaves a gap of `n` bytes that another writer fills (a sink that records a file's
  // layout: src/api/stream.cc); other sinks refuse it (Error api/internal).
  virtual void skip(std::uint64_t n);
  std::uint64_t position() const noexcept { return position_; }

 protected:
  std::uint64_t position_ = 0;
};

class StringSink final : public Sink {
 public:
  void write(std::span<const std::byte> data) override {
    out.append(reinterpret_cast<const char*>(data.data()), data.size());
    position_ += data.size();
  }
  std::string out;
};

// Writes to a temp file beside `target`; commit() makes it appear at `target`
// atomically (fsync, rename, fsync of the directory). Destroyed uncommitted, it
// removes the temp file, so failures leave the target untouched.
class AtomicFileSink final : public Sink {
 public:
  explicit AtomicFileSink(std::filesystem::path target, bool fsync = true);
  ~AtomicFileSink() override;
  AtomicFileSink(const AtomicFileSink&) = delete;
  AtomicFileSink& operator=(const AtomicFileSink&) = delete;

  void write(std::span<const std::byte> data) override;
  void write_borrowed(std::span<const std::byte> data) override;
  void flush() override;
  void commit();
  const std::filesystem::path& temp_path() const noexcept { return temp_; }
  // Writes `runs` one after another from file offset `at` (pwritev), beside the
  // stream of write()/write_borrowed(): for a writer that knows where each part goes.
  // Safe to call from several threads at once for ranges that do not overlap.
  void write_at(std::uint64_t at, std::span<const std::span<const std::byte>> runs) const;

  // Prefix of temp file names; a temp file left by a killed writer can be recognised
  // (and is removed by the next write to the same target whose writer is gone).
  static constexpr std::string_view kTempMarker = ".tseal-tmp.";

 private:
  // What is not written yet, in file order: pieces of buffer_ (copied small writes)
  // and borrowed runs, handed to one writev when the batch is full or at flush().
  void queue(const std::byte* data, std::size_t size);
  void write_all(const std::byte* data, std::size_t size);
  std::filesystem::path target_, temp_;
  int fd_ = -1;
  bool fsync_ = true;
  bool committed_ = false;
  std::unique_ptr<std::byte[]> buffer_;  // kBufferSize bytes, made on the first copied write
  std::size_t buffered_ = 0;             // bytes of buffer_ in use
  std::vector<std::span<const std::byte>> pending_;
  std::uint64_t pending_bytes_ = 0;
};

// One item inside a larger file (a DCP data file holds many torch.save zips): passes
// the bytes on, counting positions from 0, and shows them to `tap` when given (a
// checksum computed as the item is written).
class ItemSink final : public Sink {
 public:
  explicit ItemSink(Sink& to, std::function<void(std::span<const std::byte>)> tap = {})
      : to_(to), tap_(std::move(tap)) {}
  void write(std::span<const std::byte> data) override {
    to_.write(data);
    if (tap_) tap_(data);
    position_ += data.size();
  }
  void write_borrowed(std::span<const std::byte> data) override {
    to_.write_borrowed(data);
    if (tap_) tap_(data);
    position_ += data.size();
  }
  void flush() override { to_.flush(); }

 private:
  Sink& to_;
  std::function<void(std::span<const std::byte>)> tap_;
};

// Passes bytes on in pieces of at most kPiece, counting each on a progress meter
// (a writer hands a whole storage to one write(); the bar moves within it).
class ProgressSink final : public Sink {
 public:
  static constexpr std::size_t kPiece = std::size_t{8} << 20;
  ProgressSink(Sink& to, util::ProgressMeter& meter) : to_(to), meter_(meter) {}
  void write(std::span<const std::byte> data) override { pass(data, false); }
  void write_borrowed(std::span<const std::byte> data) override { pass(data, true); }
  void flush() override { to_.flush(); }

 private:
  void pass(std::span<const std::byte> data, bool borrowed) {
    while (!data.empty()) {
      const auto piece = data.first(std::min(data.size(), kPiece));
      if (borrowed)
        to_.write_borrowed(piece);
      else
        to_.write(piece);
      meter_.add(piece.size());
      position_ += piece.size();
      data = data.subspan(piece.size());
    }
  }
  Sink& to_;
  util::ProgressMeter& meter_;
};

// Writes `bytes` as the whole file `target` through an AtomicFileSink.
void write_file_atomically(const std::filesystem::path& target, std::string_view bytes, bool fsync);

}  // namespace tensorseal::detail::io
