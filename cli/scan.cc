// tseal scan FILE [--json]: every global the file's pickles reference (outer and
// nested), classed known-safe / unknown / dangerous. Exit 0 only when everything is
// known-safe, 1 when anything is unknown or dangerous, 2 on error.
#include <nlohmann/json.hpp>
#include <tensorseal/scan.h>

#include "common.h"

namespace tseal {

Runner add_scan(CLI::App& app) {
  auto* cmd = app.add_subcommand("scan", "List the globals a checkpoint would import, classed safe/unknown/dangerous");
  auto file = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("FILE", *file, "checkpoint file")->required();
  cmd->add_flag("--json", *as_json, "print one JSON object");
  return [file, as_json]() {
    using namespace tensorseal;
    ScanReport r = scan_file(*file);
    if (*as_json) {
      nlohmann::ordered_json j;
      j["file"] = *file;
      j["format"] = format_name(r.format);
      j["verdict"] = verdict_name(r.verdict);
      j["globals"] = nlohmann::ordered_json::array();
      for (const auto& f : r.findings)
        j["globals"].push_back({{"module", f.module}, {"name", f.name}, {"class", verdict_name(f.verdict)},
                                {"count", f.count}, {"where", f.where}, {"reason", f.reason}});
      std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::size_t n[3] = {0, 0, 0};
      for (const auto& f : r.findings) n[static_cast<int>(f.verdict)]++;
      std::printf("%s: %s (%s): %zu globals: %zu safe, %zu unknown, %zu dangerous\n", file->c_str(),
                  std::string(verdict_name(r.verdict)).c_str(), std::string(format_name(r.format)).c_str(),
                  r.findings.size(), n[0], n[1], n[2]);
      if (!r.findings.empty()) {
        std::vector<std::vector<std::string>> rows{{"CLASS", "GLOBAL", "COUNT", "FIRST SEEN"}};
        for (const auto& f : r.findings)
          rows.push_back({std::string(verdict_name(f.verdict)), f.module + "." + f.name, std::to_string(f.count), f.where});
        print_table(rows);
      }
    }
    return r.verdict == Verdict::kSafe ? kExitOk : kExitDifferent;
  };
}

}  // namespace tseal
