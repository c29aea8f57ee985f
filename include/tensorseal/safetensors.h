// tensorseal/safetensors.h — the index of a safetensors file: its header, not its tensors.
//
// read_file() builds a Value tree with a tensor for every entry. An index parses and
// validates only the header (the same validator as read_file: a file breaks the same
// rule, with the same message, either way), maps the file, and makes a tensor when
// asked. This is what lazy access (`safe_open`) needs: opening a file of 10,000 tensors
// costs one header parse, and a tensor's bytes are not touched until it is used.
//
//   SafetensorsIndex idx = read_safetensors_index("model.safetensors");
//   for (std::uint32_t i : idx.by_name) std::puts(idx.entries[i].name.c_str());
//   std::shared_ptr<const Tensor> w = idx.tensor(*idx.find("w"));
//
// Files written by tensorseal as whole checkpoints (__metadata__["tensorseal.structure"])
// are indexed as the flat tensors they store; read_file restores their tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/dtype.h"
#include "tensorseal/export.h"
#include "tensorseal/storage.h"
#include "tensorseal/tensor.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

// One tensor of the header, validated: a known dtype, a shape whose bytes fit
// data_offsets exactly, and offsets inside the data buffer.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kUInt8;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // data_offsets: [begin, end) of the data buffer
};

struct SafetensorsIndex {
  static constexpr std::size_t kAbsent = ~std::size_t{0};

  std::string file;                                           // as given, for messages
  std::uint64_t header_length = 0;                            // N, the JSON header's bytes (padding included)
  std::uint64_t data_start = 0;                               // 8 + N: file offset of the data buffer
  std::uint64_t header_padding = 0;                           // trailing spaces of the header
  std::vector<SafetensorsEntry> entries;                      // in the header's order
  std::vector<std::pair<std::string, std::string>> metadata;  // __metadata__, file order
  // Where "__metadata__" (an object or null) stands among the header's keys, kAbsent
  // when the header has none: the header's keys are the entries' names with
  // "__metadata__" inserted at this position.
  std::size_t metadata_position = kAbsent;
  bool metadata_null = false;                 // "__metadata__": null (present, but not an object)
  std::vector<std::uint32_t> by_name;         // entry indices, names in bytewise (code point) order
  std::vector<std::uint32_t> by_offset;       // entry indices in data order (sorted by data_offsets)
  std::shared_ptr<const Storage> whole;       // every byte of the file: the mapping or an owned copy
  std::shared_ptr<const MappedFile> mapping;  // null when read from memory

  // The entry called `name`, or null (binary search over by_name).
  [[nodiscard]] const SafetensorsEntry* find(std::string_view name) const noexcept;
  // A contiguous tensor over the entry's bytes: a zero-copy window of `whole`.
  [[nodiscard]] std::shared_ptr<const Tensor> tensor(const SafetensorsEntry& entry) const;
  // True for a whole checkpoint written by tensorseal (__metadata__ holds
  // "tensorseal.structure"): read_file restores its tree, the index lists its flat tensors.
  [[nodiscard]] bool structured() const noexcept;
};

// Maps `path` and indexes it as safetensors (no format detection: a file of another
// format breaks a safetensors rule). Throws tensorseal::Error exactly as read_file does
// for a safetensors file that breaks a header rule.
[[nodiscard]] SafetensorsIndex read_safetensors_index(const std::filesystem::path& path,
                                                      const ReadOptions& options = {});
// Same for a file that is already mapped.
[[nodiscard]] SafetensorsIndex read_safetensors_index(std::shared_ptr<const MappedFile> file,
                                                      const ReadOptions& options = {});
// Same for bytes in memory, copied once into an owned buffer; `name` is used in messages.
[[nodiscard]] SafetensorsIndex read_safetensors_index(std::span<const std::byte> bytes, std::string name,
                                                      const ReadOptions& options = {});

}  // namespace tensorseal
TENSORSEAL_API_END
