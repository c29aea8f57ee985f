// hash_file: read with the tensor data's checksums left on the storages, so that
// content_hash verifies each record while it hashes its bytes.
#include "api/formats.h"
#include "tensorseal/hash.h"

namespace tensorseal {

std::string hash_file(const std::filesystem::path& path, const HashOptions& options) {
  ReadOptions read_options;
  read_options.limits = options.limits;
  detail::Input in = detail::input_of(MappedFile::open(detail::api::checkpoint_file(path)), read_options);
  in.defer_checksums = true;
  const Checkpoint c = detail::api::read_input(in);
  return content_hash(c.root, options);
}

}  // namespace tensorseal
