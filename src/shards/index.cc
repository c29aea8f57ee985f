// Shard index parser. Grammar (constants.h):
//   index = { "weight_map": { name: file, ... }, ["metadata": { "total_size": N, ... }], ... }
// Unknown top-level keys are allowed (producers add none today, readers ignore them).
// Duplicate keys anywhere are refused: JSON parsers disagree on which one wins.
#include "shards/index.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "shards/constants.h"
#include "tensorseal/error.h"

namespace tensorseal::detail::shards {
using json = nlohmann::ordered_json;

namespace {

[[noreturn]] void index_shape_error(const std::string& name, const std::string& detail) {
  throw Error(rules::kIndexShape, detail, name);
}

// "indent N" from the spaces before the first key, "compact" without a newline there.
std::string formatting_of(std::string_view text) {
  std::string out;
  const auto nl = text.find('\n');
  const auto brace = text.find('{');
  if (nl == std::string_view::npos || brace == std::string_view::npos || nl < brace)
    out = "compact";
  else {
    std::size_t i = nl + 1, n = 0;
    while (i < text.size() && text[i] == ' ') ++i, ++n;
    out = fmt::format("indent {}", n);
  }
  out += text.ends_with('\n') ? ", trailing newline" : ", no trailing newline";
  return out;
}

std::uint64_t total_size_of(const json& v, const std::string& name) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  // Some producers wrote it as a float (1234.0); accept integral values only.
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d >= 0 && d < 1.8e19 && std::floor(d) == d) return static_cast<std::uint64_t>(d);
  }
  index_shape_error(name, "metadata.total_size is " + v.dump() + ", not a byte count");
}

}  // namespace

ShardIndex parse_index(std::span<const std::byte> bytes, const std::string& name) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  // Keys seen per open object, to refuse duplicates (the parser would keep one silently).
  std::vector<std::set<std::string>> open;
  std::string duplicate;
  auto cb = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start)
      open.emplace_back();
    else if (event == json::parse_event_t::object_end)
      open.pop_back();
    else if (event == json::parse_event_t::key && !open.empty() && duplicate.empty()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!open.back().insert(k).second) duplicate = k;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb);
  } catch (const json::parse_error& e) {
    throw Error(rules::kIndexJson, std::string("not JSON: ") + e.what(), name, e.byte > 0 ? e.byte - 1 : 0);
  }
  if (!duplicate.empty()) throw Error(rules::kIndexJson, "key '" + duplicate + "' appears twice", name);
  if (!j.is_object()) index_shape_error(name, "the index is not a JSON object");

  ShardIndex idx;
  idx.formatting = formatting_of(text);
  const auto wm = j.find(shards::kWeightMapKey);
  if (wm == j.end() || !wm->is_object()) index_shape_error(name, "no \"weight_map\" object");
  idx.weight_map.reserve(wm->size());
  for (const auto& [k, v] : wm->items()) {
    if (!v.is_string()) index_shape_error(name, "weight_map['" + k + "'] is " + v.dump() + ", not a file name");
    idx.weight_map.emplace_back(k, v.get<std::string>());
  }
  if (const auto meta = j.find(shards::kMetadataKey); meta != j.end() && !meta->is_null()) {
    if (!meta->is_object()) index_shape_error(name, "\"metadata\" is not an object");
    for (const auto& [k, v] : meta->items()) {
      if (k == shards::kTotalSizeKey)
        idx.total_size = total_size_of(v, name);
      else
        idx.other_metadata.emplace_back(k, v.dump());
    }
  }
  return idx;
}

}  // namespace tensorseal::detail::shards
