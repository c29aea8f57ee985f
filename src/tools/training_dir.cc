// Training directories (tensorseal/training_dir.h): classification of the entries,
// their hash and the directory digest (docs/content-hash.md "Training directories"),
// and the canonical copy.
#include "tensorseal/training_dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "api/formats.h"
#include "dcp/format.h"
#include "hash/digest.h"
#include "io/atomic_dir.h"
#include "io/sink.h"
#include "shards/constants.h"
#include "shards/format.h"
#include "shards/index.h"
#include "tensorseal/checkpoint.h"
#include "tensorseal/storage.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

// The directory digest's domain tag (docs/content-hash.md).
constexpr std::string_view kDirTag = "tensorseal.training-dir.v1";
// Extensions under which a plain pickle is a checkpoint. A pickle of protocol 2+ (PROTO
// first) is one under any name; protocol 0/1 pickles start with printable opcodes, as
// text files do (a README starting with "T..."), so only these names make them one.
constexpr std::string_view kPickleExtensions[] = {".pkl", ".pickle", ".pt", ".pth", ".bin", ".ckpt"};

bool is_shard_index_name(const std::string& name) {
  return name.ends_with(std::string(".safetensors") + std::string(detail::shards::kIndexSuffix)) ||
         name.ends_with(std::string(".bin") + std::string(detail::shards::kIndexSuffix));
}

std::string relative_name(const fs::path& p, const fs::path& root) {
  return p.lexically_relative(root).generic_string();
}

// What a file's bytes make it: a checkpoint format, or kUnknown (a plain file).
Format checkpoint_format(const fs::path& p) {
  const auto file = MappedFile::open(p);
  const auto bytes = file->bytes();
  const Format f = detect_format(bytes);
  if (f == Format::kHfShards || f == Format::kDcp) return Format::kUnknown;  // JSON, or a stray .metadata
  if (f != Format::kPickle) return f;
  if (bytes.size() > 1 && static_cast<unsigned char>(bytes[0]) == 0x80) return f;
  const std::string ext = p.extension().string();
  return std::find(std::begin(kPickleExtensions), std::end(kPickleExtensions), ext) != std::end(kPickleExtensions)
             ? f
             : Format::kUnknown;
}

// Regular files and directories below `dir`, sorted; refuses links and special files
// (`strict`) or leaves them out (deciding whether `dir` is a training directory: a
// layout's own reader then reports them in its own terms).
void walk(const fs::path& dir, std::vector<fs::path>& files, std::vector<fs::path>& dirs, bool strict = true,
          bool* skipped = nullptr) {
  std::error_code ec;
  std::vector<fs::path> here;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) here.push_back(it->path());
  if (ec) throw Error(rules::kIoOpen, "cannot list the directory: " + ec.message(), dir.string());
  std::sort(here.begin(), here.end());
  for (const auto& p : here) {
    const auto st = fs::symlink_status(p, ec);
    if (!strict && (fs::is_symlink(st) || (!fs::is_directory(st) && !fs::is_regular_file(st)))) {
      if (skipped) *skipped = true;
      continue;
    }
    if (fs::is_symlink(st))
      throw Error(rules::kDirEntry, "a symlink in a training directory (tensorseal does not follow links)", p.string());
    if (fs::is_directory(st)) {
      dirs.push_back(p);
      walk(p, files, dirs, strict, skipped);
    } else if (fs::is_regular_file(st)) {
      files.push_back(p);
    } else {
      throw Error(rules::kDirEntry, "not a regular file or directory", p.string());
    }
  }
}

// The shard files an index names, relative to the root: relative names inside the
// index's directory, subdirectories allowed as transformers allows them (the reader
// checks the rest, links included, when the layout is read).
std::vector<std::string> shard_members(const fs::path& index, const fs::path& root) {
  const auto file = MappedFile::open(index);
  const auto parsed = detail::shards::parse_index(file->bytes(), index.string());
  std::set<std::string> names;
  for (const auto& [tensor, shard] : parsed.weight_map) names.insert(shard);
  std::vector<std::string> out;
  for (const auto& n : names) {
    const fs::path rel(n);
    bool leaves = n.empty() || rel.is_absolute() || rel.has_root_name() || rel.has_root_directory();
    for (const auto& part : rel) leaves = leaves || part == ".." || part == ".";
    if (leaves)
      throw Error(detail::shards::rules::kShardPath,
                  "shard '" + n + "' is not a relative name inside the index's directory", index.string());
    const fs::path p = (index.parent_path() / rel).lexically_normal();
    out.push_back(relative_name(p, root));
  }
  return out;
}

std::string bytes_digest(const fs::path& p, HashAlgo algo) {
  const auto file = MappedFile::open(p);
  return detail::hash::digest_text(algo, detail::hash::Digest::oneshot(algo, file->bytes()));
}

std::string_view kind_name(DirEntry::Kind k) {
  switch (k) {
    case DirEntry::Kind::kCheckpoint:
      return "checkpoint";
    case DirEntry::Kind::kLayout:
      return "layout";
    case DirEntry::Kind::kFile:
      break;
  }
  return "file";
}

void put_u64(detail::hash::Digest& d, std::uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  d.update({reinterpret_cast<const std::byte*>(b), 8});
}

}  // namespace

namespace {

// The entries of `dir`; `subdirs` (when given) receives every directory below it.
std::vector<DirEntry> classify(const fs::path& dir, bool strict, bool* skipped = nullptr,
                               std::vector<fs::path>* subdirs = nullptr) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(rules::kIoOpen, "not a directory", dir.string());
  std::vector<fs::path> files, dirs;
  walk(dir, files, dirs, strict, skipped);
  if (subdirs) *subdirs = dirs;
  std::vector<DirEntry> out;
  std::set<std::string> taken;  // files a layout takes
  // DCP directories (the top one included) take everything below them.
  std::vector<std::string> dcp_roots;
  dirs.insert(dirs.begin(), dir);
  for (const auto& d : dirs) {
    const std::string rel = d == dir ? "." : relative_name(d, dir);
    if (std::any_of(dcp_roots.begin(), dcp_roots.end(),
                    [&](const std::string& r) { return r == "." || rel.starts_with(r + "/"); }))
      continue;
    if (detail::dcp::find_dcp_metadata(d).empty()) continue;
    dcp_roots.push_back(rel);
    DirEntry e{rel, DirEntry::Kind::kLayout, Format::kDcp, {}, {}};
    for (const auto& f : files) {
      const std::string fr = relative_name(f, dir);
      if (rel == "." || fr.starts_with(rel + "/")) {
        e.members.push_back(fr);
        taken.insert(fr);
      }
    }
    out.push_back(std::move(e));
  }
  for (const auto& f : files) {
    const std::string rel = relative_name(f, dir);
    if (taken.count(rel) || !is_shard_index_name(f.filename().string())) continue;
    DirEntry e{rel, DirEntry::Kind::kLayout, Format::kHfShards, shard_members(f, dir), {}};
    for (const auto& m : e.members) taken.insert(m);
    taken.insert(rel);
    out.push_back(std::move(e));
  }
  for (const auto& f : files) {
    const std::string rel = relative_name(f, dir);
    if (taken.count(rel)) continue;
    const Format fmt = checkpoint_format(f);
    out.push_back(
        DirEntry{rel, fmt == Format::kUnknown ? DirEntry::Kind::kFile : DirEntry::Kind::kCheckpoint, fmt, {}, {}});
  }
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.path < b.path; });
  return out;
}

}  // namespace

std::vector<DirEntry> list_training_dir(const fs::path& dir) { return classify(dir, true); }

bool is_training_dir(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec) || !detail::dcp::find_dcp_metadata(path).empty()) return false;
  bool skipped = false;
  const auto entries = classify(path, false, &skipped);
  std::vector<const DirEntry*> checkpoints;
  for (const auto& e : entries)
    if (e.kind != DirEntry::Kind::kFile) checkpoints.push_back(&e);
  if (checkpoints.empty()) return false;  // read_file's error says what is missing
  // A shard index at the top with links beside it: the shard reader judges the links
  // (shards/shard-path), as for any model directory.
  if (skipped && std::any_of(checkpoints.begin(), checkpoints.end(), [](const DirEntry* e) {
        return e->kind == DirEntry::Kind::kLayout && e->format == Format::kHfShards &&
               e->path.find('/') == std::string::npos;
      }))
    return false;
  if (checkpoints.size() > 1) return true;
  // One checkpoint: a model directory when it is the one read_file reads for the directory.
  const std::string& only = checkpoints.front()->path;
  for (auto name : {detail::shards::kSafetensorsSingle, detail::shards::kTorchSingle})
    if (only == name) return false;
  return !(checkpoints.front()->kind == DirEntry::Kind::kLayout && only.find('/') == std::string::npos);
}

std::string training_dir_digest(const std::vector<DirEntry>& entries, HashAlgo algo) {
  detail::hash::Digest d(algo);
  d.update(kDirTag);
  put_u64(d, entries.size());
  for (const auto& e : entries) {
    const std::string_view kind = kind_name(e.kind);
    for (std::string_view field : {kind, std::string_view(e.path), std::string_view(e.digest)}) {
      put_u64(d, field.size());
      d.update(field);
    }
  }
  return detail::hash::digest_text(algo, d.finish());
}

DirHash hash_training_dir(const fs::path& dir, const HashOptions& options) {
  DirHash out;
  out.dir = dir.string();
  out.entries = list_training_dir(dir);
  std::vector<fs::path> paths;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < out.entries.size(); ++i) {
    auto& e = out.entries[i];
    if (e.kind == DirEntry::Kind::kFile) {
      e.digest = bytes_digest(dir / e.path, options.algo);
      continue;
    }
    paths.push_back(dir / e.path);
    which.push_back(i);
  }
  HashOptions o = options;
  o.read.format = Format::kUnknown;  // each entry's own format
  const auto results = hash_files(paths, o);
  for (std::size_t k = 0; k < results.size(); ++k) {
    if (results[k].error) std::rethrow_exception(results[k].error);
    out.entries[which[k]].digest = results[k].digest;
  }
  out.digest = training_dir_digest(out.entries, options.algo);
  return out;
}

bool canon_training_dir(const fs::path& dir, const fs::path& out, const ConvertOptions& options,
                        std::string* declined) {
  std::vector<fs::path> dirs;
  const auto entries = classify(dir, true, nullptr, &dirs);
  detail::io::AtomicDirectory target(out, options.write.fsync, [](const fs::path& existing) {
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(existing, ec)) || !fs::is_empty(existing, ec))
      throw Error(rules::kDirTarget, "exists and is not an empty directory; refusing to replace it", existing.string());
  });
  const fs::path root = target.file("");
  // The folders, empty ones too, except a DCP layout's (its writer makes it).
  std::vector<std::string> dcp_dirs;
  for (const auto& e : entries)
    if (e.kind == DirEntry::Kind::kLayout && e.format == Format::kDcp) dcp_dirs.push_back(e.path);
  for (const auto& d : dirs) {
    const std::string rel = relative_name(d, dir);
    if (std::none_of(dcp_dirs.begin(), dcp_dirs.end(),
                     [&](const std::string& r) { return rel == r || rel.starts_with(r + "/"); }))
      fs::create_directories(root / rel);
  }
  ConvertOptions o = options;
  o.read.format = Format::kUnknown;
  o.write.format_options.clear();  // each checkpoint keeps its own layout
  for (const auto& e : entries) {
    const fs::path from = dir / e.path, to = root / e.path;
    const bool dcp = e.kind == DirEntry::Kind::kLayout && e.format == Format::kDcp;
    if (e.kind == DirEntry::Kind::kCheckpoint || dcp) {
      if (e.path == ".")  // never: is_training_dir is false for a DCP directory
        throw Error(rules::kDirTarget, "a DCP directory is canonicalised as one checkpoint", dir.string());
      if (!convert_file(from, to, o)) {
        if (declined) *declined = e.path;
        return false;
      }
      continue;
    }
    // A plain file, or a shard set: its index copied, its shards rewritten one by one
    // (each keeps its tensors, so the index stays true).
    if (e.kind == DirEntry::Kind::kLayout) {
      for (const auto& m : e.members)
        if (!convert_file(dir / m, root / m, o)) {
          if (declined) *declined = m;
          return false;
        }
    }
    const auto bytes = MappedFile::open(from);
    detail::io::AtomicFileSink sink(to, options.write.fsync);
    sink.write(bytes->bytes());
    sink.commit();
  }
  target.commit();
  return true;
}

}  // namespace tensorseal
