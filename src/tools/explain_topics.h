// The topics `explain` has a sentence for: its own ("format", "metadata",
// "order.tensors", "data") followed by those of every row of the format table
// (FormatRow::topics), each once. Every fact a reader emits has one of these topics, and
// every one of these is emitted by some reader (tests/cpp/explain_test.cc checks both).
#pragma once

#include <span>

#include "core/topic.h"

namespace tensorseal::detail::tools {

// Every topic explain has a sentence for.
std::span<const core::Topic> known_topics();
// The topics of explain's own comparisons, which no reader emits.
std::span<const core::Topic> own_topics();

}  // namespace tensorseal::detail::tools
