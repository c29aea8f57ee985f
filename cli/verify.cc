// tseal verify FILE... [--json]: full structural validation plus every checksum the
// file carries. Exit 0 all intact, 1 some file corrupt, 2 some file unreadable.
// Dangerous globals are a second verdict, printed as "DANGEROUS  FILE: ..." after the
// file's integrity line; they do not change the exit status (tseal scan gates on them).
// A corrupt file is a finding, printed on stdout ("CORRUPT  FILE: ..."); an unreadable
// one is an error, reported like hash does: "tseal: error: ..." on stderr, and the
// other files are still verified.
#include "common.h"

namespace tseal {

Runner add_verify(CLI::App& app) {
  auto* cmd = app.add_subcommand("verify", "Validate files completely (structure, every tensor, checksums)");
  auto files = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("FILE", *files, "checkpoint files")->required();
  cmd->add_flag("--json", *as_json, "print one JSON object (schema in docs/cli.md)");
  auto threads = add_threads(cmd);
  auto limits = add_limits(cmd);
  return [=]() {
    using namespace tensorseal;
    VerifyOptions o;
    o.threads = *threads;
    o.limits = *limits;
    std::vector<VerifyResult> results;
    int status = kExitOk;
    for (const auto& f : *files) {
      results.push_back(verify_file(f, o));
      const auto& r = results.back();
      if (r.status == VerifyStatus::kCorrupt) status = std::max(status, kExitDifferent);
      if (r.status == VerifyStatus::kError) status = kExitError;
      if (*as_json) continue;
      // The message names the file already; the line does too.
      std::string msg = r.message;
      if (msg.starts_with(f + ": ")) msg.erase(0, f.size() + 2);
      switch (r.status) {
        case VerifyStatus::kOk: std::printf("OK  %s\n", f.c_str()); break;
        case VerifyStatus::kCorrupt: std::printf("CORRUPT  %s: %s\n", f.c_str(), msg.c_str()); break;
        case VerifyStatus::kError:
          std::fflush(stdout);
          std::fprintf(stderr, "tseal: error: %s\n", r.message.c_str());
          break;
      }
      for (const auto& w : r.warnings) std::printf("WARNING  %s: %s\n", f.c_str(), w.c_str());
      if (r.globals == Verdict::kDangerous) {
        std::string names;
        for (const auto& g : r.unsafe_globals)
          if (g.verdict == Verdict::kDangerous) names += (names.empty() ? "" : ", ") + g.module + "." + g.name;
        std::printf("DANGEROUS  %s: loading it with pickle would import %s; tseal scan lists every global\n", f.c_str(),
                    names.c_str());
      }
    }
    if (*as_json) std::printf("%s\n", to_json(results).c_str());
    return status;
  };
}

}  // namespace tseal
