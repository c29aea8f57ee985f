// The layout of a flat safetensors file (writer.cc): the header bytes and where each
// tensor's bytes go, computed from names, dtypes and shapes alone. write_flat and the
// streamed write (stream.cc) share it, so both give the same bytes for the same items.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorseal/value.h"
#include "tensorseal/write.h"

namespace tensorseal::detail::safetensors {

struct Item {
  std::string_view name;
  DType dtype;
  std::span<const std::int64_t> shape;
  std::uint64_t nbytes;   // of the elements, contiguous (Tensor::nbytes)
  std::string_view code;  // safetensors' dtype name
  int rank;               // of `code` in kDtypeOrder
  std::size_t index;      // position in the list given to plan()
  const Tensor* tensor;   // null for a tensor not made yet (stream.cc)
};

struct Layout {
  std::string head;                        // u64le length, JSON header, space padding
  std::vector<Item> items;                 // in file order
  std::vector<std::uint64_t> data_offset;  // file offset of each item's bytes, by Item::index
};

// An item for tensor `name`. Throws Error for a name or dtype safetensors cannot hold.
Item item_of(std::string_view name, DType dtype, std::span<const std::int64_t> shape, std::uint64_t nbytes);
// The items of a flat dict (str -> tensor), each validated, in dict order. Throws
// Error{safetensors/not-flat} for anything else.
std::vector<Item> flat_items(const Value& root);
// The file's layout: items ordered by dtype, then name; options.metadata in the header.
Layout plan(std::vector<Item> items, const WriteOptions& options);

}  // namespace tensorseal::detail::safetensors
