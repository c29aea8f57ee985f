// The items of one DCP directory, read one at a time: each data file mapped once, each
// safetensors blob parsed once, every item bounds-checked and, when the directory
// carries a tensorseal manifest, its bytes checked against the recorded checksum and
// its value against the recorded content digest before it is handed out.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "dcp/metadata.h"
#include "io/input.h"

namespace tensorseal::detail::dcp {

// "<file>@<offset>", how items are named in facts.
std::string where(const StorageInfo& s);

class Items {
 public:
  // `meta` is the .metadata Input (on disk, with read_nested); facts and globals of
  // every item read land in `out`. Reads the manifest beside .metadata when present and
  // checks it lists exactly the items of `md` (dcp/manifest).
  Items(const io::Input& meta, const Metadata& md, Checkpoint& out);

  // A BYTE_IO item or a torch_save chunk: a torch.save zip, read.
  Value torch_item(const StorageInfo& s, const std::string& what);
  // The bytes of a BYTE_IO item (checksum-checked, decompressed if stored so; they
  // live as long as the returned Storage) and its value.
  std::pair<std::shared_ptr<const Storage>, Value> bytes_item(const StorageInfo& s, const std::string& what);
  // The chunk of tensor `fqn` stored at `s`: a torch.save zip, or (safetensors
  // serialization) the tensor `fqn` of the safetensors file starting at s.offset.
  std::shared_ptr<const Tensor> chunk(const StorageInfo& s, const std::string& fqn, const std::string& what);
  const io::Input& file(const std::string& rel);

  bool has_manifest() const { return !manifest_.empty(); }
  // Reads items without checking them against the manifest (a reader that only
  // gathers bytes another reader checks).
  void skip_manifest_checks() { skip_checks_ = true; }
  // The manifest's content_hash ("" without a manifest or when it records none).
  const std::string& recorded_hash() const { return recorded_hash_; }
  const std::set<std::string>& formats() const { return formats_; }

 private:
  // The item's bytes as in the file (bounds-checked), and with its transforms undone.
  io::Input raw_window(const StorageInfo& s);
  io::Input window(const StorageInfo& s);
  // The manifest's record of item `s` (null without a manifest); checks its checksum once.
  const DcpRecord* checked(const StorageInfo& s, const std::string& what);
  void check_digest(const DcpRecord* r, const Value& v, const StorageInfo& s, const std::string& what);
  Value take(Checkpoint c, const std::string& at);

  const io::Input& meta_;
  Checkpoint& out_;
  std::map<std::string, io::Input> files_;
  std::map<std::string, Value> blobs_;
  std::set<std::string> formats_;
  std::map<std::string, DcpRecord> manifest_;  // by where()
  std::string recorded_hash_;
  bool skip_checks_ = false;
  std::set<std::string> verified_;  // items whose checksum held
};

}  // namespace tensorseal::detail::dcp
