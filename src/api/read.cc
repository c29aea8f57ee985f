// read_file / read_bytes / read_mapped: detection and dispatch through the format table.
#include "api/formats.h"
#include "tensorseal/checkpoint.h"

namespace tensorseal {

Checkpoint read_mapped(std::shared_ptr<const MappedFile> file, const ReadOptions& options) {
  Checkpoint c = detail::api::read_input(detail::io::input_of(file, options));
  c.file = file->path();
  if (!options.in_memory) c.mapping = std::move(file);  // else the bytes were copied: the file is let go
  return c;
}

Checkpoint read_file(const std::filesystem::path& path, const ReadOptions& options) {
  const auto file = detail::api::checkpoint_file(path, options.format);
  Checkpoint c = read_mapped(MappedFile::open(file), options);
  if (file != path) c.file = path.string();  // a directory: named as given
  if (const auto* info = format_info(c.format); info && info->directory)
    c.mapping.reset();  // the bytes are the data files', not the index's
  return c;
}

namespace detail::api {

Checkpoint read_file_deferred(const std::filesystem::path& path, const ReadOptions& options) {
  const auto file = checkpoint_file(path, options.format);
  io::Input in = io::input_of(MappedFile::open(file), options);
  in.defer_checksums = true;
  Checkpoint c = read_input(in);
  c.file = path.string();
  return c;
}

}  // namespace detail::api

Checkpoint read_bytes(std::span<const std::byte> bytes, std::string name, const ReadOptions& options) {
  detail::io::Input in;
  in.name = name;
  in.whole = Storage::owned(std::vector<std::byte>(bytes.begin(), bytes.end()));
  in.options = &options;
  Checkpoint c = detail::api::read_input(in);
  c.file = std::move(name);
  return c;
}

}  // namespace tensorseal
