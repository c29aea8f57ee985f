// Helpers shared by the C++ tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <tensorseal/tensorseal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "util/hex.h"

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

// Runs `tseal <args>` from the build tree (stderr dropped); returns its exit status (-1
// when it did not exit normally) and, when `out` is given, its stdout.
inline int run_cli(const std::string& args, std::string* out = nullptr) {
  const std::string cmd = std::string(TENSORSEAL_BINARY_DIR) + "/tseal " + args + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  const int status = ::pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// u64le(len(header)) header buffer: a safetensors file around a hand-written header
// (hostile-input tests only; valid files come from the fixture generators).
inline std::string make_safetensors_file(std::string_view header, std::string_view buffer = {}) {
  std::string out;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  out += buffer;
  return out;
}

// Lower-case hex of raw bytes.
inline std::string hex_of(std::string_view s) { return detail::util::to_hex(s); }

// The seed's byte strings, kept in the repository (tests/fixtures/vectors/).
inline std::string vectors_dir() {
  return (std::filesystem::path(TENSORSEAL_SOURCE_DIR) / "tests" / "fixtures" / "vectors").string();
}

}  // namespace tensorseal::testing
