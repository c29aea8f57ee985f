// scan of a directory: every file in it that a loader could open, and every item its
// own index names, read the way the loaders read them (docs/security.md,
// "Directories").
//
//   - Files are walked recursively in byte order of their relative paths: HF .bin
//     shards in subdirectories, DCP items in files of any name, a training folder's
//     checkpoints. Text (.json, .txt, .md) is skipped, and so is a file no loader reads
//     as a checkpoint (detect/unknown-format with nothing unsafe in it).
//   - Symlinks are followed where the loaders follow them and the bytes stay inside:
//     the directory itself, or, for a Hugging Face cache (<repo>/snapshots/<rev>/ links
//     into <repo>/blobs/), the repository's blobs/. A link resolving anywhere else is
//     refused (dir/entry): a loader would read it, and scan cannot vouch for it.
//   - A DCP directory (any folder holding .metadata): each storage_data item sliced out
//     of its file and read as torch.load reads it (dcp.load: BYTE_IO items with
//     weights_only=False, a zip or a raw pickle alike), after its transforms (zstd).
//     Without readable metadata, .distcp files are walked record by record.
//   - The directory read as one checkpoint (when it is one, not a training folder): its
//     structure rules apply, and the globals its reader met in the index or metadata are
//     kept.
// An error in one file does not hide another file's findings: when anything unsafe was
// seen the report is incomplete with the first error; otherwise the first error is the
// directory's.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "dcp/constants.h"
#include "dcp/metadata.h"
#include "dcp/transform.h"
#include "io/file_inside.h"
#include "tensorseal/error.h"
#include "tensorseal/scan.h"
#include "tensorseal/storage.h"
#include "tensorseal/training_dir.h"
#include "tools/scan.h"

namespace tensorseal::detail::tools {
namespace {

namespace fs = std::filesystem;

// The folders a walk of `root` may read through links: the root, and the blobs/ of the
// Hugging Face cache repository that holds it (an ancestor, or the root itself, with
// blobs/ and snapshots/, `root` being it or inside its snapshots/).
std::vector<fs::path> allowed_roots(const fs::path& root) {
  std::vector<fs::path> out{root};
  std::error_code ec;
  for (fs::path a = root; !a.empty(); a = a.parent_path()) {
    if (fs::is_directory(a / "blobs", ec) && fs::is_directory(a / "snapshots", ec) &&
        (a == root || io::path_inside(root, fs::canonical(a / "snapshots", ec)))) {
      out.push_back(fs::canonical(a / "blobs", ec));
      break;
    }
    if (a == a.parent_path()) break;
  }
  return out;
}

class DirScanner {
 public:
  DirScanner(const fs::path& dir, const ReadOptions& options) : options_(options) {
    std::error_code ec;
    root_ = fs::canonical(dir, ec);
    if (ec) throw Error(rules::kDirEntry, "cannot resolve the directory: " + ec.message(), dir.string());
    allowed_ = allowed_roots(root_);
  }

  std::vector<GlobalRef> refs;
  std::vector<std::string> interpretations;
  std::optional<Error> first_error;  // the first file's error with nothing unsafe in that file
  std::optional<std::string> incomplete;

  void walk(const fs::path& dir, unsigned depth) {
    if (depth > options_.limits.max_depth)
      throw Error(rules::kDirEntry, "directories nested deeper than max_depth", dir.string());
    std::error_code ec;
    const fs::path real = fs::canonical(dir, ec);
    if (ec || !visited_.insert(real).second) return;  // a link back to a folder already walked
    std::vector<fs::path> entries;
    fs::directory_iterator it(dir, ec), end;
    if (ec) {
      fail(Error(rules::kDirEntry, "cannot list '" + dir.string() + "': " + ec.message(), root_.string()));
      return;
    }
    for (; !ec && it != end; it.increment(ec)) {
      const auto& e = *it;
      if (++count_ > options_.limits.max_entries)
        throw Error(rules::kTooManyFiles, fmt::format("more than max_entries ({}) files", options_.limits.max_entries),
                    root_.string());
      entries.push_back(e.path());
    }
    if (ec) {
      fail(Error(rules::kDirEntry, "cannot list '" + dir.string() + "': " + ec.message(), root_.string()));
      return;
    }
    std::sort(entries.begin(), entries.end());
    // A DCP folder's items are read first and reported right after its .metadata.
    std::vector<ScanReport> items;
    const fs::path meta = dir / detail::dcp::kMetadataFile;
    if (std::find(entries.begin(), entries.end(), meta) != entries.end() && fs::is_regular_file(meta, ec))
      for (auto& f : dcp_items(dir, items)) items_read_.insert(fs::weakly_canonical(f, ec));
    for (const auto& p : entries) {
      const auto st = fs::symlink_status(p, ec);
      if (fs::is_symlink(st)) {
        const fs::path target = fs::canonical(p, ec);
        bool ok = !ec;
        if (ok) {
          ok = false;
          for (const auto& a : allowed_) ok = ok || io::path_inside(target, a);
        }
        if (!ok) {
          fail(Error(rules::kDirEntry,
                     "'" + p.string() + "' links to " + (ec ? std::string("nothing") : target.string()) +
                         ", outside the directory: a loader would read it, scan does not follow it",
                     root_.string()));
          continue;
        }
      }
      if (fs::is_directory(p, ec)) {
        walk(p, depth + 1);
      } else if (fs::is_regular_file(p, ec)) {
        if (items_read_.count(fs::weakly_canonical(p, ec))) continue;  // scanned item by item via the metadata
        file(p);
        if (p == meta)
          for (const auto& r : items) add(r);
      } else {
        fail(Error(rules::kDirEntry, "'" + p.string() + "' is not a regular file, folder or link", root_.string()));
      }
    }
  }

 private:
  void fail(const Error& e) {
    if (!first_error) first_error = e;
  }

  void add(const ScanReport& one) {
    for (const auto& f : one.findings)
      for (std::size_t i = 0; i < f.count; ++i) refs.push_back(GlobalRef{f.module, f.name, f.where});
    for (const auto& i : one.interpretations)
      if (std::find(interpretations.begin(), interpretations.end(), i) == interpretations.end())
        interpretations.push_back(i);
    if (one.incomplete && !incomplete) incomplete = one.error;
  }

  void file(const fs::path& p) {
    const std::string ext = p.extension().string();
    if (ext == ".json" || ext == ".txt" || ext == ".md") return;  // text the loaders parse as text
    try {
      add(ext == detail::dcp::kDataSuffix ? scan_records(p, options_) : scan_file(p, options_));
    } catch (const Error& e) {
      if (e.rule() == rules::kUnknownFormat.id) return;  // no loader reads it as a checkpoint
      fail(e);
    }
  }

  // The items of the DCP directory `dir` as its .metadata names them, each read as
  // torch.load reads its slice (reports in storage order). Returns the files read this
  // way (their record walk is then not needed); none when the metadata does not parse
  // (its own scan reports it).
  std::set<fs::path> dcp_items(const fs::path& dir, std::vector<ScanReport>& reports) {
    const fs::path meta = dir / detail::dcp::kMetadataFile;
    detail::dcp::Metadata md;
    try {
      const auto m = MappedFile::open(meta);
      md = detail::dcp::parse_metadata(m->bytes(), meta.string(), options_.limits);
    } catch (const Error&) {
      return {};
    }
    std::set<fs::path> files;
    for (const auto& e : md.entries)
      for (const auto& st : e.storage) {
        try {
          const fs::path f = detail::io::file_inside(dir, st.relative_path, rules::kDirEntry, rules::kDirEntry,
                                                     "storage file", meta.string());
          files.insert(f);
          const auto bytes = open(f)->bytes();
          const std::string where = fmt::format("{}@{}", f.string(), st.offset);
          if (st.offset > bytes.size() || st.length > bytes.size() - st.offset)
            throw Error(rules::kDirEntry,
                        fmt::format("item '{}' lies past the end of its file ({} bytes)", e.fqn, bytes.size()),
                        f.string(), st.offset);
          const auto plain = detail::dcp::undo_transforms(bytes.subspan(st.offset, st.length), st.transforms,
                                                          options_.limits.max_alloc, f.string(), st.offset);
          reports.push_back(scan_image(plain->bytes(), f.string(), where, options_));
        } catch (const Error& err) {
          // Bytes no loader reads as a file (a tensor item of DCP's safetensors layout):
          // torch.load fails on them before anything runs.
          if (err.rule() != rules::kUnknownFormat.id) fail(err);
        }
      }
    return files;
  }

  std::shared_ptr<const MappedFile> open(const fs::path& f) {
    auto& m = mapped_[f];
    if (!m) m = MappedFile::open(f);
    return m;
  }

  const ReadOptions& options_;
  fs::path root_;
  std::vector<fs::path> allowed_;
  std::set<fs::path> visited_;
  std::set<fs::path> items_read_;  // files whose items a .metadata named (canonical)
  std::map<fs::path, std::shared_ptr<const MappedFile>> mapped_;
  std::uint64_t count_ = 0;
};

}  // namespace

ScanReport scan_directory(const std::filesystem::path& path, const ReadOptions& options) {
  // The directory as one checkpoint: its format, its structure rules, and the globals
  // its reader met in the index or metadata.
  Format format = Format::kUnknown;
  std::optional<Error> read_error;
  std::vector<GlobalRef> read_globals;
  try {
    if (!is_training_dir(path)) {
      Checkpoint c = read_file(path, options);
      format = c.format;
      read_globals = std::move(c.globals);
    }
  } catch (const Error& e) {
    read_error = e;
  }
  DirScanner s(path, options);
  s.walk(path, 0);
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& g : s.refs) seen.emplace(g.module, g.name);
  for (auto& g : read_globals)
    if (seen.emplace(g.module, g.name).second) s.refs.push_back(std::move(g));
  ScanReport out = summarize(path.string(), format, s.refs);
  out.interpretations = std::move(s.interpretations);
  if (s.incomplete) {
    out.incomplete = true;
    out.error = *s.incomplete;
  }
  for (const auto* err : {s.first_error ? &*s.first_error : nullptr, read_error ? &*read_error : nullptr}) {
    if (!err) continue;
    if (out.verdict == Verdict::kSafe) throw *err;
    if (!out.incomplete) {
      out.incomplete = true;
      out.error = err->what();
    }
  }
  return out;
}

}  // namespace tensorseal::detail::tools
