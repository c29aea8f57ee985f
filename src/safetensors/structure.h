// Whole checkpoints in safetensors (docs/formats/safetensors.md, "Structured files").
//
// safetensors holds a flat dict of contiguous, unshared tensors. A checkpoint with more
// (nesting, optimizer state, hyper-parameters, Parameter and numpy flags, tensor
// attributes (a tensor leaf's "a": its attribute dict), OrderedDict and its
// _metadata, tied weights) is written as:
//   - the tensors, flat, named by their value-tree paths (tied tensors stored once);
//   - __metadata__["tensorseal.structure"]: the value tree as JSON, tensor leaves
//     naming their flat tensor.
// Stock safetensors loads the flat tensors; tensorseal restores the whole tree.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensorseal/limits.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::safetensors {

inline constexpr std::string_view kStructureKey = "tensorseal.structure";
inline constexpr int kVersion = 1;

// True when `root` is exactly what safetensors holds natively: a plain dict of str ->
// tensor, no Parameter/requires_grad/numpy flags, no two tensors sharing storage bytes.
bool is_flat(const Value& root);

struct Flattened {
  Value flat;             // plain dict name -> tensor (each stored once)
  std::string structure;  // JSON for __metadata__[kStructureKey]
};
Flattened flatten(const Value& root);

// Rebuilds the tree from the structure JSON and the flat tensors read from the file.
// Throws Error{safetensors/bad-structure} when the JSON does not fit the tensors, and
// Error{tensor/expanded-too-large} for a view past limits.max_expanded_bytes.
Value unflatten(std::string_view structure, const Value& flat, const std::string& file, const Limits& limits);

}  // namespace tensorseal::detail::safetensors
