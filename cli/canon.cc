// tseal canon IN [-o OUT | --in-place]: rewrite a checkpoint in canonical form, same
// family (.pt stays .pt, .safetensors stays .safetensors, legacy/pickle become .pt).
// tseal convert IN OUT [--to pt|safetensors|npz|npy]: canonical form of another format.
// Both stream tensor data from the memory-mapped input and write atomically.
#include <filesystem>

#include "common.h"

namespace tseal {
namespace {

tensorseal::Format canonical_family(tensorseal::Format f) {
  using tensorseal::Format;
  switch (f) {
    case Format::kSafetensors: return Format::kSafetensors;
    case Format::kNpz: return Format::kNpz;
    case Format::kNpy: return Format::kNpy;
    default: return Format::kTorchZip;  // zip, legacy and plain pickles become canonical .pt
  }
}

void write_canonical(const tensorseal::Checkpoint& c, const std::string& out, tensorseal::Format f, unsigned threads) {
  tensorseal::WriteOptions o;
  o.threads = threads;
  if (f == tensorseal::Format::kSafetensors) o.metadata = c.metadata;  // user metadata survives
  tensorseal::write_file(c.root, out, f, o);
}

}  // namespace

Runner add_canon(CLI::App& app) {
  auto* cmd = app.add_subcommand("canon", "Rewrite a checkpoint canonically (same content -> same bytes)");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto in_place = std::make_shared<bool>(false);
  auto threads = std::make_shared<unsigned>(0);
  cmd->add_option("IN", *in, "input checkpoint")->required();
  cmd->add_option("-o,--output", *out, "output file");
  cmd->add_flag("--in-place", *in_place, "replace IN atomically (keeps its format family)");
  cmd->add_option("--threads", *threads, "worker threads (never changes the bytes)");
  auto limits = add_limits(cmd);
  return [=]() {
    using namespace tensorseal;
    if (out->empty() && !*in_place)
      throw Error(rules::kInvalidArgument, "give -o OUT, or --in-place to replace the input");
    if (!out->empty() && *in_place) throw Error(rules::kInvalidArgument, "-o and --in-place exclude each other");
    Checkpoint c = read_file(*in, read_options(*limits));
    const Format f = canonical_family(c.format);
    const std::string target = *in_place ? *in : *out;
    if (*in_place && f != c.format && f == Format::kTorchZip && c.format != Format::kTorchLegacy &&
        c.format != Format::kPickle)
      throw Error(rules::kInvalidArgument, "internal: in-place canon would change the format");
    write_canonical(c, target, f, *threads);
    return kExitOk;
  };
}

Runner add_convert(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a checkpoint to another format, canonically");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  auto threads = std::make_shared<unsigned>(0);
  cmd->add_option("IN", *in, "input checkpoint")->required();
  cmd->add_option("OUT", *out, "output file")->required();
  cmd->add_option("--to", *to, "pt | safetensors | npz | npy (default: from OUT's extension)")
      ->check(CLI::IsMember({"pt", "safetensors", "npz", "npy"}));
  cmd->add_option("--threads", *threads, "worker threads (never changes the bytes)");
  auto limits = add_limits(cmd);
  return [=]() {
    using namespace tensorseal;
    Format f = to->empty() ? format_for_extension(*out) : *format_from_name(*to == "pt" ? "torch-zip" : *to);
    if (f == Format::kUnknown)
      throw Error(rules::kInvalidArgument, "cannot tell the output format from '" + *out + "'; use --to");
    Checkpoint c = read_file(*in, read_options(*limits));
    write_canonical(c, *out, f, *threads);
    return kExitOk;
  };
}

}  // namespace tseal
