// tseal scan FILE... [--json]: every global the files' pickles reference (outer and
// nested), classed known-safe / unknown / dangerous. Exit 0 only when everything is
// known-safe, 1 when anything is unknown or dangerous, 2 when a file cannot be read
// (reported as usual; the other files are still scanned). --json takes one FILE.
#include "common.h"

namespace tseal {
namespace {

void render(const tensorseal::ScanReport& r, bool as_json) {
  using namespace tensorseal;
  if (as_json) {
    std::printf("%s\n", to_json(r).c_str());
    return;
  }
  std::size_t n[3] = {0, 0, 0};
  for (const auto& f : r.findings) n[static_cast<int>(f.verdict)]++;
  std::printf("%s: %s (%s): %zu globals: %zu safe, %zu unknown, %zu dangerous\n", r.file.c_str(),
              std::string(verdict_name(r.verdict)).c_str(), std::string(format_name(r.format)).c_str(),
              r.findings.size(), n[0], n[1], n[2]);
  if (!r.findings.empty()) {
    std::vector<std::vector<std::string>> rows{{"VERDICT", "GLOBAL", "COUNT", "FIRST SEEN"}};
    for (const auto& f : r.findings)
      rows.push_back({std::string(verdict_name(f.verdict)), f.module + "." + f.name, std::to_string(f.count), f.where});
    print_table(rows);
  }
}

}  // namespace

Runner add_scan(CLI::App& app) {
  auto* cmd = app.add_subcommand("scan", "List the globals a checkpoint would import, classed safe/unknown/dangerous");
  auto files = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("FILE", *files, "checkpoint files (one with --json)")->required();
  cmd->add_flag("--json", *as_json, "print one JSON object (schema in docs/cli.md)");
  // Scanning reads no tensor data and runs on one thread; --threads is accepted so
  // that every reading command takes the same flags.
  add_threads(cmd);
  auto limits = add_limits(cmd);
  return [=]() {
    using namespace tensorseal;
    if (*as_json && files->size() != 1) throw Error(rules::kInvalidArgument, "--json scans one FILE");
    int status = kExitOk;
    for (const auto& file : *files) {
      ScanReport r;
      try {
        r = scan_file(file, read_options(*limits));
      } catch (const Error& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "tseal: error: %s\n", e.what());
        status = kExitError;
        continue;
      }
      if (r.verdict != Verdict::kSafe && status == kExitOk) status = kExitDifferent;
      render(r, *as_json);
    }
    return status;
  };
}

}  // namespace tseal
