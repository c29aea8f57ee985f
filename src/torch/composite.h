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
#include <string_view>
#include <utility>
#include <vector>

#include "io/input.h"
#include "tensorseal/composite.h"
#include "tensorseal/tensor.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::torch {

using tensorseal::Composite;
using tensorseal::TorchClass;

// DTensor at each module it has lived in; torch >= 2.4's first, the only one torch's
// weights_only loader allows (it names a class by its own __module__).
inline constexpr TorchClass kDTensorTypes[] = {
    {"torch.distributed.tensor", "DTensor"},
    {"torch.distributed.tensor._api", "DTensor"},
    {"torch.distributed._tensor.api", "DTensor"},
    {"torch.distributed._tensor", "DTensor"},
};

// The classes of a DTensor's spec that torch.save pickles (NEWOBJ, then BUILD with
// their state) and torch's weights_only loader allows once torch.distributed.tensor is
// imported. The one list: scan (tools/scan.cc) and the Python glue (through the
// binding) read it.
inline constexpr TorchClass kDTensorSpecClasses[] = {
    {"torch.distributed.device_mesh", "DeviceMesh"},
    {"torch.distributed._mesh_layout", "_MeshLayout"},
    {"torch.distributed._mesh_layout", "_FlatLayout"},
    {"torch.distributed.tensor._dtensor_spec", "DTensorSpec"},
    {"torch.distributed.tensor._dtensor_spec", "TensorMeta"},
    {"torch.distributed.tensor._dtensor_spec", "ShardOrderEntry"},
    {"torch.distributed.tensor.placement_types", "Shard"},
    {"torch.distributed.tensor.placement_types", "Replicate"},
    {"torch.distributed.tensor.placement_types", "Partial"},
    {"torch.distributed.tensor.placement_types", "_StridedShard"},
};

// Whether `g` is one of kDTensorTypes; whether module.name is one of kDTensorSpecClasses.
bool is_dtensor_type(const Global& g);
bool is_dtensor_spec_class(std::string_view module, std::string_view name);

// The sparse layouts, as torch names them after "torch." (_get_layout's argument).
inline constexpr std::string_view kSparseLayouts[] = {"sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr",
                                                      "sparse_bsc"};

// The attribute `name` of the state _rebuild_from_type_v2 sets on the object it
// rebuilds (torch._utils._set_obj_state): a dict, or (dict | None, slots dict | None)
// for a class with __slots__; null when absent or the state has another shape.
const Value* state_entry(const Value& state, std::string_view name);

// The composite `o` is the rebuild call of, or nullopt for any other object or a call
// whose arguments are not what torch writes (it then stays an ordinary object).
// Decodes; the reader validated the call first (check_* below).
std::optional<Composite> composite_of(const Object& o);

// Encodes `c` as the rebuild call torch.save writes for it (the grammar in
// composite.cc), parts shared, not copied: composite_of(encode(c)) gives `c` back.
// Throws Error(torch-writer/cannot-write) for a layout it does not know or missing parts.
Value encode(const Composite& c);

// The resolver's checks (torch/composite_check.cc), run on a call before it is kept:
// each throws Error(torch/bad-rebuild-args) naming `fn` and the file `in` for arguments
// torch would not check or cannot build. check_jagged and check_dtensor take the four
// arguments of _rebuild_from_type_v2 (func, type, args, state).
void check_nested(const Object& o, const std::string& fn, const io::Input& in);
void check_jagged(const std::vector<Value>& a, const std::string& fn, const io::Input& in);
void check_dtensor(const std::vector<Value>& a, const std::string& fn, const io::Input& in);
void check_meta(const Object& o, const std::string& fn, const io::Input& in);

}  // namespace tensorseal::detail::torch
