// safetensors reader: the header's index (header.cc: grammar, the one validator) made
// into a Value tree. Tensors are zero-copy windows of the input, in data order; a whole
// checkpoint written by tensorseal (__metadata__["tensorseal.structure"]) gets its tree
// back (structure.h).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "safetensors/constants.h"
#include "safetensors/format.h"
#include "safetensors/header.h"
#include "safetensors/structure.h"
#include "util/endian.h"
#include "util/release.h"

namespace tensorseal::detail::safetensors {
using core::fact;

bool detect_safetensors(std::span<const std::byte> b) noexcept {
  if (b.size() < 9) return false;
  const std::uint64_t n = util::load_le<std::uint64_t>(b.data());
  const std::uint64_t window = std::min<std::uint64_t>({b.size(), 8 + std::max<std::uint64_t>(n, 1), 8 + 4096});
  for (std::size_t i = 8; i < window; ++i) {
    const char c = static_cast<char>(b[i]);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{';
  }
  return false;
}

Checkpoint read_safetensors(const io::Input& in) {
  SafetensorsIndex idx = index_safetensors(in);
  // The header is parsed: a mapping's pages of it go back to the kernel (200,000
  // entries are 16 MB of header that nothing reads again).
  if (in.whole->is_mapped()) {
    const std::byte* start = in.bytes().data();
    (void)util::release_pages(start, start + safetensors::kLengthPrefixSize + idx.header_length);
  }
  Checkpoint c;
  c.format = Format::kSafetensors;
  // The header's keys in file order, for explain: the names, "__metadata__" among them.
  std::string key_order;
  auto add_key = [&](std::string_view k) { key_order += (key_order.empty() ? "" : ",") + std::string(k); };
  for (std::size_t i = 0; i <= idx.entries.size(); ++i) {
    if (i == idx.metadata_position) add_key(safetensors::kMetadataKey);
    if (i < idx.entries.size()) add_key(idx.entries[i].name);
  }
  c.metadata = std::move(idx.metadata);

  // Value tree: a plain dict in data order (the order safetensors' writer chose).
  c.root = Value::dict();
  Dict& d = c.root.as_dict();
  d.items.reserve(idx.entries.size());
  for (std::uint32_t i : idx.by_offset) {
    const SafetensorsEntry& e = idx.entries[i];
    d.items.emplace_back(Value::str(e.name), Value(idx.tensor(e)));
  }

  // A whole checkpoint written by tensorseal: restore the tree (structure.h).
  for (auto it = c.metadata.begin(); it != c.metadata.end(); ++it) {
    if (it->first != safetensors::kStructureKey) continue;
    try {
      c.root = safetensors::unflatten(it->second, c.root, in.name, in.options->limits);
    } catch (const nlohmann::json::exception& e) {
      fail(rules::kBadStructure, std::string("tensorseal.structure does not fit the file: ") + e.what(), in,
           safetensors::kLengthPrefixSize);
    }
    c.metadata.erase(it);
    c.facts.push_back(fact(topics::kStructure, "__metadata__", "tensorseal.structure (whole checkpoint)"));
    break;
  }

  // Facts that shape the bytes without being content, for `explain`.
  c.facts.push_back(fact(topics::kHeaderLength, "byte 0", std::to_string(idx.header_length)));
  c.facts.push_back(fact(topics::kHeaderPadding, "header end", fmt::format("{} spaces", idx.header_padding)));
  c.facts.push_back(fact(topics::kKeyOrder, "header", key_order));
  std::string meta_order;
  for (const auto& [k, v] : c.metadata) meta_order += (meta_order.empty() ? "" : ",") + k;
  c.facts.push_back(fact(topics::kMetadataOrder, "__metadata__", meta_order));
  return c;
}

}  // namespace tensorseal::detail::safetensors
