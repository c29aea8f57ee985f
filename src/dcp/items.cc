#include "dcp/items.h"

#include <fmt/format.h>

#include <filesystem>

#include "dcp/constants.h"
#include "dcp/manifest.h"
#include "dcp/transform.h"
#include "io/file_inside.h"
#include "safetensors/format.h"
#include "tensorseal/hash.h"

namespace tensorseal::detail::dcp {
namespace fs = std::filesystem;

namespace {

bool is_zip_record(std::span<const std::byte> b) {
  return b.size() >= 4 && b[0] == std::byte{'P'} && b[1] == std::byte{'K'} && b[2] == std::byte{3} &&
         b[3] == std::byte{4};
}

}  // namespace

std::string where(const StorageInfo& s) { return fmt::format("{}@{}", s.relative_path, s.offset); }

Items::Items(const io::Input& meta, const Metadata& md, Checkpoint& out) : meta_(meta), out_(out) {
  std::error_code ec;
  const fs::path p = meta.directory / dcp::kManifestFile;
  if (!fs::exists(fs::symlink_status(p, ec))) return;
  const fs::path real = io::file_inside(meta.directory, std::string(dcp::kManifestFile), rules::kStoragePath,
                                        rules::kStorageMissing, "manifest", meta.name);
  auto file = MappedFile::open(real);
  const std::string name = real.string();
  Manifest manifest = read_manifest(file->bytes(), name);
  recorded_hash_ = std::move(manifest.content_hash);
  for (auto& r : manifest.items) {
    const std::string key = where(r.storage);
    if (!manifest_.emplace(key, std::move(r)).second)
      throw Error(rules::kManifest, "lists item " + key + " twice", name);
  }
  // One record per storage_data entry, naming the same item.
  if (manifest_.size() != md.storage_order.size())
    throw Error(rules::kManifest,
                fmt::format("lists {} items, .metadata {}", manifest_.size(), md.storage_order.size()), name);
  for (const auto& st : md.storage_order) {
    const auto it = manifest_.find(where(st.storage));
    if (it == manifest_.end() || it->second.storage.length != st.storage.length || it->second.fqn != st.fqn ||
        it->second.offsets != st.offset)
      throw Error(rules::kManifest, "has no record matching item '" + st.fqn + "' at " + where(st.storage), name);
  }
}

io::Input Items::raw_window(const StorageInfo& s) {
  const io::Input& f = file(s.relative_path);
  if (s.offset > f.size() || s.length > f.size() - s.offset)
    throw Error(rules::kStorageBounds,
                fmt::format("item [{}, +{}) ends past the file's {} bytes", s.offset, s.length, f.size()), f.name,
                s.offset);
  io::Input sub = f;
  sub.whole = f.window(s.offset, s.length);
  sub.name = fmt::format("{}@{}", f.name, s.offset);
  return sub;
}

io::Input Items::window(const StorageInfo& s) {
  io::Input sub = raw_window(s);
  if (!s.transforms.empty())
    sub.whole = undo_transforms(sub.bytes(), s.transforms, meta_.options->limits.max_alloc, file(s.relative_path).name,
                                s.offset);
  return sub;
}

const DcpRecord* Items::checked(const StorageInfo& s, const std::string& what) {
  if (manifest_.empty() || skip_checks_) return nullptr;
  const std::string key = where(s);
  const auto it = manifest_.find(key);
  if (it == manifest_.end())
    throw Error(rules::kManifest, "has no record of " + what, (meta_.directory / dcp::kManifestFile).string());
  if (verified_.count(key) == 0) {
    const io::Input sub = raw_window(s);  // the checksum covers the bytes in the file
    if (item_checksum(sub.bytes()) != it->second.checksum)
      throw Error(rules::kChecksum, what + ": its bytes do not match the manifest's checksum " + it->second.checksum,
                  file(s.relative_path).name, s.offset);
    verified_.insert(key);
  }
  return &it->second;
}

void Items::check_digest(const DcpRecord* r, const Value& v, const StorageInfo& s, const std::string& what) {
  if (r == nullptr) return;
  HashOptions o;
  o.algo = HashAlgo::kXxh3;
  o.threads = 1;
  if (content_hash(v, o) != r->digest)
    throw Error(rules::kDigest, what + ": its content does not match the manifest's digest " + r->digest,
                file(s.relative_path).name, s.offset);
}

Value Items::torch_item(const StorageInfo& s, const std::string& what) { return bytes_item(s, what).second; }

std::pair<std::shared_ptr<const Storage>, Value> Items::bytes_item(const StorageInfo& s, const std::string& what) {
  const DcpRecord* r = checked(s, what);
  io::Input sub = window(s);  // once: a compressed item is decompressed here
  if (!is_zip_record(sub.bytes()))
    throw Error(rules::kItemFormat, what + " is not a torch.save archive", file(s.relative_path).name, s.offset);
  Value v = take(meta_.read_nested(sub), where(s));
  check_digest(r, v, s, what);
  return {sub.whole, std::move(v)};
}

std::shared_ptr<const Tensor> Items::chunk(const StorageInfo& s, const std::string& fqn, const std::string& what) {
  const io::Input& f = file(s.relative_path);
  if (s.offset > f.size()) window(s);  // throws the bounds error
  const auto head = f.bytes().subspan(s.offset);
  Value v;
  if (!s.transforms.empty()) {  // compressed: a torch.save zip once undone
    v = torch_item(s, what);
    std::string via;
    for (const auto& t : s.transforms) via += "+" + t;
    formats_.insert("torch_save" + via);
  } else if (is_zip_record(head)) {
    v = torch_item(s, what);
    formats_.insert("torch_save");
  } else if (safetensors::detect_safetensors(head)) {
    formats_.insert("safetensors");
    const std::string key = where(s);
    auto it = blobs_.find(key);
    if (it == blobs_.end()) {
      io::Input sub = f;
      sub.whole = f.window(s.offset, f.size() - s.offset);
      sub.name = fmt::format("{}@{}", f.name, s.offset);
      it = blobs_.emplace(key, take(meta_.read_nested(sub), key)).first;
    }
    const Value* t = it->second.is(Value::Kind::kDict) ? it->second.as_dict().find(fqn) : nullptr;
    if (t == nullptr)
      throw Error(rules::kItemFormat, what + ": the safetensors data holds no tensor '" + fqn + "'", f.name, s.offset);
    v = *t;
  } else {
    throw Error(rules::kItemFormat, what + " is neither a torch.save archive nor safetensors data", f.name, s.offset);
  }
  if (!v.is(Value::Kind::kTensor))
    throw Error(rules::kItemFormat, what + " holds a " + std::string(kind_name(v.kind())) + ", not a tensor", f.name,
                s.offset);
  const auto& t = v.as_tensor();
  if (s.transforms.empty() && !is_zip_record(head) && t->nbytes() != s.length)
    throw Error(rules::kChunkMismatch,
                fmt::format("{} has {} bytes, storage_data says {}", what, t->nbytes(), s.length), f.name, s.offset);
  return t;
}

const io::Input& Items::file(const std::string& rel) {
  auto it = files_.find(rel);
  if (it != files_.end()) return it->second;
  const fs::path p =
      io::file_inside(meta_.directory, rel, rules::kStoragePath, rules::kStorageMissing, "data file", meta_.name);
  io::Input in = io::input_of(MappedFile::open(p), *meta_.options);
  in.nesting = meta_.nesting;
  in.read_nested = meta_.read_nested;
  // Chunk storages are assembled into new ones that would not carry a pending
  // checksum: only a list of later checks survives assembly, else verified here.
  if (meta_.checks_later && meta_.checks_later->where == io::LaterChecks::Where::kListed)
    in.checks_later = meta_.checks_later;
  return files_.emplace(rel, std::move(in)).first->second;
}

// The root of a nested read; its facts and globals are kept, prefixed with `at`.
Value Items::take(Checkpoint c, const std::string& at) {
  for (auto& f : c.facts) out_.facts.push_back({std::move(f.topic), at + ": " + f.where, std::move(f.value)});
  for (auto& g : c.globals) out_.globals.push_back({std::move(g.module), std::move(g.name), at + ": " + g.where});
  return std::move(c.root);
}

}  // namespace tensorseal::detail::dcp
