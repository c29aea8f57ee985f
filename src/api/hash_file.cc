// hash_file: read with the tensor data's checksums left on the storages, so that
// content_hash verifies each record while it hashes its bytes.
#include "api/formats.h"
#include "tensorseal/hash.h"

namespace tensorseal {

std::string hash_file(const std::filesystem::path& path, const HashOptions& options) {
  ReadOptions read_options;
  read_options.limits = options.limits;
  read_options.format = options.format;
  return content_hash(detail::api::read_file_deferred(path, read_options).root, options);
}

}  // namespace tensorseal
