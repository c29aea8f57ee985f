// include/tensorseal/dcp.h's plugin functions: dcp/plugin.h does the work, given the
// dispatch layer's reader for nested files; bytes_item's weights_only is scan's rule.
#include "api/formats.h"
#include "dcp/plugin.h"
#include "tensorseal/dcp.h"
#include "tensorseal/scan.h"

namespace tensorseal {
namespace fs = std::filesystem;

fs::path dcp_staging_dir(const fs::path& target) { return detail::dcp::staging_dir(target); }

void dcp_prepare(const fs::path& target, bool overwrite) { detail::dcp::prepare(target, overwrite); }

std::vector<DcpRecord> dcp_write_items(const fs::path& target, std::uint32_t rank, std::vector<DcpWriteItem> items,
                                       bool one_file, const WriteOptions& options) {
  return detail::dcp::write_items(target, rank, std::move(items), one_file, options, detail::api::detect_and_read);
}

void dcp_commit(const fs::path& target, const DcpMetadata& planned, std::vector<DcpRecord> records, bool fsync,
                bool content_hash) {
  detail::dcp::commit(target, planned, std::move(records), fsync, content_hash, detail::api::detect_and_read);
}

struct DcpReader::Impl {
  detail::dcp::PluginReader reader;
};

DcpReader::DcpReader(const fs::path& dir, const ReadOptions& options, bool check_manifest)
    : impl_(new Impl{{dir, options, check_manifest, detail::api::detect_and_read}}) {}
DcpReader::~DcpReader() = default;
DcpReader::DcpReader(DcpReader&&) noexcept = default;
DcpReader& DcpReader::operator=(DcpReader&&) noexcept = default;

const DcpMetadata& DcpReader::metadata() const { return impl_->reader.metadata(); }
bool DcpReader::has_manifest() const { return impl_->reader.has_manifest(); }
const std::string& DcpReader::recorded_hash() const { return impl_->reader.recorded_hash(); }

std::shared_ptr<const Tensor> DcpReader::chunk(const std::string& fqn, const std::vector<std::int64_t>& offsets) {
  return impl_->reader.chunk(fqn, offsets);
}

std::string DcpReader::bytes_item(const std::string& fqn, bool weights_only) {
  auto item = impl_->reader.bytes_item(fqn);
  if (weights_only) require_safe(scan(item.read));
  return std::move(item.bytes);
}

}  // namespace tensorseal
