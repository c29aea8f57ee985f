// The fixture generators' manifests, for the tests that compare against them (apart
// from test_util.h, so that only those tests compile nlohmann/json).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace tensorseal::testing {

// A fixture generator's manifest.json (an empty object when the generator wrote none).
inline nlohmann::json fixture_manifest(const std::string& gen_name) {
  const auto text = read_all(fixture_dir(gen_name) / "manifest.json");
  return text.empty() ? nlohmann::json::object() : nlohmann::json::parse(text);
}

}  // namespace tensorseal::testing
