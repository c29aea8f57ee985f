// StreamedWrite (tensorseal/write.h): a flat .safetensors or canonical .pt file written
// while its tensors are still being made.
//
// begin() starts one writer thread. It first plans the file from the entries with the
// format's own writer code, then writes what put() queues, one pwritev per tensor or
// per run of tensors that meet in the file:
//   - .safetensors (safetensors/layout.h, write_flat's plan): the header and each
//     tensor's data offset; the tensor's bytes go there.
//   - .pt: the canonical archive (torch::Archive, as write_torch_zip drives it) of a
//     stand-in tree of the same names, dtypes and shapes, each tensor over a storage
//     of its own, written into a sink that keeps the bytes and leaves a gap for each
//     storage's data (zip::Writer::skip), up to the last storage record. A storage
//     record's CRC32 appears only in the data descriptor after its data and in the
//     central directory, so the thread writes each tensor's bytes together with the
//     bytes up to the next gap, its CRC32 put into that descriptor.
// finish() checks that the root is one the format writes exactly as planned (the same
// names, in order, each the tensor put, and nothing that changes the writer's choices),
// drains the queue and writes the rest: the safetensors header; the .pt archive's head
// and, with every CRC32 known (Archive::set_crc), its tail (serialization_id, central
// directory). Invariant: a committed file is write_file's bytes exactly.
#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "io/sink.h"
#include "pickle/writer.h"
#include "safetensors/layout.h"
#include "safetensors/structure.h"
#include "tensorseal/error.h"
#include "tensorseal/write.h"
#include "torch/emit.h"
#include "torch/format.h"
#include "torch/plan.h"
#include "util/checked.h"
#include "util/crc32.h"
#include "util/endian.h"
#include "zip/writer.h"

namespace tensorseal {
namespace {

// The writer thread is woken once this many tensors or bytes wait (not per tensor: a
// wake-up costs the converting thread a futex call).
constexpr std::size_t kWakeJobs = 64;
constexpr std::uint64_t kWakeBytes = std::uint64_t{1} << 20;

// (numel * bits + 7) / 8 as Tensor::nbytes, or nullopt for a shape torch refuses
// (a negative dimension, a numel past int64) or bytes past uint64.
std::optional<std::uint64_t> checked_nbytes(DType dtype, std::span<const std::int64_t> shape) {
  if (std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d < 0; })) return std::nullopt;
  const auto numel = detail::util::numel(shape);
  const auto bits = numel ? detail::util::mul(*numel, info(dtype).bits) : std::nullopt;
  const auto rounded = bits ? detail::util::add(*bits, 7) : std::nullopt;
  if (!rounded) return std::nullopt;
  return *rounded / 8;
}

// Records what a writer writes, by file position, leaving the gaps it skips: the bytes
// between gaps as pieces (all in one buffer), and where each gap is.
class LayoutSink final : public detail::io::Sink {
 public:
  std::vector<std::uint64_t> gaps;  // file positions of the non-empty gaps

  void write(std::span<const std::byte> data) override {
    bytes_.append(reinterpret_cast<const char*>(data.data()), data.size());
    position_ += data.size();
  }
  void skip(std::uint64_t n) override {
    if (n == 0) return;
    gaps.push_back(position_);
    position_ += n;
    pieces_.push_back({position_, bytes_.size()});
  }
  void reserve(std::size_t bytes, std::size_t gaps_) {
    bytes_.reserve(bytes);
    gaps.reserve(gaps_);
    pieces_.reserve(gaps_ + 1);
  }
  // Piece i (one more than gaps): after gap i-1 (piece 0: the file's start).
  std::size_t pieces() const noexcept { return pieces_.size(); }
  std::uint64_t at(std::size_t i) const noexcept { return pieces_[i].at; }
  std::span<std::byte> piece(std::size_t i) {
    const std::size_t end = i + 1 < pieces_.size() ? pieces_[i + 1].begin : bytes_.size();
    return {reinterpret_cast<std::byte*>(bytes_.data()) + pieces_[i].begin, end - pieces_[i].begin};
  }

 private:
  struct Piece {
    std::uint64_t at;   // in the file
    std::size_t begin;  // in bytes_
  };
  std::string bytes_;
  std::vector<Piece> pieces_{Piece{0, 0}};
};

// The pickle of a streamed .pt's stand-in tree, with the names, dtypes and shapes it
// was made for. write_torch_zip's pickle is a function of those alone (no option,
// address, time or content enters it), and a training loop saves one structure again
// and again: the pickle of the last save is kept, and a save of the same structure
// skips making the stand-in tree, its storage plan and its pickle (10,000 entries:
// about four fifths of the thread's preparation). Matched by comparing every name,
// dtype and dimension, never by a hash.
struct StandInPickle {
  std::vector<std::string> names;
  std::vector<DType> dtypes;
  std::vector<std::int64_t> dims;  // every shape, one after another
  std::vector<std::size_t> ranks;
  std::string pkl;

  // Kept only up to this size of names and pickle: a dict of millions of entries
  // would hold its copy for the life of the process.
  static constexpr std::size_t kKeepAtMost = std::size_t{16} << 20;

  explicit StandInPickle(std::span<const StreamedWrite::Entry> entries) {
    names.reserve(entries.size());
    dtypes.reserve(entries.size());
    ranks.reserve(entries.size());
    for (const auto& e : entries) {
      names.emplace_back(e.name);
      dtypes.push_back(e.dtype);
      ranks.push_back(e.shape.size());
      dims.insert(dims.end(), e.shape.begin(), e.shape.end());
    }
  }
  bool matches(std::span<const StreamedWrite::Entry> entries) const {
    if (entries.size() != names.size()) return false;
    std::size_t at = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      if (e.name != names[i] || e.dtype != dtypes[i] || e.shape.size() != ranks[i] ||
          !std::equal(e.shape.begin(), e.shape.end(), dims.begin() + static_cast<std::ptrdiff_t>(at)))
        return false;
      at += ranks[i];
    }
    return true;
  }
  std::size_t bytes() const {
    std::size_t n = pkl.size() + dims.size() * sizeof(std::int64_t);
    for (const auto& name : names) n += name.size();
    return n;
  }

  // The last one made (any thread's), or null.
  static std::shared_ptr<const StandInPickle> last() {
    std::lock_guard lock(mutex());
    return slot();
  }
  static void keep(std::shared_ptr<const StandInPickle> made) {
    if (made->bytes() > kKeepAtMost) made.reset();
    std::lock_guard lock(mutex());
    slot() = std::move(made);
  }

 private:
  // Never destroyed: a save may run on another thread while the process exits.
  static std::mutex& mutex() {
    static auto* m = new std::mutex;
    return *m;
  }
  static std::shared_ptr<const StandInPickle>& slot() {
    static auto* s = new std::shared_ptr<const StandInPickle>;
    return *s;
  }
};

}  // namespace

struct StreamedWrite::Impl {
  struct Job {
    std::size_t entry;
    std::span<const std::byte> bytes;  // one run of the entry's bytes, in order
  };

  std::filesystem::path path;
  Format format;
  WriteOptions options;
  std::vector<Entry> entries;
  std::vector<std::shared_ptr<const Tensor>> tensors;  // put(), by entry
  bool broken = false;                                 // put() saw what the writer would do otherwise

  // Made on the thread; read by finish() after the join.
  std::vector<std::uint64_t> offset;  // of each entry's bytes in the file
  std::vector<std::uint64_t> size;    // of each entry's bytes
  std::string head;                   // safetensors: the header, at 0
  // .pt: the archive up to its last storage record, as write_torch_zip writes it for
  // the stand-in tree (the storages' CRC32s 0: the thread puts each into its
  // descriptor, finish() into the central directory), each entry's storage and gap,
  // and each entry's CRC32.
  LayoutSink layout;
  std::unique_ptr<detail::zip::Writer> zip;      // writes into layout
  std::unique_ptr<detail::torch::Archive> arch;  // through zip; finished by finish()
  std::vector<std::size_t> gap_of;               // SIZE_MAX: empty, no gap
  std::vector<std::uint32_t> crc;
  // .pt: the stand-in tree, its storage plan and its pickler. The thread frees them
  // once its writes are done, while finish() writes the tail: freeing 10,000 stand-in
  // tensors takes about a third as long as the tail.
  struct Scratch {
    Value root = Value::dict();
    std::optional<detail::torch::StoragePlan> plan;
    std::optional<detail::pickle::Writer> pickler;
  };
  std::unique_ptr<Scratch> scratch;  // the thread's
  std::optional<detail::io::AtomicFileSink> sink;
  bool failed = false;  // no plan (write_file reports why) or a write failed

  std::mutex mutex;
  std::condition_variable wake;
  std::vector<Job> queue;          // guarded by mutex
  std::size_t queued_tensors = 0;  // guarded by mutex
  std::uint64_t queued_bytes = 0;  // guarded by mutex
  bool closing = false;            // guarded by mutex
  bool written = false;            // guarded by mutex: the thread has written all it will
  std::condition_variable done;    // signals written
  std::atomic<bool> stop{false};   // drop what is queued: the file will not be kept
  std::thread thread;

  void prepare_safetensors() {
    std::vector<detail::safetensors::Item> items;
    items.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i)
      items.push_back(detail::safetensors::item_of(entries[i].name, entries[i].dtype, entries[i].shape, size[i]));
    detail::safetensors::Layout l = detail::safetensors::plan(std::move(items), options);
    head = std::move(l.head);
    offset = std::move(l.data_offset);
  }

  // The pickle write_torch_zip writes for a dict of these names, each a tensor of its
  // entry's dtype and shape over a storage of its own: the last save's when it was of
  // the same structure (StandInPickle), else made from the stand-in tree.
  std::shared_ptr<const StandInPickle> stand_in_pickle() {
    if (auto last = StandInPickle::last(); last && last->matches(entries)) return last;
    auto made = std::make_shared<StandInPickle>(entries);
    scratch = std::make_unique<Scratch>();
    const Value& stand_in = scratch->root;
    auto& items = scratch->root.as_dict().items;
    items.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      auto t = make_contiguous(e.dtype, std::vector<std::int64_t>(e.shape.begin(), e.shape.end()),
                               Storage::external(nullptr, size[i], nullptr, e.dtype));
      items.emplace_back(Value::str(std::string(e.name)), Value(std::shared_ptr<const Tensor>(std::move(t))));
    }
    const detail::torch::StoragePlan& plan = scratch->plan.emplace(stand_in);
    made->pkl = scratch->pickler.emplace(detail::torch::make_hooks(*scratch->plan, false)).finish(stand_in);
    if (plan.used().size() != entries.size()) throw Error(rules::kInternal, "a stand-in tensor without a storage");
    // The plan keys storages by first use, which for a plain dict is dict order:
    // storage record k is entry k.
    for (std::size_t k = 0; k < entries.size(); ++k)
      if (plan.used()[k]->dense_source != items[k].second.as_tensor().get())
        throw Error(rules::kInternal, "a stand-in storage not planned in dict order");
    StandInPickle::keep(made);
    return made;
  }

  // The archive write_torch_zip writes for the stand-in dict (stand_in_pickle), up to
  // its last storage record, each storage's data a gap (never read).
  void prepare_pt() {
    const std::shared_ptr<const StandInPickle> made = stand_in_pickle();
    const std::string& pkl = made->pkl;
    gap_of.assign(entries.size(), SIZE_MAX);
    offset.assign(entries.size(), 0);
    crc.assign(entries.size(), 0);
    // Each storage record: a local header (30 bytes, its name, at most 64 + 20 bytes of
    // extra field) and a descriptor (at most 24 bytes) around its gap.
    const std::size_t longest_name = detail::torch::Archive::storage_name(entries.size()).size();
    layout.reserve(pkl.size() + 512 + entries.size() * (30 + longest_name + 84 + 24), entries.size());
    zip = std::make_unique<detail::zip::Writer>(layout, detail::zip::Profile::kTorch, 64);
    arch = std::make_unique<detail::torch::Archive>(*zip, pkl);
    for (std::size_t e = 0; e < entries.size(); ++e) {
      zip->begin_record_known_crc(detail::torch::Archive::storage_name(e), size[e], 0);
      if (size[e] > 0) {
        zip->skip(size[e]);
        gap_of[e] = layout.gaps.size() - 1;
        offset[e] = layout.gaps.back();
      }
      zip->end_record();
      arch->add_storage();
      // A gap is followed by its record's data descriptor.
      if (size[e] > 0 && layout.piece(layout.pieces() - 1).size() < detail::zip::Writer::kDescriptorCrcOffset + 4)
        throw Error(rules::kInternal, "a storage record without its data descriptor");
    }
  }

  void prepare() {
    size.resize(entries.size());
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto n = checked_nbytes(entries[i].dtype, entries[i].shape);
      const auto sum = n ? detail::util::add(total, *n) : std::nullopt;
      if (!sum) {
        failed = true;
        return;
      }
      total = *sum;
      size[i] = *n;
    }
    if (format == Format::kSafetensors)
      prepare_safetensors();
    else
      prepare_pt();
    sink.emplace(path, options.fsync);
  }

  // The CRC32 of a .pt entry's bytes into the descriptor after its gap.
  void set_descriptor_crc(std::size_t e, std::uint32_t c) {
    std::string le;
    detail::util::append_le<std::uint32_t>(le, c);
    std::memcpy(layout.piece(gap_of[e] + 1).data() + detail::zip::Writer::kDescriptorCrcOffset, le.data(), 4);
  }

  // Writes a batch: each tensor's runs (put() queues a tensor's runs together), for a
  // .pt storage followed by the bytes up to the next gap, with the tensor's CRC32
  // (the bytes after the last gap wait for every CRC: finish). Tensors whose bytes
  // meet in the file (a .pt's records come in dict order) go in one pwritev.
  void write(std::span<const Job> batch, std::vector<std::span<const std::byte>>& iov) {
    constexpr std::size_t kMaxIov = 1000;  // per pwritev of tensors that meet (write_at splits more)
    iov.clear();
    std::uint64_t start = 0, end = 0;
    for (std::size_t i = 0; i < batch.size();) {
      const std::size_t e = batch[i].entry;
      std::size_t j = i;
      std::uint32_t c = 0;
      if (iov.empty() || offset[e] != end || iov.size() >= kMaxIov) {
        if (!iov.empty()) sink->write_at(start, iov);
        iov.clear();
        start = end = offset[e];
      }
      for (; j < batch.size() && batch[j].entry == e; ++j) {
        iov.push_back(batch[j].bytes);
        if (format == Format::kTorchZip) c = detail::util::crc32(c, batch[j].bytes);
      }
      end += size[e];
      if (format == Format::kTorchZip) {
        crc[e] = c;
        set_descriptor_crc(e, c);
        if (gap_of[e] + 2 < layout.pieces()) {
          const auto after = layout.piece(gap_of[e] + 1);
          iov.push_back(after);
          end += after.size();
        } else {
          end = UINT64_MAX;  // nothing meets the last gap's data here
        }
      }
      i = j;
    }
    if (!iov.empty()) sink->write_at(start, iov);
  }

  void run() {
    try {
      prepare();
    } catch (...) {
      failed = true;
    }
    std::vector<Job> batch;
    std::vector<std::span<const std::byte>> iov;
    for (;;) {
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return !queue.empty() || closing; });
        if (queue.empty()) break;
        batch.swap(queue);
        queued_tensors = 0;
        queued_bytes = 0;
      }
      if (!failed && !stop.load(std::memory_order_relaxed)) {
        try {
          write(batch, iov);
        } catch (...) {
          failed = true;
        }
      }
      batch.clear();
    }
    {
      std::lock_guard lock(mutex);
      written = true;
    }
    done.notify_one();
    scratch.reset();
  }

  // Lets the thread finish what is queued (or drop it after stop) and waits until it
  // has: then the file holds every put() tensor's bytes, and the thread touches
  // nothing finish() uses.
  void drain() {
    if (!thread.joinable()) return;
    std::unique_lock lock(mutex);
    closing = true;
    wake.notify_one();
    done.wait(lock, [&] { return written; });
  }

  // The same, and joins the thread.
  void close() {
    if (!thread.joinable()) return;
    drain();
    thread.join();
  }

  void give_up() {
    broken = true;
    stop.store(true, std::memory_order_relaxed);
  }

  // The root is the planned dict: the same keys in the same order, each the tensor put.
  bool same_items(const Value& root) const {
    if (!root.is(Value::Kind::kDict)) return false;
    const auto& items = root.as_dict().items;
    if (items.size() != entries.size()) return false;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& [k, v] = items[i];
      if (!k.is(Value::Kind::kStr) || !v.is(Value::Kind::kTensor) || k.as_str() != entries[i].name ||
          v.as_tensor().get() != tensors[i].get())
        return false;
    }
    return true;
  }

  // write_torch_zip writes this root as it writes the stand-in: a plain dict whose
  // tensors are plain (no flag, attribute, numpy, quantized or lazy form: the same
  // pickle call), each over a storage no other tensor views, written contiguous at
  // offset 0 (the same storage plan).
  bool pt_writes_as_planned(const Value& root) const {
    const Dict& d = root.as_dict();
    if (d.kind != DictKind::kDict || (d.attrs && !d.attrs->items.empty())) return false;
    std::vector<const Storage*> storages;
    storages.reserve(tensors.size());
    for (const auto& t : tensors) {
      if (t->requires_grad || t->is_parameter || t->numpy != NumpyType::kNone || t->attributes || t->quantization ||
          t->lazy || !t->storage || !detail::torch::written_contiguous(*t))
        return false;
      storages.push_back(t->storage.get());
    }
    std::sort(storages.begin(), storages.end());
    return std::adjacent_find(storages.begin(), storages.end()) == storages.end();
  }

  // The .pt archive's head (up to the first gap) and, with every storage's CRC32 now
  // known, its tail: the last storage's descriptor, version, serialization_id and the
  // central directory.
  void commit_pt() {
    for (std::size_t k = 0; k < entries.size(); ++k)
      if (size[k] > 0) arch->set_crc(k, crc[k]);
    arch->finish();
    const std::size_t last = layout.pieces() - 1;
    sink->write_at(
        0, std::span<const std::span<const std::byte>>(std::array{std::span<const std::byte>(layout.piece(0))}));
    if (last > 0)
      sink->write_at(layout.at(last), std::span<const std::span<const std::byte>>(
                                          std::array{std::span<const std::byte>(layout.piece(last))}));
  }
};

StreamedWrite::StreamedWrite(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StreamedWrite::~StreamedWrite() {
  impl_->stop.store(true, std::memory_order_relaxed);
  impl_->close();
}  // the sink, not committed, removes its temp file

std::unique_ptr<StreamedWrite> StreamedWrite::begin(const std::filesystem::path& path, Format format,
                                                    std::vector<Entry> entries, const WriteOptions& options) {
  if (options.progress || (format != Format::kSafetensors && format != Format::kTorchZip)) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->format = format;
  impl->options = options;
  impl->entries = std::move(entries);
  impl->tensors.resize(impl->entries.size());
  try {
    impl->thread = std::thread([p = impl.get()] { p->run(); });
  } catch (const std::system_error&) {
    return nullptr;  // no thread to be had (a process at its limit): write_file writes alone
  }
  return std::unique_ptr<StreamedWrite>(new StreamedWrite(std::move(impl)));
}

void StreamedWrite::put(std::size_t index, std::shared_ptr<const Tensor> tensor) {
  Impl& s = *impl_;
  if (s.broken) return;
  if (index >= s.entries.size() || s.tensors[index] || !tensor) return s.give_up();
  const Tensor& t = *tensor;
  const Entry& e = s.entries[index];
  // What the writers would write differently (or refuse) is left to them.
  if (t.dtype != e.dtype || !std::ranges::equal(t.shape, e.shape) || t.lazy || t.quantization ||
      (t.storage && t.storage->is_streamed()))
    return s.give_up();
  try {
    t.validate();
  } catch (const Error&) {
    return s.give_up();
  }
  // All runs under one lock: the thread sees a tensor whole (a .pt record's CRC32).
  bool notify = false;
  {
    std::lock_guard lock(s.mutex);
    t.for_each_run([&](std::span<const std::byte> run) {
      if (run.empty()) return;
      s.queue.push_back({index, run});
      s.queued_bytes += run.size();
    });
    notify = ++s.queued_tensors >= kWakeJobs || s.queued_bytes >= kWakeBytes;
  }
  if (notify) s.wake.notify_one();
  s.tensors[index] = std::move(tensor);
}

bool StreamedWrite::finish(const Value& root) {
  Impl& s = *impl_;
  const bool planned =
      !s.broken && s.same_items(root) &&
      (s.format == Format::kSafetensors ? detail::safetensors::is_flat(root) : s.pt_writes_as_planned(root));
  if (!planned) s.give_up();
  s.drain();
  if (!planned || s.failed) return false;
  if (s.format == Format::kSafetensors) {
    const std::span<const std::byte> head{reinterpret_cast<const std::byte*>(s.head.data()), s.head.size()};
    s.sink->write_at(0, std::span(&head, 1));
  } else {
    s.commit_pt();
  }
  if (s.options.before_commit) s.options.before_commit();
  s.sink->commit();
  return true;
}

}  // namespace tensorseal
