// tseal manifest CKPT [-o FILE] [--name NAME]: the in-toto statement over CKPT's
// content (tensorseal::manifest_statement) on stdout or into FILE (atomically).
// tseal sign CKPT --key KEY -o SIG: that statement signed with the PEM private key
// KEY, as a Sigstore bundle (tensorseal::sign_statement). Check it with
// `tseal verify CKPT --signature SIG --pub PUB`. Both read CKPT with every checksum on.
#include "common.h"
#include "progress.h"

namespace tseal {
namespace {

tensorseal::InspectReport inspected(const std::string& file, unsigned threads, const tensorseal::Limits& limits,
                                    bool quiet) {
  tensorseal::InspectOptions o;
  o.threads = threads;
  o.read.limits = limits;
  ProgressBar bar("reading " + file, quiet);
  o.progress = bar.callback();
  return tensorseal::inspect_file(file, o);
}

}  // namespace

Runner add_manifest(CLI::App& app) {
  auto* cmd = app.add_subcommand("manifest", "Print the in-toto statement over a checkpoint's content (for signing)");
  auto file = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>("checkpoint");
  cmd->add_option("CKPT", *file, "checkpoint file or directory")->required();
  cmd->add_option("-o,--output", *out, "write the statement to this file instead of stdout");
  cmd->add_option("--name", *name, "the subject's name (default: checkpoint)");
  auto threads = add_threads(cmd);
  auto limits = add_limits(cmd);
  auto quiet = add_quiet(cmd);
  return [=]() {
    const std::string statement = tensorseal::manifest_statement(inspected(*file, *threads, *limits, *quiet), *name);
    if (out->empty())
      std::fputs(statement.c_str(), stdout);
    else
      tensorseal::write_text_file(*out, statement);
    return kExitOk;
  };
}

Runner add_sign(CLI::App& app) {
  auto* cmd = app.add_subcommand("sign", "Sign a checkpoint's content manifest (survives canon, convert, re-shard)");
  auto file = std::make_shared<std::string>();
  auto key = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>("checkpoint");
  cmd->add_option("CKPT", *file, "checkpoint file or directory")->required();
  cmd->add_option("--key", *key, "PEM private key: Ed25519 or ECDSA P-256/P-384, unencrypted")->required();
  cmd->add_option("-o,--output", *out, "the signature (a Sigstore bundle, JSON)")->required();
  cmd->add_option("--name", *name, "the subject's name (default: checkpoint)");
  auto threads = add_threads(cmd);
  auto limits = add_limits(cmd);
  auto quiet = add_quiet(cmd);
  return [=]() {
    const auto report = inspected(*file, *threads, *limits, *quiet);
    const std::string bundle = tensorseal::sign_statement(tensorseal::manifest_statement(report, *name), *key);
    tensorseal::write_text_file(*out, bundle);
    const auto id = tensorseal::key_identity(*key);
    std::printf("signed %s (%s, %zu tensors) with %s key %s -> %s\n", file->c_str(), report.content_hash.c_str(),
                report.tensors.size(), id.key_type.c_str(), id.key_id.substr(0, 16).c_str(), out->c_str());
    return kExitOk;
  };
}

}  // namespace tseal
