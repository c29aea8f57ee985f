// Dispatch from a target format to its writer, and atomic file output.
#include "tensorseal/write.h"

#include "io/sink.h"
#include "io/writers.h"
#include "tensorseal/error.h"

namespace tensorseal {

namespace {
void write_to(const Value& root, Format format, const WriteOptions& options, detail::Sink& sink) {
  switch (format) {
    case Format::kSafetensors: detail::write_safetensors(root, options, sink); return;
    case Format::kTorchZip: detail::write_torch_zip(root, options, sink); return;
    case Format::kTorchLegacy: detail::write_torch_legacy(root, options, sink); return;
    case Format::kNpz: detail::write_npz(root, options, sink); return;
    case Format::kNpy: detail::write_npy(root, options, sink); return;
    default: break;
  }
  throw Error(rules::kInvalidArgument, "cannot write format " + std::string(format_name(format)));
}
}  // namespace

void write_file(const Value& root, const std::filesystem::path& path, Format format, const WriteOptions& options) {
  detail::AtomicFileSink sink(path, options.fsync);
  try {
    write_to(root, format, options, sink);
  } catch (const Error& e) {
    throw e.located(path.string());
  }
  sink.commit();
}

std::string write_bytes(const Value& root, Format format, const WriteOptions& options) {
  detail::StringSink sink;
  write_to(root, format, options, sink);
  return std::move(sink.out);
}

Format format_for_extension(const std::filesystem::path& path) noexcept {
  std::string ext = path.extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".pt" || ext == ".pth" || ext == ".bin" || ext == ".ckpt") return Format::kTorchZip;
  if (ext == ".safetensors") return Format::kSafetensors;
  if (ext == ".npz") return Format::kNpz;
  if (ext == ".npy") return Format::kNpy;
  return Format::kUnknown;
}

}  // namespace tensorseal
