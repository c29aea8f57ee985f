// `inspect`: the format, the tensors with their SHA-256 and the content hash of a
// checkpoint, and its JSON rendering.
#include "tensorseal/inspect.h"

#include "tensorseal/hash.h"
#include "tools/json.h"

namespace tensorseal {

InspectReport inspect(const Checkpoint& c, const InspectOptions& options) {
  InspectReport r;
  r.file = c.file;
  r.format = c.format;
  r.metadata = c.metadata;
  const auto tensors = collect_tensors(c.root);
  const auto digests = tensor_sha256_all(tensors, options.threads);
  r.tensors.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i].tensor;
    r.tensors.push_back({tensors[i].path, t.dtype, t.shape, t.nbytes(), digests[i]});
  }
  HashOptions h;
  h.threads = options.threads;
  r.content_hash = content_hash(c.root, h);
  return r;
}

InspectReport inspect_file(const std::filesystem::path& path, const InspectOptions& options) {
  ReadOptions o;
  o.limits = options.limits;
  return inspect(read_file(path, o), options);
}

std::string to_json(const InspectReport& r) {
  using tools::ojson;
  ojson j;
  j["file"] = r.file;
  j["format"] = format_name(r.format);
  j["content_hash"] = r.content_hash;
  ojson tensors = ojson::array();
  for (const auto& t : r.tensors)
    tensors.push_back({{"path", t.path}, {"dtype", name(t.dtype)}, {"shape", t.shape}, {"nbytes", t.nbytes},
                       {"sha256", t.sha256}});
  j["tensors"] = std::move(tensors);
  ojson metadata = ojson::object();
  for (const auto& [k, v] : r.metadata) metadata[k] = v;
  j["metadata"] = std::move(metadata);
  return tools::dump(j);
}

}  // namespace tensorseal
