// tensorseal/inspect.h — what a checkpoint holds (`tseal inspect`): its format, every
// tensor with its per-tensor SHA-256, the user metadata and the content hash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tensorseal/export.h"
#include "tensorseal/checkpoint.h"
#include "tensorseal/dtype.h"
#include "tensorseal/limits.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

struct InspectOptions {
  unsigned threads = 0;  // 0: all cores. The report never depends on this.
  Limits limits;         // for inspect_file's read
};

struct InspectTensor {
  std::string path;  // as collect_tensors names it
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::uint64_t nbytes = 0;  // bytes of the elements (Tensor::nbytes)
  std::string sha256;        // tensor_sha256 of the elements
};

struct InspectReport {
  std::string file;  // Checkpoint::file
  Format format = Format::kUnknown;
  std::string content_hash;            // content_hash(root), SHA-256
  std::vector<InspectTensor> tensors;  // in collect_tensors order
  std::vector<std::pair<std::string, std::string>> metadata;  // Checkpoint::metadata, in file order
};

// Inspects a checkpoint already read. Throws tensorseal::Error for broken tensor views.
[[nodiscard]] InspectReport inspect(const Checkpoint& c, const InspectOptions& options = {});
// Reads (with options.limits) and inspects a file.
[[nodiscard]] InspectReport inspect_file(const std::filesystem::path& path, const InspectOptions& options = {});

// The report as JSON (schema: docs/cli.md, "tseal inspect --json").
[[nodiscard]] std::string to_json(const InspectReport& report);

}  // namespace tensorseal
TENSORSEAL_API_END
