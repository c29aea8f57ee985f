// The one safetensors header validator, shared by read_safetensors (the Value tree) and
// read_safetensors_index (lazy access). See header.cc for the grammar and the rules.
#pragma once

#include "io/input.h"
#include "tensorseal/safetensors.h"

namespace tensorseal::detail::safetensors {

// Parses and validates the header of `in` and checks that the entries tile the data
// buffer; fills everything in SafetensorsIndex except `file` and `mapping`. Throws
// Error with in.name and a byte offset. `fast_scan` = false skips the fast scanner and
// parses with nlohmann's SAX parser only (tests compare the two paths).
SafetensorsIndex index_safetensors(const io::Input& in, bool fast_scan = true);

}  // namespace tensorseal::detail::safetensors
