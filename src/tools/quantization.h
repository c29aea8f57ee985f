// A quantized tensor's quantizer as one line, for reports (inspect --textconv, diff):
// "per_tensor_affine scale=0.05 zero_point=3", or
// "per_channel_affine axis=1 scales sha256:<hex> zero_points sha256:<hex>".
#pragma once

#include <fmt/format.h>

#include <string>

#include "tensorseal/hash.h"
#include "tensorseal/tensor.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::tools {

inline std::string quantization_line(const Quantization& q) {
  std::string s(scheme_name(q.scheme));
  if (!q.per_channel()) return fmt::format("{} scale={} zero_point={}", s, repr(Value(q.scale)), q.zero_point);
  return fmt::format("{} axis={} scales sha256:{} zero_points sha256:{}", s, q.axis, tensor_sha256(*q.scales),
                     tensor_sha256(*q.zero_points));
}

}  // namespace tensorseal::detail::tools
