// tseal verify FILE... [--json] [--expect DIGEST]: full structural validation plus every checksum the
// file carries. Exit 0 all intact, 1 some file corrupt, 2 some file unreadable.
// Dangerous globals are a second verdict, printed as "DANGEROUS  FILE: ..." after the
// file's integrity line; they do not change the exit status (tseal scan gates on them).
// A corrupt file is a finding, printed on stdout ("CORRUPT  FILE: ..."); an unreadable
// one is an error, reported like hash does: "tseal: error: ..." on stderr, and the
// other files are still verified. A training directory (tensorseal/training_dir.h):
// each checkpoint in it, then "OK  DIR/: N checkpoint(s), M other file(s)"; --expect
// is then the directory's digest (tseal hash DIR's last line).
#include "common.h"
#include "progress.h"

namespace tseal {

Runner add_verify(CLI::App& app) {
  auto* cmd = app.add_subcommand("verify", "Validate files completely (structure, every tensor, checksums)");
  auto files = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("FILE", *files, "checkpoint files")->required();
  cmd->add_flag("--json", *as_json, "print one JSON object (schema in docs/cli.md)");
  auto threads = add_threads(cmd);
  auto limits = add_limits(cmd);
  auto format = add_input_format(cmd);
  auto quiet = add_quiet(cmd);
  auto signature = std::make_shared<std::string>();
  auto pub = std::make_shared<std::string>();
  auto* sig_opt =
      cmd->add_option("--signature", *signature, "also check this signature (tseal sign) against the file's content");
  auto* pub_opt = cmd->add_option("--pub", *pub, "the PEM public key that checks --signature");
  auto expect = std::make_shared<std::string>();
  cmd->add_option("--expect", *expect,
                  "the content hash the content must have (sha256:... or xxh3:...); exit 1 when it differs");
  sig_opt->needs(pub_opt);
  pub_opt->needs(sig_opt);
  return [=]() {
    using namespace tensorseal;
    VerifyOptions o;
    o.threads = *threads;
    o.read.limits = *limits;
    o.read.format = *format;
    o.signature = *signature;
    o.public_key = *pub;
    o.expect = *expect;
    if (!signature->empty() && files->size() != 1)
      throw Error(rules::kInvalidArgument, "--signature signs one checkpoint: give exactly one FILE");
    std::vector<VerifyResult> results;
    int status = kExitOk;
    const auto report = [&](const std::string& f, const VerifyResult& r) {
      if (r.status == VerifyStatus::kCorrupt) status = std::max(status, kExitDifferent);
      if (r.status == VerifyStatus::kError) status = kExitError;
      if (*as_json) return;
      // The message names the file already; the line does too.
      std::string msg = r.message;
      if (msg.starts_with(f + ": ")) msg.erase(0, f.size() + 2);
      switch (r.status) {
        case VerifyStatus::kOk:
          if (r.signature)
            std::printf("OK  %s: signed by %s key %s (%s)\n", f.c_str(), r.signature->key_type.c_str(),
                        r.signature->key_id.substr(0, 16).c_str(), r.signature->content_hash.c_str());
          else
            std::printf("OK  %s\n", f.c_str());
          break;
        case VerifyStatus::kCorrupt:
          std::printf("CORRUPT  %s: %s\n", f.c_str(), msg.c_str());
          break;
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
    };
    for (const auto& f : *files) {
      bool training = false;
      try {
        training = is_training_dir(f);
      } catch (const Error& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "tseal: error: %s\n", e.what());
        status = kExitError;
        continue;
      }
      if (!training) {
        {
          ProgressBar bar("verifying " + f, *quiet);
          o.progress = bar.callback();
          results.push_back(verify_file(f, o));
        }
        report(f, results.back());
        continue;
      }
      // A training directory: each checkpoint in it, then --expect against the
      // directory's digest (docs/content-hash.md "Training directories").
      const std::filesystem::path dir(f);
      if (!signature->empty())
        throw Error(rules::kInvalidArgument, "--signature signs one checkpoint, not a training directory");
      VerifyOptions each = o;
      each.expect.clear();
      std::size_t checkpoints = 0, other = 0, failed = 0;
      for (const auto& e : list_training_dir(dir)) {
        if (e.kind == DirEntry::Kind::kFile) {
          ++other;
          continue;
        }
        ++checkpoints;
        const std::string name = (dir / e.path).string();
        {
          ProgressBar bar("verifying " + name, *quiet);
          each.progress = bar.callback();
          results.push_back(verify_file(name, each));
        }
        report(name, results.back());
        failed += results.back().status != VerifyStatus::kOk;
      }
      const std::string shown = f.ends_with("/") ? f : f + "/";
      if (failed != 0) {
        if (!*as_json)
          std::printf("CORRUPT  %s: %zu of %zu checkpoint(s) failed\n", shown.c_str(), failed, checkpoints);
        continue;
      }
      if (!expect->empty()) {
        HashOptions h;
        h.algo = expect->starts_with("xxh3:") ? HashAlgo::kXxh3 : HashAlgo::kSha256;
        h.threads = *threads;
        h.read.limits = *limits;
        const std::string got = hash_training_dir(dir, h).digest;
        if (got != *expect) {
          status = std::max(status, kExitDifferent);
          if (!*as_json)
            std::printf("CORRUPT  %s: digest %s, expected %s\n", shown.c_str(), got.c_str(), expect->c_str());
          continue;
        }
      }
      if (!*as_json) std::printf("OK  %s: %zu checkpoint(s), %zu other file(s)\n", shown.c_str(), checkpoints, other);
    }
    if (*as_json) std::printf("%s\n", to_json(results).c_str());
    return status;
  };
}

}  // namespace tseal
