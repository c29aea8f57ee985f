// convert_file: read, then write canonically, verifying the input's tensor-data
// checksums on a second thread while the output is written.
//
// Invariant: the output is committed (WriteOptions::before_commit) only after every
// checksum the reader left (io::Input::checks_later) was computed over the bytes and
// held; the writer may have streamed bytes of a record whose check fails, but only
// into the temp file that is then removed.
#include <atomic>
#include <exception>
#include <thread>

#include "api/formats.h"
#include "tensorseal/canon.h"
#include "util/crc32.h"

namespace tensorseal {
namespace {

// Verifies a list of checksums on its own thread. wait() joins it and rethrows the
// first mismatch; destroyed without wait() (the writer failed), it stops early.
class Verifier {
 public:
  explicit Verifier(std::shared_ptr<detail::io::LaterChecks> checks) : checks_(std::move(checks)) {
    if (checks_ && !checks_->items.empty()) thread_ = std::thread([this] { run(); });
  }
  ~Verifier() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  Verifier(const Verifier&) = delete;
  Verifier& operator=(const Verifier&) = delete;

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
    }
  }

  std::shared_ptr<detail::io::LaterChecks> checks_;
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace

bool convert_file(const std::filesystem::path& in, const std::filesystem::path& out, const ConvertOptions& options) {
  auto checks = std::make_shared<detail::io::LaterChecks>();
  const Checkpoint c = detail::api::read_path(in, options.read, [&](detail::io::Input& input) {
    if (options.read.verify_checksums) input.checks_later = checks;
  });
  if (options.accept && !options.accept(c)) return false;
  const Format to = options.to == Format::kUnknown ? canonical_format(c) : options.to;
  WriteOptions o = canonical_write_options(c, to, options.write.threads);
  o.fsync = options.write.fsync;
  o.progress = options.write.progress;
  if (options.write.world_size != 0) o.world_size = options.write.world_size;
  if (options.write.max_shard_size != 0) {
    o.max_shard_size = options.write.max_shard_size;
    o.shard_counts.clear();
  }
  Verifier verifier(checks);
  o.before_commit = [&] {
    verifier.wait();
    if (options.write.before_commit) options.write.before_commit();
  };
  write_file(c.root, out, to, o);
  return true;
}

}  // namespace tensorseal
