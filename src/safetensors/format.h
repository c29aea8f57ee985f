// The safetensors format's entry points (its row in src/api/formats.cc).
#pragma once

#include <cstddef>
#include <span>

#include "io/input.h"
#include "io/sink.h"
#include "tensorseal/write.h"

namespace tensorseal::detail::safetensors {

// A u64 header length followed by a JSON object ('{' after optional whitespace). The
// length itself is not trusted here: the reader checks it and names the rule.
bool detect_safetensors(std::span<const std::byte> head) noexcept;
Checkpoint read_safetensors(const io::Input& in);
void write_safetensors(const Value& root, const WriteOptions& options, io::Sink& sink);

}  // namespace tensorseal::detail::safetensors
