// The format table's rows (src/api/formats.cc): each public FormatInfo with its
// recogniser, reader and writer. The dispatch layer: it knows every format, and no
// format knows it (nested files reach readers through Input::read_nested).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>

#include "core/topic.h"
#include "io/input.h"
#include "io/sink.h"
#include "tensorseal/format.h"
#include "tensorseal/write.h"

namespace tensorseal::detail::api {

// The byte structure a loader parses a file of a format as: what `scan` reads it as
// first (its failure is the file's error; scan tries every other structure too).
enum class Structure : std::uint8_t {
  kNone,         // a directory: its files are scanned one by one
  kPickle,       // one pickle stream (pickle.load; a DCP .metadata)
  kTorchLegacy,  // torch's legacy sequence of pickles
  kTar,          // a tar archive (torch.load of torch 0.1's format, with tarfile)
  kZip,          // a zip archive (torch.load, numpy.load)
  kNpy,          // an .npy header (numpy.load, pickled object arrays)
  kSafetensors,  // a safetensors header (runs nothing; its rules still apply)
};

using Topics = std::span<const core::Topic>;

struct FormatRow {
  FormatInfo info;  // name, aliases and extensions: core/format_names.h (filled in by rows())
  bool (*detect)(std::span<const std::byte> head) noexcept;
  Checkpoint (*read)(const io::Input& in);
  void (*write)(const Value& root, const WriteOptions& options, io::Sink& sink);  // null: not writable
  // Formats that are directories: writes the whole directory (atomically) instead.
  void (*write_dir)(const Value& root, const WriteOptions& options, const std::filesystem::path& dir) = nullptr;
  // Formats that are directories: the file of `dir` that read_file reads (what
  // detection sees), or an empty path when `dir` is not of this format.
  std::filesystem::path (*entry_file)(const std::filesystem::path& dir) = nullptr;
  Structure structure = Structure::kNone;
  // The fact topics a checkpoint of this format may carry (its folder's topics::kAll
  // and those of the codecs and formats inside it): `explain`'s sentences.
  std::span<const Topics> topics;
  // What `canon` carries over from a checkpoint `from` (of any format) into the options
  // of writing it as this format, besides the layout of a checkpoint of this format
  // (Checkpoint::layout, always kept): safetensors' user metadata. Null: nothing.
  void (*keep)(const Checkpoint& from, WriteOptions& to) = nullptr;
};

// Every row, in detection order.
std::span<const FormatRow> rows() noexcept;
// The row of `f`; null for kUnknown.
const FormatRow* row(Format f) noexcept;

// Reads `in` as in.options->format, or detects it (detect_and_read); sets
// in.read_nested (to detect_and_read) for nested files when the caller left it unset.
Checkpoint read_input(const io::Input& in);
// Detects the format of `in` and runs its reader. Refuses (detect/ambiguous) a file
// that a pickle loader would also read as a pickle importing something.
Checkpoint detect_and_read(const io::Input& in);

// read_file(path, options), with `prepare` (when set) adjusting the Input of the file
// (or a directory's entry file) before it is read.
Checkpoint read_path(const std::filesystem::path& path, const ReadOptions& options,
                     const std::function<void(io::Input&)>& prepare);
// read_file(path, options), leaving the container checksums of tensor data on the
// storages (io::LaterChecks::Where::kOnStorages): the caller must run content_hash over the root
// (which verifies each while it reads the bytes) before trusting any byte.
Checkpoint read_file_deferred(const std::filesystem::path& path, const ReadOptions& options);

// The file read_file reads for `path`: `path` itself, or the entry file of a
// directory (FormatRow::entry_file): that of `format`'s row when it has one.
std::filesystem::path checkpoint_file(const std::filesystem::path& path, Format format = Format::kUnknown);

}  // namespace tensorseal::detail::api
