// write_file / write_bytes: the format table's writer, into an atomic file or memory.
#include "tensorseal/write.h"

#include "api/formats.h"
#include "hash/content_hash.h"
#include "io/sink.h"
#include "tensorseal/error.h"

namespace tensorseal {
namespace {

void write_to(const Value& root, Format format, const WriteOptions& options, detail::io::Sink& sink) {
  const auto* r = detail::api::row(format);
  if (r != nullptr && r->write_dir != nullptr)
    throw Error(rules::kInvalidArgument, std::string(format_name(format)) + " is a directory, not one file");
  if (r == nullptr || r->write == nullptr)
    throw Error(rules::kInvalidArgument, "cannot write format " + std::string(format_name(format)));
  r->write(root, options, sink);
}

}  // namespace

void write_file(const Value& root, const std::filesystem::path& path, Format format, const WriteOptions& options) {
  if (const auto* r = detail::api::row(format); r != nullptr && r->write_dir != nullptr) {
    try {
      r->write_dir(root, options, path);
    } catch (const Error& e) {
      throw e.located(path.string());
    }
    return;
  }
  detail::io::AtomicFileSink sink(path, options.fsync);
  detail::util::ProgressMeter meter(&options.progress, options.progress ? detail::hash::content_hash_bytes(root) : 0);
  detail::io::ProgressSink counted(sink, meter);
  try {
    write_to(root, format, options, meter.active() ? static_cast<detail::io::Sink&>(counted) : sink);
  } catch (const Error& e) {
    throw e.located(path.string());
  }
  if (options.before_commit) options.before_commit();
  sink.commit();
  meter.finish();
}

void write_text_file(const std::filesystem::path& path, std::string_view bytes, bool fsync) {
  detail::io::write_file_atomically(path, bytes, fsync);
}

std::string write_bytes(const Value& root, Format format, const WriteOptions& options) {
  detail::io::StringSink sink;
  write_to(root, format, options, sink);
  return std::move(sink.out);
}

}  // namespace tensorseal
