// The public face of torch/composite.h: the record, decoding and encoding, and the
// DTensor class lists, for bindings (python/src) that see only the public API.
#include "tensorseal/composite.h"

#include "torch/composite.h"

namespace tensorseal {

std::shared_ptr<const Tensor> Composite::part(std::string_view role) const {
  for (const auto& [r, t] : parts)
    if (r == role) return t;
  return nullptr;
}

std::optional<Composite> decode_composite(const Object& o) { return detail::torch::composite_of(o); }

Value encode_composite(const Composite& c) { return detail::torch::encode(c); }

std::span<const TorchClass> dtensor_types() noexcept { return detail::torch::kDTensorTypes; }

std::span<const TorchClass> dtensor_spec_classes() noexcept { return detail::torch::kDTensorSpecClasses; }

std::span<const std::string_view> sparse_layouts() noexcept { return detail::torch::kSparseLayouts; }

}  // namespace tensorseal
