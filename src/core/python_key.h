// Python's dict-key identity for the value tree: which values a Python dict (or set)
// treats as the same key. Used by Dict and by the pickle VM's SETITEM(S)/ADDITEMS.
#pragma once

#include <string>

#include "tensorseal/value.h"

namespace tensorseal::detail::core {

// Appends to `out` an encoding of `v` such that two hashable values get the same
// encoding iff a Python dict treats them as the same key: True == 1 == 1.0,
// -0.0 == 0 == False, str and bytes by content (never equal to each other), tuples
// elementwise, frozensets as sets, globals by name, objects/tensors/storages by node
// identity. A NaN (also inside a tuple) equals no other key: each call gives it a
// fresh encoding. One departure from Python: an integral float beyond +-9.2e18 is not
// equal to the (BigInt) int of the same value. Returns false, leaving `out` partly
// written, for unhashable values (list, dict, set, bytearray, or a tuple/frozenset
// holding one). Thread-safe.
[[nodiscard]] bool python_key(const Value& v, std::string& out);

}  // namespace tensorseal::detail::core
