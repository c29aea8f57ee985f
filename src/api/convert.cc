// convert_file: read, then write canonically, verifying the input's tensor-data
// checksums and mapping its pages on a second thread while the output is written.
//
// Invariant: the output is committed (WriteOptions::before_commit) only after every
// checksum the reader left (io::Input::checks_later) was computed over the bytes and
// held; the writer may have streamed bytes of a record whose check fails, but only
// into the temp file that is then removed.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <unordered_set>
#include <vector>

#include "api/formats.h"
#include "core/walk.h"
#include "io/prefault.h"
#include "tensorseal/canon.h"
#include "util/crc32.h"

namespace tensorseal {
namespace {

// The mapped files whose windows `root`'s tensors and storages are, each once, in
// tree order; none when together they exceed a quarter of the machine's memory (mapped
// that far ahead of the writer, the first pages would be evicted before it reads them,
// and a file on disk would be read twice).
std::vector<std::span<const std::byte>> mapped_files(const Value& root) {
  struct Files final : detail::core::Visitor {
    std::vector<std::span<const std::byte>> out;
    std::unordered_set<const MappedFile*> seen;
    void add(const Storage* s) {
      if (s != nullptr && s->file() != nullptr && seen.insert(s->file().get()).second)
        out.push_back(s->file()->bytes());
    }
    bool enter(const Value& v, const std::string&) override {
      if (v.is(Value::Kind::kTensor)) {
        add(v.as_tensor()->storage.get());
        if (const auto& lazy = v.as_tensor()->lazy) add(lazy->raw.get());
      }
      if (v.is(Value::Kind::kStorage)) add(v.as_storage().get());
      return true;
    }
  } files;
  detail::core::walk(root, files, detail::core::Reach::kEverything);
  std::uint64_t total = 0;
  for (const auto& f : files.out) total += f.size();
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0 || total > static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 4)
    return {};
  return std::move(files.out);
}

// Reads ahead of the writer on its own thread: verifies the checksums a reader left
// (each over bytes the writer is about to copy), then maps the pages of the input's
// files (io::prefault), so that the writer does neither. wait() joins it and rethrows
// the first mismatch; destroyed without wait() (the writer failed), it stops early.
class ReadAhead {
 public:
  ReadAhead(std::shared_ptr<detail::io::LaterChecks> checks, std::vector<std::span<const std::byte>> files)
      : checks_(std::move(checks)), files_(std::move(files)) {
    if (!checks_->items.empty() || !files_.empty()) thread_ = std::thread([this] { run(); });
  }
  ~ReadAhead() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  void wait() {
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run() {
    try {
      for (const auto& c : checks_->items) {
        if (stop_) return;
        c->check(detail::util::crc32(0, c->covered));
      }
    } catch (...) {
      error_ = std::current_exception();
      return;
    }
    for (const auto& f : files_) detail::io::prefault(f, stop_);
  }

  std::shared_ptr<detail::io::LaterChecks> checks_;
  std::vector<std::span<const std::byte>> files_;
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace

void write_canonical(const Checkpoint& c, const std::filesystem::path& out, const ConvertOptions& options) {
  const Format to = options.to == Format::kUnknown ? canonical_format(c) : options.to;
  WriteOptions o = canonical_write_options(c, to, options.write.threads);
  o.fsync = options.write.fsync;
  o.progress = options.write.progress;
  o.before_commit = options.write.before_commit;
  // The caller's format options win over the kept layout, and drop what they replace
  // (FormatParam::replaces: a new shard size, the input's split).
  for (const auto& given : options.write.format_options) {
    const FormatParam* p = format_param(to, given.first);
    std::erase_if(o.format_options, [&](const auto& kept) {
      return kept.first == given.first || (p != nullptr && kept.first == p->replaces);
    });
    o.format_options.push_back(given);
  }
  write_file(c.root, out, to, o);
}

bool convert_file(const std::filesystem::path& in, const std::filesystem::path& out, const ConvertOptions& options) {
  auto checks = std::make_shared<detail::io::LaterChecks>(detail::io::LaterChecks::Where::kListed);
  const Checkpoint c = detail::api::read_path(in, options.read, [&](detail::io::Input& input) {
    if (options.read.verify_checksums) input.checks_later = checks;
  });
  if (options.accept && !options.accept(c)) return false;
  ReadAhead ahead(checks, mapped_files(c.root));
  ConvertOptions o = options;
  o.write.before_commit = [&] {
    ahead.wait();
    if (options.write.before_commit) options.write.before_commit();
  };
  write_canonical(c, out, o);
  return true;
}

}  // namespace tensorseal
