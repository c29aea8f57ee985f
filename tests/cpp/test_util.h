// Helpers shared by the C++ tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <tensorseal/tensorseal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
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

// A file of the gen_zip fixtures.
inline std::string zip_fixture(const std::string& name) {
  std::string s = read_all(fixture_dir("gen_zip") / name);
  EXPECT_FALSE(s.empty()) << name << ": run tests/fixtures/gen_zip.py (ctest does it)";
  return s;
}

// Every file directly in `dir`, by name.
inline std::map<std::string, std::string> files_of(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out[e.path().filename().string()] = read_all(e.path());
  return out;
}

// One tensor's entry of a safetensors header, as JSON text.
inline std::string safetensors_entry(std::string_view name, std::string_view dtype, std::string_view shape,
                                     std::string_view offsets) {
  return "\"" + std::string(name) + "\":{\"dtype\":\"" + std::string(dtype) + "\",\"shape\":" + std::string(shape) +
         ",\"data_offsets\":" + std::string(offsets) + "}";
}

// What scan_file reports for a file holding `bytes`, written to the temp directory.
inline ScanReport scan_bytes(const std::string& name, const std::string& bytes) {
  const auto p = std::filesystem::temp_directory_path() / ("tseal-scan-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(p, std::ios::binary) << bytes;
  ScanReport r = scan_file(p);
  std::filesystem::remove(p);
  return r;
}

// The gen_tools fixtures (tests/fixtures/gen_tools.py).
inline std::filesystem::path tools_fixture(const std::string& name) { return fixture_dir("gen_tools") / name; }

inline Value str(std::string s) { return Value::str(std::move(s)); }

// A fresh directory in the temp directory, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "tseal-test-XXXXXX").string();
    if (::mkdtemp(t.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << t;
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // The names of the entries directly inside, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

// The seed's byte strings, kept in the repository (tests/fixtures/vectors/).
inline std::string vectors_dir() {
  return (std::filesystem::path(TENSORSEAL_SOURCE_DIR) / "tests" / "fixtures" / "vectors").string();
}

}  // namespace tensorseal::testing
