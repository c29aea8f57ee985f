// tensorseal/composite.h — tensors torch rebuilds from other tensors (sparse, nested,
// jagged, DTensor) or from no data at all (meta), as one typed record: decoded from the rebuild call a checkpoint
// holds, and encoded back into the call torch.save writes. The call's grammar lives in
// one place (src/torch/composite.cc); bindings build framework objects from the fields.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorseal/export.h"
#include "tensorseal/tensor.h"
#include "tensorseal/value.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

// A class torch.save names by module and name (a pickle global).
struct TorchClass {
  std::string_view module, name;
};

// One tensor torch rebuilds from other tensors: what decode_composite reads from the
// rebuild call and encode_composite writes back.
struct Composite {
  std::string layout;               // "sparse_coo", "sparse_csr", ..., "nested", "jagged", "dtensor", "meta"
  DType dtype = DType::kFloat32;    // the element type (the values' / buffer's)
  std::vector<std::int64_t> shape;  // sparse, dtensor, meta: the size; nested, jagged: [components]
  // In torch's argument order: COO (indices, values); CSR/BSR (crow_indices,
  // col_indices, values); CSC/BSC (ccol_indices, row_indices, values); nested (buffer,
  // sizes, strides, offsets); jagged (values, offsets[, lengths][, min_seqlen][,
  // max_seqlen]); dtensor (local_tensor: this rank's part); meta: none.
  std::vector<std::pair<std::string, std::shared_ptr<const Tensor>>> parts;
  // What the call holds besides the parts, so that encoding writes what torch.save wrote.
  std::optional<Value> coalesced;  // sparse_coo: is_coalesced (a bool or None); absent: the 3-item form
  bool requires_grad = false;      // jagged, dtensor, meta
  std::int64_t ragged_idx = 1;     // jagged: the ragged dimension
  // jagged: _metadata_cache as written, its entries in its order (torch caches max_seqlen
  // first; the entries are parts too); None: encoding builds it from the parts.
  Value metadata_cache;
  // jagged, dtensor: the state _rebuild_from_type_v2 sets on the object, as written (a
  // jagged tensor's attributes dict or None; a DTensor's (None, {_local_tensor, _spec})).
  Value state;
  // dtensor: its class (one of dtensor_types()), global stride, storage offset, and the
  // device argument of _rebuild_wrapper_subclass. meta: its stride.
  Global type;
  std::vector<std::int64_t> stride;
  std::int64_t storage_offset = 0;
  Value device;
  // sparse, dtensor: the layout argument as written (sparse: the _get_layout call, which
  // a file may share among its tensors; None: encoding writes a new one).
  Value layout_arg;
  // Set for a torch.nn.Parameter of this tensor (sparse, nested, meta: torch writes
  // _rebuild_parameter(<the tensor's call>, requires_grad, OrderedDict())): the
  // Parameter's requires_grad. nullopt for a tensor that is not a Parameter.
  std::optional<bool> parameter;
  // sparse, nested, meta: the tensor object's Python attributes (its __dict__: a dict of
  // str keys to values without tensors). torch then writes _rebuild_from_type_v2(<the
  // rebuild function>, torch.Tensor, <its arguments>, {attributes}). None: it has none.
  Value attributes;

  // The part called `role`, or null.
  std::shared_ptr<const Tensor> part(std::string_view role) const;
};

// The composite `o` is the rebuild call of (a value tree keeps it as that call), or
// nullopt for any other object.
std::optional<Composite> decode_composite(const Object& o);
// The rebuild call torch.save writes for `c`, its parts shared, not copied. Throws
// Error(torch-writer/cannot-write) for an unknown layout or a missing part.
Value encode_composite(const Composite& c);

// DTensor at each module it has lived in, torch >= 2.4's first; the classes of a
// DTensor's spec torch.save pickles (DeviceMesh, DTensorSpec, Shard, ...).
std::span<const TorchClass> dtensor_types() noexcept;
std::span<const TorchClass> dtensor_spec_classes() noexcept;
// The sparse layouts as torch names them after "torch." ("sparse_coo", "sparse_csr", ...).
std::span<const std::string_view> sparse_layouts() noexcept;

}  // namespace tensorseal
TENSORSEAL_API_END
