// hash_file: read with the tensor data's checksums left on the storages, so that
// content_hash verifies each record while it hashes its bytes. hash_files: the same
// for many files, read in parallel and hashed as one pool of chunk jobs.
#include <algorithm>

#include "api/formats.h"
#include "hash/content_hash.h"
#include "tensorseal/hash.h"
#include "util/parallel.h"

namespace tensorseal {

namespace {
// Files read and hashed together: bounds the mappings and parsed trees held at once.
constexpr std::size_t kBatch = 256;
}  // namespace

std::string hash_file(const std::filesystem::path& path, const HashOptions& options) {
  return content_hash(detail::api::read_file_deferred(path, options.read).root, options);
}

std::vector<FileHash> hash_files(const std::vector<std::filesystem::path>& paths, const HashOptions& options) {
  std::vector<FileHash> out(paths.size());
  const ReadOptions ro = options.read;
  std::uint64_t done_before = 0;
  for (std::size_t first = 0; first < paths.size(); first += kBatch) {
    const std::size_t n = std::min(kBatch, paths.size() - first);
    std::vector<Checkpoint> read(n);
    detail::util::parallel_for(n, options.threads, [&](std::size_t i) {
      try {
        read[i] = detail::api::read_file_deferred(paths[first + i], ro);
      } catch (...) {
        out[first + i].error = std::current_exception();
      }
    });
    std::vector<const Value*> roots;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < n; ++i) {
      if (out[first + i].error) continue;
      roots.push_back(&read[i].root);
      which.push_back(first + i);
    }
    HashOptions o = options;
    std::uint64_t batch_total = 0;
    if (options.progress)
      o.progress = [&](std::uint64_t done, std::uint64_t total) {
        batch_total = total;
        options.progress(done_before + done, done_before + total);
      };
    std::vector<std::exception_ptr> errors;
    std::vector<std::string> digests = detail::hash::content_hash_many(roots, o, errors);
    done_before += batch_total;
    for (std::size_t k = 0; k < which.size(); ++k) {
      out[which[k]].digest = std::move(digests[k]);
      out[which[k]].error = errors[k];
    }
  }
  return out;
}

}  // namespace tensorseal
