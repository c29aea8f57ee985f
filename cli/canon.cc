// tseal canon IN [-o OUT | --in-place | --stdout] [--allow-unsafe]: rewrite a
// checkpoint in canonical form, in the format the format table names for it (.pt stays
// .pt, .safetensors stays .safetensors, legacy/pickle become .pt). --stdin reads the
// checkpoint from standard input instead of IN (git's clean filter: --stdin --stdout).
// A file whose pickles reference dangerous globals (tensorseal::scan) is refused with
// exit 1 and one "tseal: refused: ..." line naming them, unless --allow-unsafe: a
// canonical copy must not make an attack look like a clean checkpoint.
// tseal canon DIR -o OUT: a training directory (tensorseal/training_dir.h) rewritten as
// a whole directory: checkpoints canonical, other files copied byte for byte; refused
// (exit 1, nothing written) when any checkpoint in it has dangerous globals.
// tseal canon --check FILE...: exit 0 when every file already is canonical
// (tensorseal::check_canonical_file), 1 with one "FILE: not canonical: ..." line on
// stdout per file that is not, 2 when a file cannot be read; nothing is written.
// tseal convert IN OUT [--to FORMAT]: canonical form in another format.
// tseal convert IN OUTDIR --shards SIZE: Hugging Face safetensors shards (hf-shards).
// tseal convert IN OUTDIR --to dcp [--world-size N]: a canonical DCP directory.
// (Those flags are the format table's writer options: FormatInfo::params.)
// Both stream tensor data from the memory-mapped input and write atomically (a
// directory as a whole). canon of a shard directory keeps its split into files.
#include <fmt/format.h>

#include <filesystem>

#include "common.h"
#include "progress.h"

namespace tseal {
namespace {

// How canon and convert write: worker threads, fsync, progress.
struct WriteFlags {
  unsigned threads = 0;
  bool no_fsync = false;
  bool quiet = false;
};

std::shared_ptr<WriteFlags> add_write_flags(CLI::App* cmd) {
  auto flags = std::make_shared<WriteFlags>();
  cmd->add_option("--threads", flags->threads, "worker threads (never changes the bytes)");
  cmd->add_flag("--no-fsync", flags->no_fsync,
                "skip fsync of the file and its directory (the write stays atomic, but a power loss right "
                "after it may lose it; faster on real disks)");
  cmd->add_flag("-q,--quiet", flags->quiet, "no progress bar (it is drawn only on a terminal anyway)");
  return flags;
}

// The write options of canon and convert (convert_file merges them with the input's
// canonical ones).
tensorseal::WriteOptions write_options(const WriteFlags& flags, ProgressBar& bar) {
  tensorseal::WriteOptions o;
  o.threads = flags.threads;
  o.fsync = !flags.no_fsync;
  o.progress = bar.callback();
  return o;
}

// All of standard input (the clean filter's file).
std::vector<std::byte> read_stdin() {
  std::vector<std::byte> buf;
  std::byte chunk[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(chunk, 1, sizeof chunk, stdin);
    buf.insert(buf.end(), chunk, chunk + n);
    if (n < sizeof chunk) break;
  }
  if (std::ferror(stdin)) throw tensorseal::Error(tensorseal::rules::kIoRead, "cannot read standard input", "<stdin>");
  return buf;
}

void write_stdout(const std::string& bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
    throw tensorseal::Error(tensorseal::rules::kIoWrite, "cannot write standard output", "<stdout>");
}

// canon --check: one line per file that is not canonical; errors as usual, and go on.
int check_files(const std::vector<std::string>& files, tensorseal::CanonCheckOptions o, bool quiet) {
  using namespace tensorseal;
  int status = kExitOk;
  for (const auto& f : files) {
    try {
      ProgressBar bar("checking " + f, quiet);
      o.progress = bar.callback();
      const CanonCheck r = check_canonical_file(f, o);
      bar.clear();
      if (!r.canonical) {
        std::printf("%s: not canonical: %s\n", f.c_str(), r.reason.c_str());
        if (status == kExitOk) status = kExitDifferent;
      }
    } catch (const Error& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "tseal: error: %s\n", e.what());
      status = kExitError;
    }
  }
  return status;
}

// Every writable format's name and aliases, for --to.
std::vector<std::string> writable_names() {
  std::vector<std::string> out;
  for (const auto& f : tensorseal::formats()) {
    if (!f.writable) continue;
    out.emplace_back(f.name);
    for (auto a : f.aliases) out.emplace_back(a);
  }
  return out;
}

// The refusal of a file with dangerous globals: one line naming them (at most 8) and
// where the first is referenced, as the scan/dangerous-global rule.
tensorseal::Error dangerous_refusal(const tensorseal::ScanReport& r) {
  using namespace tensorseal;
  std::string names, first;
  std::size_t n = 0;
  for (const auto& f : r.findings) {
    if (f.verdict != Verdict::kDangerous) continue;
    if (n == 0) first = f.where;
    if (n++ < 8) names += (names.empty() ? "" : ", ") + f.module + "." + f.name;
  }
  if (n > 8) names += ", ...";
  return Error(rules::kDangerousGlobal,
               fmt::format("canon refuses a file with {} dangerous global(s): {} (first at {}); pass "
                           "--allow-unsafe to rewrite it anyway",
                           n, names, first),
               r.file);
}

}  // namespace

Runner add_canon(CLI::App& app) {
  auto* cmd = app.add_subcommand("canon", "Rewrite a checkpoint canonically (same content -> same bytes)");
  auto ins = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto in_place = std::make_shared<bool>(false);
  auto to_stdout = std::make_shared<bool>(false);
  auto from_stdin = std::make_shared<bool>(false);
  auto check = std::make_shared<bool>(false);
  auto allow_unsafe = std::make_shared<bool>(false);
  cmd->add_option("IN", *ins, "input checkpoint (with --check: every file to check)");
  cmd->add_option("-o,--output", *out, "output file");
  cmd->add_flag("--in-place", *in_place, "replace IN atomically (keeps its format family)");
  cmd->add_flag("--stdout", *to_stdout, "write the canonical bytes to standard output");
  cmd->add_flag("--stdin", *from_stdin, "read the checkpoint from standard input instead of IN (format by content)");
  cmd->add_flag("--check", *check,
                "write nothing; exit 0 when every IN is already canonical, 1 naming those that are not");
  cmd->add_flag("--allow-unsafe", *allow_unsafe,
                "rewrite a file that references dangerous globals (refused by default)");
  auto flags = add_write_flags(cmd);
  auto limits = add_limits(cmd);
  auto format = add_input_format(cmd);
  return [=]() {
    using namespace tensorseal;
    const int outputs = !out->empty() + *in_place + *to_stdout;
    if (*check) {
      if (outputs != 0 || *from_stdin)
        throw Error(rules::kInvalidArgument,
                    "--check writes nothing and reads files: no -o, --in-place, --stdout or --stdin");
      if (ins->empty()) throw Error(rules::kInvalidArgument, "--check needs at least one FILE");
      CanonCheckOptions o;
      o.threads = flags->threads;
      o.read.limits = *limits;
      return check_files(*ins, o, flags->quiet);
    }
    if (*from_stdin ? !ins->empty() : ins->size() != 1)
      throw Error(rules::kInvalidArgument,
                  *from_stdin ? "--stdin reads no IN file" : "give exactly one IN (or --stdin)");
    if (outputs == 0) throw Error(rules::kInvalidArgument, "give -o OUT, --stdout, or --in-place to replace the input");
    if (outputs > 1) throw Error(rules::kInvalidArgument, "-o, --in-place and --stdout exclude each other");
    if (*in_place && *from_stdin) throw Error(rules::kInvalidArgument, "--in-place needs a file, not --stdin");
    const ReadOptions ro = read_options(*limits, *format);
    // Refuses an output name of another format; refuses (false: exit 1) a file with
    // dangerous globals unless --allow-unsafe.
    const auto accept = [&](const Checkpoint& c) {
      const Format f = canonical_format(c);
      if (!out->empty() && !format_info(f)->directory) {
        const Format named = format_for_extension(*out);
        if (named != Format::kUnknown && named != f)
          throw Error(rules::kInvalidArgument, "'" + *out + "' names " + std::string(format_name(named)) +
                                                   " but canon writes " + std::string(format_name(f)) + " for this " +
                                                   std::string(format_name(c.format)) + " file; use tseal convert");
      }
      if (*allow_unsafe) return true;
      const ScanReport r = scan(c);
      if (r.verdict != Verdict::kDangerous) return true;
      std::fprintf(stderr, "tseal: refused: %s\n", dangerous_refusal(r).what());
      return false;
    };
    const std::string target = *in_place ? ins->front() : *out;
    ProgressBar bar("writing " + target, flags->quiet || *to_stdout);
    if (*from_stdin || *to_stdout) {  // bytes in memory on one side: no streaming
      const Checkpoint c = *from_stdin ? read_bytes(read_stdin(), "<stdin>", ro) : read_file(ins->front(), ro);
      if (!accept(c)) return kExitDifferent;
      if (*to_stdout) {
        write_stdout(canonical_bytes(c, flags->threads));
        return kExitOk;
      }
      ConvertOptions o;
      o.write = write_options(*flags, bar);
      write_canonical(c, target, o);
      return kExitOk;
    }
    ConvertOptions o;
    o.read = ro;
    o.write = write_options(*flags, bar);
    o.accept = accept;
    if (is_training_dir(ins->front())) {
      if (*in_place)
        throw Error(rules::kInvalidArgument, "a training directory is canonicalised to -o OUT, not in place");
      o.accept = [&](const Checkpoint& c) { return *allow_unsafe || scan(c).verdict != Verdict::kDangerous; };
      std::string declined;
      if (canon_training_dir(ins->front(), target, o, &declined)) return kExitOk;
      const std::filesystem::path refused = std::filesystem::path(ins->front()) / declined;
      std::fprintf(stderr, "tseal: refused: %s\n", dangerous_refusal(scan_file(refused, ro)).what());
      return kExitDifferent;
    }
    return convert_file(ins->front(), target, o) ? kExitOk : kExitDifferent;
  };
}

Runner add_convert(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a checkpoint to another format, canonically");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  const auto names = writable_names();
  std::string choices;
  for (const auto& n : names) choices += (choices.empty() ? "" : " | ") + n;
  cmd->add_option("IN", *in, "input checkpoint")->required();
  cmd->add_option("OUT", *out, "output file")->required();
  cmd->add_option("--to", *to, choices + " (default: from OUT's extension)")->check(CLI::IsMember(names));
  auto format_flags = add_format_flags(cmd);
  auto flags = add_write_flags(cmd);
  auto limits = add_limits(cmd);
  auto format = add_input_format(cmd);
  return [=]() {
    using namespace tensorseal;
    FormatOptions format_options;
    // A format option (--shards, --world-size) before the extension: OUT of a directory
    // format has none.
    Format f = to->empty() ? Format::kUnknown : *format_from_name(*to);
    f = apply_format_flags(*format_flags, f, *to, format_options);
    if (f == Format::kUnknown) f = format_for_extension(*out);
    if (f == Format::kUnknown)
      throw Error(rules::kInvalidArgument, "cannot tell the output format from '" + *out + "'; use --to");
    ProgressBar bar("writing " + *out, flags->quiet);
    ConvertOptions o;
    o.read = read_options(*limits, *format);
    o.to = f;
    o.write = write_options(*flags, bar);
    o.write.format_options = std::move(format_options);
    (void)convert_file(*in, *out, o);
    return kExitOk;
  };
}

}  // namespace tseal
