// SafetensorsStream (tensorseal/write.h): a flat .safetensors file written while its
// tensors are still being made.
//
// begin() starts one writer thread, which first plans the file from the entries
// (safetensors/layout.h: the writer's own plan) and makes the temp file, then writes
// what put() queues: jobs of (entry, offset in its bytes, bytes), each batch sorted by
// file offset and written with pwritev, runs that meet in the file joined. finish()
// checks that the root is exactly what was planned and put, drains the queue, writes
// the header at offset 0 and commits. Invariant: a committed file holds the header
// plan() made from the same names, dtypes and shapes write_flat plans from, and each
// tensor's for_each_run bytes at plan()'s offset: write_file's bytes exactly.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "io/sink.h"
#include "safetensors/layout.h"
#include "safetensors/structure.h"
#include "tensorseal/error.h"
#include "tensorseal/write.h"

namespace tensorseal {
namespace {

// The writer thread is woken once this many jobs or bytes wait (not per tensor: a
// wake-up costs the converting thread a futex call).
constexpr std::size_t kWakeJobs = 64;
constexpr std::uint64_t kWakeBytes = std::uint64_t{1} << 20;
constexpr std::size_t kMaxRunsPerWrite = 1024;  // IOV_MAX

// (numel * bits + 7) / 8 as Tensor::nbytes, or nullopt when it overflows or a
// dimension is negative.
std::optional<std::uint64_t> checked_nbytes(DType dtype, std::span<const std::int64_t> shape) {
  std::uint64_t numel = 1;
  for (auto d : shape)
    if (d < 0 || __builtin_mul_overflow(numel, static_cast<std::uint64_t>(d), &numel)) return std::nullopt;
  std::uint64_t bits = 0;
  if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(info(dtype).bits), &bits) || bits > UINT64_MAX - 7)
    return std::nullopt;
  return (bits + 7) / 8;
}

}  // namespace

struct SafetensorsStream::Impl {
  struct Job {
    std::size_t entry;
    std::uint64_t at;  // in the entry's bytes, then (on the thread) in the file
    std::span<const std::byte> bytes;
  };

  std::filesystem::path path;
  WriteOptions options;
  std::vector<Entry> entries;
  std::vector<std::shared_ptr<const Tensor>> tensors;  // put(), by entry
  bool broken = false;                                 // put() saw what write_flat would do otherwise

  // Made on the thread; read by finish() after the join.
  std::string head;
  std::vector<std::uint64_t> offset;  // of each entry's bytes in the file
  std::optional<detail::io::AtomicFileSink> sink;
  bool failed = false;  // no plan (write_file reports why) or a write failed

  std::mutex mutex;
  std::condition_variable wake;
  std::vector<Job> queue;          // guarded by mutex
  std::uint64_t queued_bytes = 0;  // guarded by mutex
  bool closing = false;            // guarded by mutex
  std::atomic<bool> stop{false};   // drop what is queued: the file will not be kept
  std::thread thread;

  void prepare() {
    std::vector<detail::safetensors::Item> items;
    items.reserve(entries.size());
    std::uint64_t total = 0;
    for (const Entry& e : entries) {
      const auto nbytes = checked_nbytes(e.dtype, e.shape);
      if (!nbytes || __builtin_add_overflow(total, *nbytes, &total)) {
        failed = true;
        return;
      }
      items.push_back(detail::safetensors::item_of(e.name, e.dtype, e.shape, *nbytes));
    }
    detail::safetensors::Layout layout = detail::safetensors::plan(std::move(items), options);
    head = std::move(layout.head);
    offset = std::move(layout.data_offset);
    sink.emplace(path, options.fsync);
  }

  void run() {
    try {
      prepare();
    } catch (...) {
      failed = true;
    }
    std::vector<Job> batch;
    std::vector<std::span<const std::byte>> runs;
    for (;;) {
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return !queue.empty() || closing; });
        if (queue.empty()) return;
        batch.swap(queue);
        queued_bytes = 0;
      }
      if (!failed && !stop.load(std::memory_order_relaxed)) {
        try {
          for (Job& j : batch) j.at += offset[j.entry];
          std::sort(batch.begin(), batch.end(), [](const Job& a, const Job& b) { return a.at < b.at; });
          for (std::size_t i = 0; i < batch.size();) {
            const std::uint64_t at = batch[i].at;
            std::uint64_t end = at;
            runs.clear();
            while (i < batch.size() && batch[i].at == end && runs.size() < kMaxRunsPerWrite) {
              runs.push_back(batch[i].bytes);
              end += batch[i].bytes.size();
              ++i;
            }
            sink->write_at(at, runs);
          }
        } catch (...) {
          failed = true;
        }
      }
      batch.clear();
    }
  }

  // Lets the thread finish what is queued (or drop it after stop) and joins it.
  void close() {
    if (!thread.joinable()) return;
    {
      std::lock_guard lock(mutex);
      closing = true;
    }
    wake.notify_one();
    thread.join();
  }

  void enqueue(std::size_t entry, std::uint64_t at, std::span<const std::byte> bytes) {
    bool notify = false;
    {
      std::lock_guard lock(mutex);
      queue.push_back({entry, at, bytes});
      queued_bytes += bytes.size();
      notify = queue.size() >= kWakeJobs || queued_bytes >= kWakeBytes;
    }
    if (notify) wake.notify_one();
  }

  void give_up() {
    broken = true;
    stop.store(true, std::memory_order_relaxed);
  }

  // The root is the planned dict: the same keys in the same order, each the tensor put,
  // and flat as write_safetensors decides it (otherwise it writes the structure form).
  bool matches(const Value& root) const {
    if (!root.is(Value::Kind::kDict)) return false;
    const auto& items = root.as_dict().items;
    if (items.size() != entries.size()) return false;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& [k, v] = items[i];
      if (!k.is(Value::Kind::kStr) || !v.is(Value::Kind::kTensor) || k.as_str() != entries[i].name ||
          v.as_tensor().get() != tensors[i].get())
        return false;
    }
    return detail::safetensors::is_flat(root);
  }
};

SafetensorsStream::SafetensorsStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SafetensorsStream::~SafetensorsStream() {
  impl_->stop.store(true, std::memory_order_relaxed);
  impl_->close();
}  // the sink, not committed, removes its temp file

std::unique_ptr<SafetensorsStream> SafetensorsStream::begin(const std::filesystem::path& path,
                                                            std::vector<Entry> entries, const WriteOptions& options) {
  if (options.progress) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->options = options;
  impl->entries = std::move(entries);
  impl->tensors.resize(impl->entries.size());
  impl->thread = std::thread([p = impl.get()] { p->run(); });
  return std::unique_ptr<SafetensorsStream>(new SafetensorsStream(std::move(impl)));
}

void SafetensorsStream::put(std::size_t index, std::shared_ptr<const Tensor> tensor) {
  Impl& s = *impl_;
  if (s.broken) return;
  if (index >= s.entries.size() || s.tensors[index] || !tensor) return s.give_up();
  const Tensor& t = *tensor;
  const Entry& e = s.entries[index];
  // What write_flat would write differently (or refuse) is left to it.
  if (t.dtype != e.dtype || !std::ranges::equal(t.shape, e.shape) || t.lazy || t.quantization ||
      (t.storage && t.storage->is_streamed()))
    return s.give_up();
  try {
    t.validate();
  } catch (const Error&) {
    return s.give_up();
  }
  std::uint64_t at = 0;
  t.for_each_run([&](std::span<const std::byte> run) {
    if (run.empty()) return;
    s.enqueue(index, at, run);
    at += run.size();
  });
  s.tensors[index] = std::move(tensor);
}

bool SafetensorsStream::finish(const Value& root) {
  Impl& s = *impl_;
  if (s.broken || !s.matches(root)) {
    s.give_up();
    s.close();
    return false;
  }
  s.close();
  if (s.failed) return false;
  const std::span<const std::byte> head{reinterpret_cast<const std::byte*>(s.head.data()), s.head.size()};
  s.sink->write_at(0, std::span(&head, 1));
  if (s.options.before_commit) s.options.before_commit();
  s.sink->commit();
  return true;
}

}  // namespace tensorseal
