// tseal hash FILE...: one line per file, "<content_hash>  <file>", like sha256sum. A
// file that cannot be hashed is reported on stderr ("tseal: error: ...") and the
// others are still hashed; the exit status is then 2.
#include "common.h"
#include "progress.h"

namespace tseal {

Runner add_hash(CLI::App& app) {
  auto* cmd = app.add_subcommand("hash", "Print the content hash of each file (container-independent)");
  auto files = std::make_shared<std::vector<std::string>>();
  auto fast = std::make_shared<bool>(false);
  cmd->add_option("FILE", *files, "checkpoint files")->required();
  cmd->add_flag("--fast", *fast, "XXH3-128 instead of SHA-256 (not for security)");
  auto threads = add_threads(cmd);
  auto limits = add_limits(cmd);
  auto format = add_input_format(cmd);
  auto quiet = add_quiet(cmd);
  return [=]() {
    using namespace tensorseal;
    HashOptions o;
    o.algo = *fast ? HashAlgo::kXxh3 : HashAlgo::kSha256;
    o.threads = *threads;
    o.limits = *limits;
    o.format = *format;
    ProgressBar bar(
        files->size() == 1 ? "hashing " + files->front() : "hashing " + std::to_string(files->size()) + " files",
        *quiet);
    o.progress = bar.callback();
    // hash_files == hash_file of each (zip CRCs verified while hashing), all cores
    // shared across the files.
    const std::vector<std::filesystem::path> paths(files->begin(), files->end());
    const std::vector<FileHash> results = hash_files(paths, o);
    bar.clear();
    int status = kExitOk;
    for (std::size_t i = 0; i < results.size(); ++i) {
      try {
        if (results[i].error) std::rethrow_exception(results[i].error);
        std::printf("%s  %s\n", results[i].digest.c_str(), (*files)[i].c_str());
      } catch (const Error& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "tseal: error: %s\n", e.what());
        std::fflush(stderr);
        status = kExitError;
      }
    }
    return status;
  };
}

}  // namespace tseal
