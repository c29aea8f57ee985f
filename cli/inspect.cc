// tseal inspect FILE [--json | --textconv]: format, every tensor with its per-tensor
// SHA-256, and the content hash (tensorseal/inspect.h). --textconv prints the stable
// text git's diff driver compares (tensorseal::to_textconv), values included.
#include <fmt/format.h>

#include "common.h"
#include "progress.h"

namespace tseal {

Runner add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Show a checkpoint's format, tensors and content hash");
  auto file = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto textconv = std::make_shared<bool>(false);
  cmd->add_option("FILE", *file, "checkpoint file (format detected from its content)")->required();
  auto* json_flag = cmd->add_flag("--json", *as_json, "print one JSON object (schema in docs/cli.md)");
  cmd->add_flag("--textconv", *textconv,
                "print the stable text form for git's diff driver: one line per tensor (path, dtype, shape, "
                "SHA-256) and per non-tensor value, sorted by path")
      ->excludes(json_flag);
  auto threads = add_threads(cmd);
  auto limits = add_limits(cmd);
  auto format = add_input_format(cmd);
  auto quiet = add_quiet(cmd);
  return [=]() {
    using namespace tensorseal;
    InspectOptions o;
    o.threads = *threads;
    o.read.limits = *limits;
    o.read.format = *format;
    o.values = *textconv;
    // git runs --textconv with the user's terminal as stderr: no bar there.
    ProgressBar bar("inspecting", *quiet || *textconv);
    o.progress = bar.callback();
    const InspectReport r = inspect_file(*file, o);
    bar.clear();
    if (*textconv) {
      std::fputs(to_textconv(r).c_str(), stdout);
      return kExitOk;
    }
    if (*as_json) {
      std::printf("%s\n", to_json(r).c_str());
      return kExitOk;
    }
    std::uint64_t total = 0;
    std::size_t unique = 0;
    for (const auto& t : r.tensors)
      if (t.alias_of.empty()) {
        total += t.nbytes;
        ++unique;
      }
    const std::size_t aliases = r.tensors.size() - unique;
    std::printf("file:          %s\nformat:        %s\ntensors:       %zu (%llu bytes)%s\ncontent hash:  %s\n",
                r.file.c_str(), std::string(format_name(r.format)).c_str(), unique,
                static_cast<unsigned long long>(total),
                aliases ? fmt::format(", and {} more path(s) to the same tensors", aliases).c_str() : "",
                r.content_hash.c_str());
    for (const auto& [k, v] : r.metadata) std::printf("metadata:      %s = %s\n", k.c_str(), v.c_str());
    std::printf("\n");
    print_table(r.tensors.size() + 1, [&](std::size_t k) -> std::vector<std::string> {
      if (k == 0) return {"PATH", "DTYPE", "SHAPE", "SHA256"};
      const auto& t = r.tensors[k - 1];
      return {t.path, std::string(name(t.dtype)), shape_text(t.shape),
              !t.alias_of.empty() ? "(same tensor as " + t.alias_of + ")"
              : t.parts.empty()   ? t.sha256
                                  : fmt::format("({} of {} {}: see --json)", t.layout, t.parts.size(),
                                              t.parts.size() == 1 ? "tensor" : "tensors")};
    });
    return kExitOk;
  };
}

}  // namespace tseal
