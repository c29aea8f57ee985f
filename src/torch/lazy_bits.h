// torch's lazy conj and neg bits. torch records them for views such as z.conj() and
// z.conj().imag in the metadata argument of _rebuild_tensor_v2/_v3
// (torch._C._get_tensor_metadata: {"conj": True} / {"neg": True}) over the storage's
// raw values, and applies them whenever it reads the values. tensorseal applies them
// once, into an owned contiguous copy, so every reader, hash and writer sees the
// values torch sees.
#pragma once

#include <memory>

#include "tensorseal/limits.h"
#include "tensorseal/tensor.h"

namespace tensorseal::detail::torch {

// The values of `t` with the bits applied: neg negates every element (IEEE sign bit
// of floating and complex parts, two's complement for integers), conj negates the
// imaginary part of complex elements. Throws Error{torch/unsupported-rebuild} for a
// bit torch cannot set on the dtype (conj on a real tensor, either on bool or on the
// 8-bit floats), and a limit error when the copy exceeds limits.max_alloc.
std::shared_ptr<const Tensor> apply_lazy_bits(const Tensor& t, bool neg, bool conj, const Limits& limits,
                                              const std::string& file);

}  // namespace tensorseal::detail::torch
