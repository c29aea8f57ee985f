// tensorseal/explain.h — why do the bytes of two checkpoints differ? (`tseal explain`)
//
// Works on Checkpoint facts, never on format bytes: readers record what shapes a file's
// bytes without being content (Fact{topic, where, value}: zip prefix, storage keys,
// pickle protocol, header padding...), and explain compares those by topic + where.
// It adds the container format, the user metadata, the order of tensors, and whether
// the content itself differs (content hash; data differences are counted and left to
// `diff`). The raw bytes are compared only to say whether, and where, they differ.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "tensorseal/export.h"

TENSORSEAL_API_BEGIN
namespace tensorseal {

// One source of byte difference.
struct ExplainItem {
  std::string topic;                // a Fact topic, or "format", "metadata", "order.tensors", "data"
  std::string where;                // location (a tensor path, "header", a metadata key...)
  std::optional<std::string> a, b;  // the two values; nullopt where one side lacks it
  std::string explanation;          // a human sentence for the topic
};

struct ExplainReport {
  std::string file_a, file_b;
  // Byte comparison (only when both checkpoints were read from files).
  bool bytes_compared = false;
  bool bytes_identical = false;
  std::uint64_t size_a = 0, size_b = 0;
  std::uint64_t differing_bytes = 0;  // positions that differ, plus the length difference
  std::optional<std::uint64_t> first_differing_byte;
  // Content verdict. Not computed (empty hashes) when the bytes are identical.
  bool same_content = false;
  std::string content_hash_a, content_hash_b;
  std::size_t differing_tensors = 0;  // as `diff` counts them, bit-exact
  std::vector<ExplainItem> differences;
};

// Explains b against a. Stops after the byte comparison when the files are identical.
[[nodiscard]] ExplainReport explain(const Checkpoint& a, const Checkpoint& b);

// The human sentence for a fact topic (a generic one for unknown topics).
[[nodiscard]] std::string explain_topic(std::string_view topic);

// The report as JSON (schema: docs/cli.md, "tseal explain --json").
[[nodiscard]] std::string to_json(const ExplainReport& report);

}  // namespace tensorseal
TENSORSEAL_API_END
