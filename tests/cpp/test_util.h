// Helpers shared by the C++ tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <tensorseal/tensorseal.h>

namespace tensorseal::testing {

// Directory of the fixtures made by tests/fixtures/gen_<name>.py (real producers).
inline std::filesystem::path fixture_dir(const std::string& gen_name) {
  const char* root = std::getenv("TENSORSEAL_FIXTURES");
  std::filesystem::path base = root ? root : std::filesystem::path(TENSORSEAL_BINARY_DIR) / "fixtures";
  return base / gen_name;
}

inline std::string read_all(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// Runs `fn` and returns the rule id of the tensorseal::Error it throws ("" if none).
template <typename F>
std::string rule_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.rule();
  }
  return "";
}

inline std::string shared_dir() {
  // shared/ sits beside the repository in development and in CI.
  for (auto p : {std::filesystem::path(TENSORSEAL_SOURCE_DIR) / "shared",
                 std::filesystem::path(TENSORSEAL_SOURCE_DIR) / ".." / "shared"})
    if (std::filesystem::exists(p)) return p.string();
  return "";
}

}  // namespace tensorseal::testing
