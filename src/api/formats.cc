// The format table: every format tensorseal reads or writes, once. Adding a format is
// one folder under src/ (constants, codec, docs/formats/<name>.md) plus one row here.
#include "api/formats.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "dcp/constants.h"
#include "dcp/format.h"
#include "numpy/constants.h"
#include "numpy/format.h"
#include "io/sink.h"
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
  if (!o.callable || !(o.callable->is_global("numpy.core.multiarray", "_reconstruct") ||
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

using Names = std::string_view;
constexpr std::array<Names, 3> kTorchZipAliases{"pt", "pth", "torch"};
constexpr std::array<Names, 4> kTorchZipExtensions{".pt", ".pth", ".bin", ".ckpt"};
constexpr std::array<Names, 1> kTorchLegacyAliases{"legacy"};
constexpr std::array<Names, 1> kTorchTarAliases{"tar"};
constexpr std::array<Names, 1> kSafetensorsExtensions{".safetensors"};
constexpr std::array<Names, 1> kNpyExtensions{".npy"};
constexpr std::array<Names, 1> kNpzExtensions{".npz"};
constexpr std::array<Names, 1> kHfShardsAliases{"shards"};
constexpr std::array<Names, 2> kDcpAliases{"distcp", "torch-dcp"};

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
    FormatRow{.info = {Format::kNpz, "npz", {}, kNpzExtensions, "numpy.savez archive of .npy arrays", true,
                       Format::kNpz},
              .detect = numpy::detect_npz, .read = numpy::read_npz, .write = write_npz_with_objects,
              .structure = Structure::kZip, .topics = kNpzTopics},
    FormatRow{.info = {Format::kTorchZip, "torch-zip", kTorchZipAliases, kTorchZipExtensions,
                       "torch.save zip archive (torch >= 1.6)", true, Format::kTorchZip},
              .detect = torch::detect_torch_zip, .read = torch::read_torch_zip, .write = torch::write_torch_zip,
              .structure = Structure::kZip, .topics = kTorchZipTopics},
    FormatRow{.info = {Format::kTorchTar, "torch-tar", kTorchTarAliases, {},
                       "torch.save tar archive (torch 0.1's format, still read by torch.load)", false,
                       Format::kTorchZip},
              .detect = torch::detect_torch_tar, .read = torch::read_torch_tar, .write = nullptr,
              .structure = Structure::kTar, .topics = kTorchTarTopics},
    FormatRow{.info = {Format::kNpy, "npy", {}, kNpyExtensions, "numpy.save array", true, Format::kNpy},
              .detect = numpy::detect_npy, .read = numpy::read_npy, .write = write_npy_or_objects,
              .structure = Structure::kNpy, .topics = kNpyTopics},
    FormatRow{.info = {Format::kTorchLegacy, "torch-legacy", kTorchLegacyAliases, {},
                       "torch.save legacy stream (_use_new_zipfile_serialization=False)", true, Format::kTorchZip},
              .detect = torch::detect_torch_legacy, .read = torch::read_torch_legacy,
              .write = torch::write_torch_legacy, .structure = Structure::kTorchLegacy,
              .topics = kTorchLegacyTopics},
    FormatRow{.info = {Format::kSafetensors, "safetensors", {}, kSafetensorsExtensions, "safetensors file", true,
                       Format::kSafetensors},
              .detect = safetensors::detect_safetensors, .read = safetensors::read_safetensors,
              .write = safetensors::write_safetensors, .structure = Structure::kSafetensors,
              .topics = kSafetensorsTopics},
    FormatRow{.info = {Format::kDcp, "dcp", kDcpAliases, {},
                       "torch.distributed.checkpoint directory (.metadata + *.distcp)", true, Format::kDcp, true},
              .detect = dcp::detect_dcp, .read = dcp::read_dcp, .write = nullptr, .write_dir = dcp::write_dcp,
              .entry_file = dcp::find_dcp_metadata, .structure = Structure::kPickle, .topics = kDcpTopics},
    FormatRow{.info = {Format::kPickle, "pickle", {}, {}, "plain pickle stream (pickle.dumps)", false,
                       Format::kTorchZip},
              .detect = torch::detect_pickle, .read = torch::read_pickle_file, .write = nullptr,
              .structure = Structure::kPickle, .topics = kPickleTopics},
    FormatRow{.info = {Format::kHfShards, "hf-shards", kHfShardsAliases, {},
                       "Hugging Face shard directory (*.index.json + safetensors or .bin shards)", true,
                       Format::kHfShards, true},
              .detect = shards::detect_hf_shards, .read = shards::read_hf_shards, .write = nullptr,
              .write_dir = shards::write_hf_shards, .entry_file = shards::find_shard_index,
              .structure = Structure::kNone, .topics = kHfShardsTopics},
};

std::string known_formats() {
  std::string out;
  for (const auto& r : kRows) out += (out.empty() ? "" : ", ") + std::string(r.info.name);
  return out;
}

}  // namespace

std::span<const FormatRow> rows() noexcept { return kRows; }

const FormatRow* row(Format f) noexcept {
  for (const auto& r : kRows)
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
bool pickle_loaders_read(Format f) {
  return f == Format::kSafetensors || f == Format::kNpy || f == Format::kTorchTar;
}

Checkpoint read_row(const FormatRow& r, const io::Input& in) {
  if (in.read_nested != nullptr) return r.read(in);
  io::Input with_nested = in;
  with_nested.read_nested = detect_and_read;
  return r.read(with_nested);
}

}  // namespace

Checkpoint detect_and_read(const io::Input& in) {
  for (const auto& r : kRows) {
    if (!r.detect(in.bytes())) continue;
    if (pickle_loaders_read(r.info.format))
      if (const auto g = pickle_import_at_start(in))
        throw Error(rules::kAmbiguousFormat,
                    "a " + std::string(r.info.name) + " file whose bytes are also a pickle importing " + g->module +
                        "." + g->name + " at " + g->where + " (pickle.load and torch.load would run it); read it with "
                        "an explicit format to take the " + std::string(r.info.name) + " reading",
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
  for (const auto& r : kRows)
    if (r.entry_file != nullptr)
      if (auto p = r.entry_file(path); !p.empty()) return p;
  throw Error(rules::kUnknownFormat, "not a checkpoint directory tensorseal knows", path.string());
}

}  // namespace detail::api

std::span<const FormatInfo> formats() noexcept {
  static const auto infos = [] {
    std::array<FormatInfo, detail::api::kRows.size()> out{};
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = detail::api::kRows[i].info;
    return out;
  }();
  return infos;
}

const FormatInfo* format_info(Format f) noexcept {
  for (const auto& info : formats())
    if (info.format == f) return &info;
  return nullptr;
}

std::string_view format_name(Format f) noexcept {
  const auto* info = format_info(f);
  return info ? info->name : std::string_view("unknown");
}

std::optional<Format> format_from_name(std::string_view name) noexcept {
  for (const auto& r : detail::api::rows()) {
    if (r.info.name == name) return r.info.format;
    if (std::find(r.info.aliases.begin(), r.info.aliases.end(), name) != r.info.aliases.end()) return r.info.format;
  }
  return std::nullopt;
}

Format format_for_extension(const std::filesystem::path& path) noexcept {
  std::string ext = path.extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& r : detail::api::rows())
    if (std::find(r.info.extensions.begin(), r.info.extensions.end(), ext) != r.info.extensions.end())
      return r.info.format;
  return Format::kUnknown;
}

Format detect_format(std::span<const std::byte> head) noexcept {
  for (const auto& r : detail::api::rows())
    if (r.detect(head)) return r.info.format;
  return Format::kUnknown;
}

}  // namespace tensorseal
