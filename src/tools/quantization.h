// A quantized tensor's quantizer as one line, for reports (inspect --textconv, diff):
// "per_tensor_affine scale=0.05 zero_point=3", or
// "per_channel_affine axis=1 scales sha256:<hex> zero_points sha256:<hex>".
#pragma once

#include <string>

#include "tensorseal/hash.h"
#include "tensorseal/tensor.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::tools {

inline std::string quantization_line(const Quantization& q) {
  std::string s(scheme_name(q.scheme));
  if (!q.per_channel()) return s + " scale=" + repr(Value(q.scale)) + " zero_point=" + std::to_string(q.zero_point);
  return s + " axis=" + std::to_string(q.axis) + " scales sha256:" + tensor_sha256(*q.scales) +
         " zero_points sha256:" + tensor_sha256(*q.zero_points);
}

}  // namespace tensorseal::detail::tools
