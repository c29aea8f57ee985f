// tseal — the tensorseal command line.
#include <cstdio>
#include <map>

#include "common.h"

int main(int argc, char** argv) {
  CLI::App app{"tseal: reproducible, safe, provably lossless PyTorch checkpoints"};
  app.set_version_flag("--version", std::string("tseal ") + tensorseal::kVersion);
  app.require_subcommand(1);
  std::vector<tseal::Runner> runners;
  std::vector<CLI::App*> subs;
  for (auto add :
       {tseal::add_inspect, tseal::add_hash, tseal::add_scan, tseal::add_canon, tseal::add_convert, tseal::add_diff,
        tseal::add_explain, tseal::add_verify, tseal::add_manifest, tseal::add_sign, tseal::add_git_setup}) {
    runners.push_back(add(app));
    subs.push_back(app.get_subcommands({}).back());
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tseal: error: %s\n", e.what());
    return tseal::kExitError;
  }
  try {
    for (std::size_t i = 0; i < subs.size(); ++i)
      if (subs[i]->parsed()) return runners[i]();
  } catch (const tensorseal::Error& e) {
    std::fprintf(stderr, "tseal: error: %s\n", e.what());
    return tseal::kExitError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tseal: error: [internal] %s\n", e.what());
    return tseal::kExitError;
  }
  return tseal::kExitError;
}
