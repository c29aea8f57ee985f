// The format table: every format tensorseal reads or writes, once. Adding a format is
// one folder under src/ (constants, codec, writer options, docs/formats/<name>.md) plus
// one row here and its names in src/core/format_names.cc.
#include "api/formats.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "core/format_names.h"
#include "dcp/constants.h"
#include "dcp/format.h"
#include "io/sink.h"
#include "numpy/constants.h"
#include "numpy/format.h"
#include "numpy/npy.h"
#include "pickle/constants.h"
#include "pickle/vm.h"
#include "safetensors/constants.h"
#include "safetensors/format.h"
#include "shards/constants.h"
#include "shards/format.h"
#include "tar/constants.h"
#include "tensorseal/error.h"
#include "torch/constants.h"
#include "torch/format.h"
#include "zip/constants.h"

namespace tensorseal {
namespace detail::api {
namespace {

// The npy row's writer: a tensor as numpy.save writes it, or a numpy object array
// (what read_npy gives for descr 'O': the array's pickle) as np.save(allow_pickle)
// writes it: the header with descr '|O', then the array pickled (torch layer's
// canonical pickle, numpy objects inline).
void write_npy_or_objects(const Value& root, const WriteOptions& options, io::Sink& sink) {
  if (!root.is(Value::Kind::kObject)) return numpy::write_npy(root, options, sink);
  const Object& o = root.as_object();
  const auto* state = o.state && o.state->is(Value::Kind::kTuple) ? &o.state->items() : nullptr;
  if (!o.callable ||
      !(o.callable->is_global("numpy.core.multiarray", "_reconstruct") ||
        o.callable->is_global("numpy._core.multiarray", "_reconstruct")) ||
      state == nullptr || state->size() != 5 || !(*state)[1].is(Value::Kind::kTuple) ||
      !(*state)[3].is(Value::Kind::kBool))
    return numpy::write_npy(root, options, sink);  // refuses it: not a tensor
  std::vector<std::int64_t> shape;
  for (const Value& d : (*state)[1].items()) {
    if (!d.is(Value::Kind::kInt) || d.as_int() < 0)
      throw Error(rules::kInvalidArgument, "a numpy object array whose shape is not a tuple of non-negative ints");
    shape.push_back(d.as_int());
  }
  sink.write(numpy::header("|O", (*state)[3].as_bool(), shape));
  sink.write(torch::pickle_without_storages(root));
}

// An .npz member that is an object array: its .npy image.
std::string object_member_image(const Value& member) {
  io::StringSink s;
  write_npy_or_objects(member, WriteOptions{}, s);
  return std::move(s.out);
}

void write_npz_with_objects(const Value& root, const WriteOptions& options, io::Sink& sink) {
  numpy::write_npz(root, options, sink, object_member_image);
}

// canon's hook of the safetensors rows: user metadata survives (safetensors
// __metadata__, in every shard of a directory), whatever format it was read from.
void keep_metadata(const Checkpoint& from, WriteOptions& to) { to.metadata = from.metadata; }

// The topics each format's facts may have: its own, and those of what it contains
// (zip archives, pickles, nested torch files and safetensors data).
constexpr Topics kZip = zip::topics::kAll, kPickle = pickle::topics::kAll, kTorch = torch::topics::kAll,
                 kNumpy = numpy::topics::kAll, kSafetensors = safetensors::topics::kAll;
constexpr std::array kNpzTopics{kZip, kNumpy};
constexpr std::array kTorchZipTopics{kZip, kPickle, kTorch};
constexpr std::array kNpyTopics{kNumpy};
constexpr std::array kTorchLegacyTopics{kPickle, kTorch};
constexpr std::array kTorchTarTopics{Topics(tar::topics::kAll), kPickle, kTorch};
constexpr std::array kSafetensorsTopics{kSafetensors};
constexpr std::array kDcpTopics{Topics(dcp::topics::kAll), kPickle, kZip, kTorch, kSafetensors};
constexpr std::array kPickleTopics{kPickle, kTorch};
constexpr std::array kHfShardsTopics{Topics(shards::topics::kAll), kSafetensors, kZip, kPickle, kTorch};

// Detection order: zip archives first (npz before torch zip: both are zips, told apart
// by their first member), then tar archives (torch.load tries tarfile before reading a
// pickle; a tar is what tarfile accepts as a first header, whose checksum no other
// format's first block has), then fixed magic numbers, then the legacy pickle magic before
// plain pickles, and safetensors (a JSON header after a length) before plain pickles,
// whose first byte it may share; a DCP .metadata (a pickle naming DCP's Metadata
// class first) before plain pickles. Last, formats of several files, recognised by the
// index file a directory is read through (a JSON object, which no row above accepts).
constexpr std::array kRows{
    FormatRow{.info = {.format = Format::kNpz,
                       .description = "numpy.savez archive of .npy arrays",
                       .writable = true,
                       .canonical = Format::kNpz,
                       .params = numpy::kNpzWriteParams},
              .detect = numpy::detect_npz,
              .read = numpy::read_npz,
              .write = write_npz_with_objects,
              .structure = Structure::kZip,
              .topics = kNpzTopics},
    FormatRow{.info = {.format = Format::kTorchZip,
                       .description = "torch.save zip archive (torch >= 1.6)",
                       .writable = true,
                       .canonical = Format::kTorchZip},
              .detect = torch::detect_torch_zip,
              .read = torch::read_torch_zip,
              .write = torch::write_torch_zip,
              .structure = Structure::kZip,
              .topics = kTorchZipTopics},
    FormatRow{.info = {.format = Format::kTorchTar,
                       .description = "torch.save tar archive (torch 0.1's format, still read by torch.load)",
                       .writable = false,
                       .canonical = Format::kTorchZip},
              .detect = torch::detect_torch_tar,
              .read = torch::read_torch_tar,
              .write = nullptr,
              .structure = Structure::kTar,
              .topics = kTorchTarTopics},
    FormatRow{.info = {.format = Format::kNpy,
                       .description = "numpy.save array",
                       .writable = true,
                       .canonical = Format::kNpy},
              .detect = numpy::detect_npy,
              .read = numpy::read_npy,
              .write = write_npy_or_objects,
              .structure = Structure::kNpy,
              .topics = kNpyTopics},
    FormatRow{.info = {.format = Format::kTorchLegacy,
                       .description = "torch.save legacy stream (_use_new_zipfile_serialization=False)",
                       .writable = true,
                       .canonical = Format::kTorchZip},
              .detect = torch::detect_torch_legacy,
              .read = torch::read_torch_legacy,
              .write = torch::write_torch_legacy,
              .structure = Structure::kTorchLegacy,
              .topics = kTorchLegacyTopics},
    FormatRow{.info = {.format = Format::kSafetensors,
                       .description = "safetensors file",
                       .writable = true,
                       .canonical = Format::kSafetensors},
              .detect = safetensors::detect_safetensors,
              .read = safetensors::read_safetensors,
              .write = safetensors::write_safetensors,
              .structure = Structure::kSafetensors,
              .topics = kSafetensorsTopics,
              .keep = keep_metadata},
    FormatRow{.info = {.format = Format::kDcp,
                       .description = "torch.distributed.checkpoint directory (.metadata + *.distcp)",
                       .writable = true,
                       .canonical = Format::kDcp,
                       .directory = true,
                       .params = dcp::kWriteParams},
              .detect = dcp::detect_dcp,
              .read = dcp::read_dcp,
              .write = nullptr,
              .write_dir = dcp::write_dcp,
              .entry_file = dcp::find_dcp_metadata,
              .structure = Structure::kPickle,
              .topics = kDcpTopics},
    FormatRow{.info = {.format = Format::kPickle,
                       .description = "plain pickle stream (pickle.dumps)",
                       .writable = false,
                       .canonical = Format::kTorchZip},
              .detect = torch::detect_pickle,
              .read = torch::read_pickle_file,
              .write = nullptr,
              .structure = Structure::kPickle,
              .topics = kPickleTopics},
    FormatRow{.info = {.format = Format::kHfShards,
                       .description = "Hugging Face shard directory (*.index.json + safetensors or .bin shards)",
                       .writable = true,
                       .canonical = Format::kHfShards,
                       .directory = true,
                       .params = shards::kWriteParams},
              .detect = shards::detect_hf_shards,
              .read = shards::read_hf_shards,
              .write = nullptr,
              .write_dir = shards::write_hf_shards,
              .entry_file = shards::find_shard_index,
              .structure = Structure::kNone,
              .topics = kHfShardsTopics,
              .keep = keep_metadata},
};

// The rows with their naming columns (core/format_names.h) filled in.
const std::array<FormatRow, kRows.size()>& named_rows() noexcept {
  static const auto named = [] {
    auto out = kRows;
    for (auto& r : out)
      if (const auto* n = core::names_of(r.info.format)) {
        r.info.name = n->name;
        r.info.aliases = n->aliases;
        r.info.extensions = n->extensions;
      }
    return out;
  }();
  return named;
}

std::string known_formats() {
  std::string out;
  for (const auto& r : named_rows()) out += (out.empty() ? "" : ", ") + std::string(r.info.name);
  return out;
}

}  // namespace

std::span<const FormatRow> rows() noexcept { return named_rows(); }

const FormatRow* row(Format f) noexcept {
  for (const auto& r : named_rows())
    if (r.info.format == f) return &r;
  return nullptr;
}

namespace {

// Whether `name` is something `import` could resolve: dotted identifiers (bytes >= 0x80
// count as identifier characters, as Python's non-ASCII identifiers do).
bool importable(std::string_view name) {
  bool start = true;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '.') {
      if (start) return false;
      start = true;
    } else if (c == '_' || std::isalpha(c) || c >= 0x80 || (!start && std::isdigit(c))) {
      start = false;
    } else {
      return false;
    }
  }
  return !start;
}

// A pickle read from byte 0 of `in`, as pickle.load and torch.load's legacy path read
// any file that is not a zip: the first global it would import, if any. A global
// counts even when the stream breaks later: pickle.load imports (and may call) it
// before it reaches the broken byte.
std::optional<GlobalRef> pickle_import_at_start(const io::Input& in) {
  std::optional<GlobalRef> found;
  detail::pickle::Hooks hooks;
  hooks.on_global = [&found](const GlobalRef& g) {
    if (!found && importable(g.module) && importable(g.name)) found = g;
  };
  try {
    (void)detail::pickle::parse(in.bytes(), in.name, 0, in.options ? in.options->limits : Limits{}, hooks);
  } catch (const Error&) {
    // Not a pickle (the usual case): only what was imported before the failure counts.
  }
  return found;
}

// Formats whose files a pickle loader may also read from byte 0 (no zip signature
// there, not a pickle themselves).
bool pickle_loaders_read(Format f) { return f == Format::kSafetensors || f == Format::kNpy || f == Format::kTorchTar; }

Checkpoint read_row(const FormatRow& r, const io::Input& in) {
  if (in.read_nested != nullptr) return r.read(in);
  io::Input with_nested = in;
  with_nested.read_nested = detect_and_read;
  return r.read(with_nested);
}

}  // namespace

Checkpoint detect_and_read(const io::Input& in) {
  for (const auto& r : named_rows()) {
    if (!r.detect(in.bytes())) continue;
    if (pickle_loaders_read(r.info.format))
      if (const auto g = pickle_import_at_start(in))
        throw Error(rules::kAmbiguousFormat,
                    "a " + std::string(r.info.name) + " file whose bytes are also a pickle importing " + g->module +
                        "." + g->name + " at " + g->where +
                        " (pickle.load and torch.load would run it); read it with "
                        "an explicit format to take the " +
                        std::string(r.info.name) + " reading",
                    in.name, 0);
    return read_row(r, in);
  }
  throw Error(rules::kUnknownFormat, "not a checkpoint tensorseal knows (" + known_formats() + ")", in.name, 0);
}

Checkpoint read_input(const io::Input& in) {
  const Format wanted = in.options ? in.options->format : Format::kUnknown;
  if (wanted == Format::kUnknown) return detect_and_read(in);
  const FormatRow* r = row(wanted);
  if (r == nullptr || !r->detect(in.bytes()))
    throw Error(rules::kFormatMismatch, "not a " + std::string(format_name(wanted)) + " file", in.name, 0);
  return read_row(*r, in);
}

std::filesystem::path checkpoint_file(const std::filesystem::path& path, Format format) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path;
  if (const FormatRow* r = row(format); r != nullptr && r->entry_file != nullptr) {
    if (auto p = r->entry_file(path); !p.empty()) return p;
    throw Error(rules::kFormatMismatch, "not a " + std::string(r->info.name) + " directory", path.string());
  }
  // Directory rows in table order; the last one's finder throws when it finds nothing.
  for (const auto& r : named_rows())
    if (r.entry_file != nullptr)
      if (auto p = r.entry_file(path); !p.empty()) return p;
  throw Error(rules::kUnknownFormat, "not a checkpoint directory tensorseal knows", path.string());
}

}  // namespace detail::api

std::span<const FormatInfo> formats() noexcept {
  static const auto infos = [] {
    std::array<FormatInfo, detail::api::kRows.size()> out{};
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = detail::api::rows()[i].info;
    return out;
  }();
  return infos;
}

const FormatInfo* format_info(Format f) noexcept {
  for (const auto& info : formats())
    if (info.format == f) return &info;
  return nullptr;
}

const FormatParam* format_param(Format f, std::string_view name) noexcept {
  const auto* info = format_info(f);
  if (info == nullptr) return nullptr;
  for (const auto& p : info->params)
    if (p.name == name) return &p;
  return nullptr;
}

void set_option(FormatOptions& options, Format f, std::string_view name, std::string_view text) {
  const FormatParam* p = format_param(f, name);
  if (p == nullptr)
    throw Error(rules::kInvalidArgument,
                std::string(format_name(f)) + " has no write option '" + std::string(name) + "'");
  std::string value = p->parse(text);
  for (auto& [k, v] : options)
    if (k == name) {
      v = std::move(value);
      return;
    }
  options.emplace_back(std::string(name), std::move(value));
}

Format detect_format(std::span<const std::byte> head) noexcept {
  for (const auto& r : detail::api::rows())
    if (r.detect(head)) return r.info.format;
  return Format::kUnknown;
}

}  // namespace tensorseal
