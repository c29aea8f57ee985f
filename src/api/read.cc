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
  return detail::api::read_path(path, options, nullptr);
}

namespace detail::api {

Checkpoint read_path(const std::filesystem::path& path, const ReadOptions& options,
                     const std::function<void(io::Input&)>& prepare) {
  const auto file = checkpoint_file(path, options.format);
  const auto mapped = MappedFile::open(file);
  io::Input in = io::input_of(mapped, options);
  if (prepare) prepare(in);
  Checkpoint c = read_input(in);
  c.file = file != path ? path.string() : mapped->path();  // a directory: named as given
  const auto* info = format_info(c.format);
  // The mapping is kept for a single file read in place; a directory's bytes are its
  // data files', not the index's.
  if (!options.in_memory && (info == nullptr || !info->directory)) c.mapping = mapped;
  return c;
}

Checkpoint read_file_deferred(const std::filesystem::path& path, const ReadOptions& options) {
  return read_path(path, options, [](io::Input& in) {
    in.checks_later = std::make_shared<io::LaterChecks>(io::LaterChecks::Where::kOnStorages);
  });
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
