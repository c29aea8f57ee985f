// tensorseal/checkpoint.h — reading any supported file into the value tree.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorseal/export.h"
#include "tensorseal/format.h"
#include "tensorseal/limits.h"
#include "tensorseal/storage.h"
#include "tensorseal/value.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

// A container-level fact a reader noticed: something that shapes the file's bytes
// without being content (zip prefix, storage key, pickle protocol, header padding...).
// `explain` compares facts of two files by topic; tools never look at format bytes.
struct Fact {
  std::string topic;  // stable id, e.g. "zip.prefix", "pickle.protocol", "storage.key"
  std::string where;  // location inside the file, e.g. "data.pkl @ 0x1f" or a tensor path
  std::string value;  // rendered value
};

// A global name the file's pickles reference (for `scan`).
struct GlobalRef {
  std::string module, name;
  std::string where;  // "data.pkl @ 123", "<outer> @ 16 / _load_from_bytes#1 @ 40", ...
};

struct Checkpoint {
  Format format = Format::kUnknown;
  std::string file;  // as given, for messages
  Value root;        // the content
  // User metadata a container carries besides content (safetensors __metadata__).
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<Fact> facts;
  std::vector<GlobalRef> globals;
  // The layout of the files read, as the options of its format's writer that write it
  // again (FormatInfo::params: a shard directory's split "shard_counts", a DCP
  // directory's "world_size", an npz's "compress"); `canon` passes it on
  // (WriteOptions::format_options) when it writes the same format. Not content.
  FormatOptions layout;
  // The content hash the container records of itself ("xxh3:..." or "sha256:..."; a
  // tensorseal.dcp manifest's content_hash), which `verify` recomputes; "" for none.
  std::string recorded_hash;
  std::shared_ptr<const MappedFile> mapping;  // the file read; null from memory or a directory
};

// How Python 2 str values (pickle STRING, BINSTRING, SHORT_BINSTRING: every str of a
// Python 2 pickle) are read: torch.load's `encoding=` argument.
enum class Py2Strings : std::uint8_t {
  kUtf8,    // decoded as UTF-8; other bytes are pickle/py2-string-encoding (torch's default)
  kAscii,   // decoded as ASCII; other bytes are pickle/py2-string-encoding
  kLatin1,  // decoded as Latin-1: every byte is one character (never fails)
  kBytes,   // kept as bytes objects
};

struct ReadOptions {
  Limits limits;
  Py2Strings py2_strings = Py2Strings::kUtf8;
  // Verify every checksum the container carries (zip CRC32) while reading.
  bool verify_checksums = true;
  // The interpretation: kUnknown detects the format from the content and refuses a
  // file whose bytes are also a pickle that imports something (detect/ambiguous:
  // pickle.load and torch.load would run it); another value reads the file as that
  // format only (detect/format-mismatch when it is not one). Nested files are always
  // detected.
  Format format = Format::kUnknown;
  // Copy each file's bytes into memory the result owns instead of mapping it (what
  // torch.load does without mmap=True): the values then never depend on the file,
  // which may be rewritten in place or truncated while they live (under a mapping,
  // pages past a new end fault with SIGBUS). Costs one copy of every file's bytes,
  // made on all cores. Checksums are verified on the copy.
  bool in_memory = false;
};

// Reads a file: memory-maps it, detects its format and parses it. Tensors are
// zero-copy views of the mapping where the layout allows. Throws tensorseal::Error.
// A directory is read as a Hugging Face shard directory through its index file
// (docs/formats/hf-shards.md); each shard file is mapped in turn.
[[nodiscard]] Checkpoint read_file(const std::filesystem::path& path, const ReadOptions& options = {});
// Same for bytes in memory. `name` is used in messages. The bytes are copied once
// into an owned buffer that the returned tensors view.
[[nodiscard]] Checkpoint read_bytes(std::span<const std::byte> bytes, std::string name,
                                    const ReadOptions& options = {});
// Parses a mapped file that is already open.
[[nodiscard]] Checkpoint read_mapped(std::shared_ptr<const MappedFile> file, const ReadOptions& options = {});

}  // namespace tensorseal
TENSORSEAL_API_END
