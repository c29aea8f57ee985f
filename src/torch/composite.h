// Tensors torch rebuilds from other tensors, which the value tree keeps as the rebuild
// call (an Object whose arguments hold plain tensors): sparse layouts
// (_rebuild_sparse_tensor), strided nested tensors (_rebuild_nested_tensor) and jagged
// ones (_rebuild_from_type_v2 of _rebuild_njt, NestedTensor), and DTensors saved by
// torch.save (_rebuild_from_type_v2 of _rebuild_wrapper_subclass, DTensor). Reports
// (inspect) list such an object as one tensor at its own path, with its parts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorseal/tensor.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::torch {

struct Composite {
  std::string layout;                  // "sparse_coo", "sparse_csr", ..., "nested", "jagged", "dtensor"
  DType dtype = DType::kFloat32;       // the element type (the values' / buffer's)
  std::vector<std::int64_t> shape;     // sparse, dtensor: the global size; nested, jagged: [components]
  // In torch's argument order: COO (indices, values); CSR/BSR (crow_indices,
  // col_indices, values); CSC/BSC (ccol_indices, row_indices, values); nested (buffer,
  // sizes, strides, offsets); jagged (values, offsets[, lengths][, min_seqlen][,
  // max_seqlen]); dtensor (local_tensor: this rank's part).
  std::vector<std::pair<std::string, std::shared_ptr<const Tensor>>> parts;
};

// The classes torch.save writes for a DTensor: torch.distributed.tensor.DTensor (torch
// >= 2.4) and its earlier homes.
bool is_dtensor_type(const Global& g);

// The attribute `name` of the state _rebuild_from_type_v2 sets on the object it
// rebuilds (torch._utils._set_obj_state): a dict, or (dict | None, slots dict | None)
// for a class with __slots__; null when absent or the state has another shape.
const Value* state_entry(const Value& state, std::string_view name);

// The composite `o` is the rebuild call of, or nullopt for any other object or a call
// whose arguments are not what torch writes (it then stays an ordinary object).
std::optional<Composite> composite_of(const Object& o);

}  // namespace tensorseal::detail::torch
