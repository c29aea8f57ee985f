// tensorseal/inspect.h — what a checkpoint holds (`tseal inspect`): its format, every
// tensor with its per-tensor SHA-256, the user metadata and the content hash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/dtype.h"
#include "tensorseal/export.h"
#include "tensorseal/progress.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

struct InspectOptions {
  unsigned threads = 0;  // 0: all cores. The report never depends on this.
  ReadOptions read;      // how inspect_file reads (limits, format, in_memory, ...)
  bool values = false;   // also list the non-tensor leaves (InspectReport::values)
  Progress progress;     // bytes digested of all (tensorseal/progress.h)
};

struct InspectTensor {
  std::string path;  // as collect_tensors names it
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::uint64_t nbytes = 0;  // bytes of the elements (Tensor::nbytes)
  std::string sha256;        // tensor_sha256 of the elements
  // The same tensor object reached again (d["b"] = d["a"], tied weights, a tensor in a
  // list and a dict): the path it was first listed at; empty for the first. torch.load
  // gives the tensor at every path, so every path is listed. (A container reached
  // twice is listed once, at its first path, with the tensors in it.)
  std::string alias_of;
  // What torch.load gives here: python_type_name() ("torch.Tensor",
  // "torch.nn.Parameter", "numpy.ndarray", "numpy.generic").
  std::string type;
  // A quantized tensor's quantizer (its elements are the integers); null otherwise.
  std::shared_ptr<const Quantization> quantization;
  // The tensor object's Python attributes (Tensor::attributes); null when none.
  std::shared_ptr<const Value> attributes;
  // "strided", or for a tensor torch rebuilds from other tensors a sparse layout
  // ("sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc") or "nested"
  // (strided nested tensor): then dtype is its elements', shape its size (nested: the
  // number of components), nbytes the sum of its parts', sha256 empty, and `parts`
  // lists the tensors it is made of, in torch's argument order.
  std::string layout = "strided";
  struct Part {
    std::string role;  // "indices", "values", "crow_indices", ..., "buffer", "sizes", "strides", "offsets"
    DType dtype = DType::kFloat32;
    std::vector<std::int64_t> shape;
    std::uint64_t nbytes = 0;
    std::string sha256;
  };
  std::vector<Part> parts;
};

// A value of the tree that is not a tensor, for the textconv form: a leaf (None, bool,
// number, str, bytes, global), a bare storage, or an opaque object (named by its
// callable; its arguments and state are listed as values of their own).
struct InspectValue {
  std::string path;  // as the tree walk names it (collect_tensors' rules)
  // "3", "'adam'", "torch.float32" (repr); str/bytes over 64 bytes as
  // "str[N] sha256:<hex>"; "storage float32 N bytes sha256:<hex>"; "object mod.name".
  std::string text;
};

struct InspectReport {
  std::string file;  // Checkpoint::file
  Format format = Format::kUnknown;
  std::string content_hash;                                   // content_hash(root), SHA-256
  std::vector<InspectTensor> tensors;                         // in tree order (collect_tensors' paths), aliases too
  std::vector<std::pair<std::string, std::string>> metadata;  // Checkpoint::metadata, in file order
  std::vector<InspectValue> values;                           // with InspectOptions::values: in tree order (shared
                                                              // objects and storages once, leaves at every path)
};

// Inspects a checkpoint already read. Throws tensorseal::Error for broken tensor views.
[[nodiscard]] InspectReport inspect(const Checkpoint& c, const InspectOptions& options = {});
// Reads (as options.read says) and inspects a file.
[[nodiscard]] InspectReport inspect_file(const std::filesystem::path& path, const InspectOptions& options = {});

// The report as JSON (schema: docs/cli.md, "tseal inspect --json"; `values` is not in it).
[[nodiscard]] std::string to_json(const InspectReport& report);

// The report as the stable text git's diff driver shows (`tseal inspect --textconv`,
// docs/cli.md): a "format" and a "content_hash" line, one "metadata KEY = VALUE" line
// per user metadata entry (sorted), then one line per tensor
// ("tensor PATH: DTYPE SHAPE sha256:HEX") and per value ("value PATH: TEXT"), sorted by
// path (stable). Control characters in paths and texts are escaped, so every item is
// exactly one line; the text depends only on the content and the metadata, never on
// the file's bytes, name or dict order.
[[nodiscard]] std::string to_textconv(const InspectReport& report);

}  // namespace tensorseal
TENSORSEAL_API_END
