// The bound on what an overlapping view describes. A tensor whose elements overlap (a
// stride of 0, torch's expand()) describes more bytes than its storage holds, and every
// consumer that walks its elements (hashing, diffing, a contiguous write) pays for the
// described bytes, not the stored ones: a few bytes of file could otherwise describe
// terabytes. Readers call this on every tensor they make from a file, after
// Tensor::validate(); tensors made in memory (the binding, the live DCP state) are not
// bounded.
#pragma once

#include "tensorseal/limits.h"
#include "tensorseal/tensor.h"

namespace tensorseal::detail::core {

// Throws Error{rules::kExpandedTooLarge} (ErrorKind::kLimit, no file or offset: the
// caller locates it) when t.nbytes() exceeds its storage's bytes by more than
// limits.max_expanded_bytes.
void check_expansion(const Tensor& t, const Limits& limits);

}  // namespace tensorseal::detail::core
