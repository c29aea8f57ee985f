// tseal hash FILE...: one line per file, "<content_hash>  <file>", like sha256sum; for a
// training directory (an HF Trainer checkpoint-N/, an accelerate save_state folder),
// one line per checkpoint in it and "<digest>  DIR/" for the whole directory
// (docs/content-hash.md "Training directories"). A file that cannot be hashed is
// reported on stderr ("tseal: error: ...") and the others are still hashed; the exit
// status is then 2.
#include <fmt/format.h>

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
    o.read.limits = *limits;
    o.read.format = *format;
    ProgressBar bar(files->size() == 1 ? "hashing " + files->front() : fmt::format("hashing {} files", files->size()),
                    *quiet);
    o.progress = bar.callback();
    // hash_files == hash_file of each (zip CRCs verified while hashing), all cores
    // shared across the files. A training directory (tensorseal/training_dir.h) gives
    // a line per checkpoint in it, then "<digest>  DIR/" for the whole directory.
    std::vector<std::filesystem::path> paths;
    std::vector<int> training(files->size(), 0);  // 1: a training directory, -1: cannot tell (error)
    std::vector<std::exception_ptr> dir_errors(files->size());
    for (std::size_t i = 0; i < files->size(); ++i) {
      try {
        training[i] = is_training_dir((*files)[i]) ? 1 : 0;
      } catch (const Error&) {
        training[i] = -1;
        dir_errors[i] = std::current_exception();
      }
      if (training[i] == 0) paths.emplace_back((*files)[i]);
    }
    const std::vector<FileHash> results = hash_files(paths, o);
    bar.clear();
    int status = kExitOk;
    for (std::size_t i = 0, k = 0; i < files->size(); ++i) {
      const std::string& f = (*files)[i];
      try {
        if (training[i] < 0) std::rethrow_exception(dir_errors[i]);
        if (training[i] == 0) {
          const FileHash& r = results[k++];
          if (r.error) std::rethrow_exception(r.error);
          std::printf("%s  %s\n", r.digest.c_str(), f.c_str());
          continue;
        }
        const DirHash d = hash_training_dir(f, o);
        const std::filesystem::path dir(f);
        for (const auto& e : d.entries)
          if (e.kind != DirEntry::Kind::kFile) std::printf("%s  %s\n", e.digest.c_str(), (dir / e.path).c_str());
        std::printf("%s  %s\n", d.digest.c_str(), f.ends_with("/") ? f.c_str() : (f + "/").c_str());
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
