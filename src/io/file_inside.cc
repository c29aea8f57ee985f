#include "io/file_inside.h"

#include <system_error>

namespace tensorseal::detail::io {
namespace fs = std::filesystem;

bool path_inside(const fs::path& p, const fs::path& root) {
  auto r = root.begin();
  auto q = p.begin();
  for (; r != root.end(); ++r, ++q)
    if (q == p.end() || *q != *r) return false;
  return true;
}

namespace {

// A Hugging Face cache snapshot (<repo>/snapshots/<revision>/, huggingface_hub's
// layout) holds symlinks into the repository's content-addressed <repo>/blobs/: that
// folder counts as inside. Empty when `real_dir` is not a snapshot.
fs::path hf_cache_blobs(const fs::path& real_dir) {
  if (real_dir.parent_path().filename() != "snapshots") return {};
  return real_dir.parent_path().parent_path() / "blobs";
}

}  // namespace

fs::path file_inside(const fs::path& dir, const std::string& file, const Rule& escapes, const Rule& missing,
                     std::string_view noun, const std::string& index) {
  const std::string what = std::string(noun) + " '" + file + "'";
  const fs::path rel(file);
  if (file.empty() || rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    throw Error(escapes, what + " is not a relative file name", index);
  for (const auto& part : rel)
    if (part == ".." || part == ".")
      throw Error(escapes, what + " leaves the directory ('" + part.string() + "')", index);
  const fs::path p = dir / rel;
  std::error_code ec;
  const auto st = fs::symlink_status(p, ec);
  if (ec || !fs::exists(st)) throw Error(missing, what + " is listed in the index but absent", index);
  const fs::path real = fs::canonical(p, ec);
  if (ec) throw Error(missing, what + " cannot be resolved: " + ec.message(), index);
  const fs::path real_dir = fs::canonical(dir, ec);
  const fs::path blobs = ec ? fs::path() : hf_cache_blobs(real_dir);
  if (ec || !(path_inside(real, real_dir) || (!blobs.empty() && path_inside(real, blobs))))
    throw Error(escapes, what + " resolves to " + real.string() + ", outside the directory", index);
  if (!fs::is_regular_file(real, ec)) throw Error(missing, what + " is not a regular file", index);
  return p;
}

}  // namespace tensorseal::detail::io
