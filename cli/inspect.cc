// tseal inspect FILE [--json]: format, every tensor with its per-tensor SHA-256, and
// the content hash.
#include <nlohmann/json.hpp>

#include "common.h"

namespace tseal {

Runner add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Show a checkpoint's format, tensors and content hash");
  auto file = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("FILE", *file, "checkpoint file (format detected from its content)")->required();
  cmd->add_flag("--json", *as_json, "print one JSON object");
  return [file, as_json]() {
    using namespace tensorseal;
    Checkpoint c = read_file(*file);
    auto tensors = collect_tensors(c.root);
    auto digests = tensor_sha256_all(tensors);
    std::string content = content_hash(c.root);
    if (*as_json) {
      nlohmann::ordered_json j;
      j["file"] = *file;
      j["format"] = format_name(c.format);
      j["content_hash"] = content;
      j["tensors"] = nlohmann::ordered_json::array();
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        const Tensor& t = *tensors[i].tensor;
        j["tensors"].push_back({{"name", tensors[i].path}, {"dtype", name(t.dtype)}, {"shape", t.shape},
                                {"sha256", digests[i]}});
      }
      if (!c.metadata.empty()) {
        nlohmann::ordered_json m = nlohmann::ordered_json::object();
        for (const auto& [k, v] : c.metadata) m[k] = v;
        j["metadata"] = m;
      }
      std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      return kExitOk;
    }
    std::uint64_t total = 0;
    for (const auto& t : tensors) total += t.tensor->nbytes();
    std::printf("file:          %s\nformat:        %s\ntensors:       %zu (%llu bytes)\ncontent hash:  %s\n",
                file->c_str(), std::string(format_name(c.format)).c_str(), tensors.size(),
                static_cast<unsigned long long>(total), content.c_str());
    for (const auto& [k, v] : c.metadata) std::printf("metadata:      %s = %s\n", k.c_str(), v.c_str());
    std::printf("\n");
    std::vector<std::vector<std::string>> rows{{"NAME", "DTYPE", "SHAPE", "SHA256"}};
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = *tensors[i].tensor;
      rows.push_back({tensors[i].path, std::string(name(t.dtype)), shape_text(t.shape), digests[i]});
    }
    print_table(rows);
    return kExitOk;
  };
}

}  // namespace tseal
