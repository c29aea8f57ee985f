// The one JSON rendering of every tool's report (`--json` in the CLI, the dicts of the
// Python functions): keys in insertion order, two-space indent, invalid UTF-8 in
// strings replaced by U+FFFD. Absent values are written as null, never left out.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tensorseal::detail::tools {

using ojson = nlohmann::ordered_json;

inline std::string dump(const ojson& j) { return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace); }

// The value, or null.
inline ojson or_null(const std::optional<std::string>& s) { return s ? ojson(*s) : ojson(nullptr); }
// The string, or null when it is empty.
inline ojson or_null_if_empty(const std::string& s) { return s.empty() ? ojson(nullptr) : ojson(s); }

}  // namespace tensorseal::detail::tools
