// tseal hash FILE...: one line per file, "<content_hash>  <file>", like sha256sum.
#include "common.h"

namespace tseal {

Runner add_hash(CLI::App& app) {
  auto* cmd = app.add_subcommand("hash", "Print the content hash of each file (container-independent)");
  auto files = std::make_shared<std::vector<std::string>>();
  auto fast = std::make_shared<bool>(false);
  auto threads = std::make_shared<unsigned>(0);
  cmd->add_option("FILE", *files, "checkpoint files")->required();
  cmd->add_flag("--fast", *fast, "XXH3-128 instead of SHA-256 (not for security)");
  cmd->add_option("--threads", *threads, "worker threads (0 = all cores; never changes the result)");
  return [files, fast, threads]() {
    using namespace tensorseal;
    int status = kExitOk;
    for (const auto& f : *files) {
      try {
        HashOptions o;
        o.algo = *fast ? HashAlgo::kXxh3 : HashAlgo::kSha256;
        o.threads = *threads;
        // hash_file == content_hash(read_file(f).root): zip CRCs verified while hashing.
        std::printf("%s  %s\n", hash_file(f, o).c_str(), f.c_str());
      } catch (const Error& e) {
        std::fprintf(stderr, "tseal: error: %s\n", e.what());
        status = kExitError;
      }
    }
    return status;
  };
}

}  // namespace tseal
