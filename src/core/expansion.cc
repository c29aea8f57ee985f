#include "core/expansion.h"

#include <fmt/format.h>

#include "tensorseal/error.h"

namespace tensorseal::detail::core {

void check_expansion(const Tensor& t, const Limits& limits) {
  const std::uint64_t described = t.nbytes(), stored = t.storage ? t.storage->size() : 0;
  if (described <= stored || described - stored <= limits.max_expanded_bytes) return;
  throw Error(
      rules::kExpandedTooLarge,
      fmt::format("an overlapping view (shape [{}], strides [{}]) describes {} bytes over a storage of {}: "
                  "more than max_expanded_bytes ({}) beyond it (raise --max-expanded-bytes)",
                  fmt::join(t.shape, ", "), fmt::join(t.strides, ", "), described, stored, limits.max_expanded_bytes));
}

}  // namespace tensorseal::detail::core
