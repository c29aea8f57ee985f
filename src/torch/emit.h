// How the canonical torch writers pickle tensors and storages (the same forms torch
// 2.x's own Tensor.__reduce_ex__ / persistent_id produce, so stock torch.load,
// weights_only=True included, in torch 1.13 and 2.x, rebuilds them).
#pragma once

#include "pickle/writer.h"
#include "torch/plan.h"

namespace tensorseal::detail::torch {

// Pickle writer hooks for a file whose storages are planned by `plan`. `legacy`
// selects the 6-field persistent id of the legacy format.
pickle::Writer::Hooks make_hooks(StoragePlan& plan, bool legacy);

}  // namespace tensorseal::detail::torch
