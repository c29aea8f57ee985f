// The torch.distributed.checkpoint storage plugin (docs/formats/dcp.md, "The plugin"):
// staging, each rank's data file, the coordinator's .metadata + manifest and the swap
// into place; and the item-by-item reader. include/tensorseal/dcp.h's functions are
// these, given the dispatch layer's reader for nested files (`read_nested`: BYTE_IO
// items and the files a .metadata points to may be any format) so that nothing here
// calls up a layer.
//
// Crash safety: nothing is written at the target until commit's single
// renameat2(RENAME_EXCHANGE); a rank killed before it leaves the old directory (and a
// stale staging directory, removed by the next prepare), a kill after it the new
// one (and the old tree at the staging name).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/input.h"
#include "tensorseal/dcp.h"

namespace tensorseal::detail::dcp {

class Items;

// dcp_staging_dir, dcp_prepare, dcp_write_items and dcp_commit (include/tensorseal/dcp.h).
std::filesystem::path staging_dir(const std::filesystem::path& target);
void prepare(const std::filesystem::path& target, bool overwrite);
std::vector<DcpRecord> write_items(const std::filesystem::path& target, std::uint32_t rank,
                                   std::vector<DcpWriteItem> items, bool one_file, const WriteOptions& options,
                                   io::ReadNested read_nested);
void commit(const std::filesystem::path& target, const DcpMetadata& planned, std::vector<DcpRecord> records, bool fsync,
            bool content_hash, io::ReadNested read_nested);

// DcpReader's work. Not movable: the .metadata Input points at `options_`.
class PluginReader {
 public:
  PluginReader(const std::filesystem::path& dir, const ReadOptions& options, bool check_manifest,
               io::ReadNested read_nested);
  ~PluginReader();
  PluginReader(const PluginReader&) = delete;
  PluginReader& operator=(const PluginReader&) = delete;

  const DcpMetadata& metadata() const { return md_; }
  bool has_manifest() const;
  const std::string& recorded_hash() const;
  std::shared_ptr<const Tensor> chunk(const std::string& fqn, const std::vector<std::int64_t>& offsets);
  // The bytes of BYTE_IO item `fqn`, checksum-checked, and what reading them met:
  // `read` names the item (file@offset) and lists the globals its pickle references,
  // for the caller to judge (DcpReader::bytes_item's weights_only).
  struct BytesItem {
    std::string bytes;
    Checkpoint read;
  };
  BytesItem bytes_item(const std::string& fqn);

 private:
  ReadOptions options_;
  io::Input meta_;
  DcpMetadata md_;
  Checkpoint sink_;  // facts and globals of the items read
  std::unique_ptr<Items> items_;
  std::map<std::string, std::size_t> entry_;  // fqn -> md_.entries index
};

}  // namespace tensorseal::detail::dcp
