// tensorseal's DEFLATE encoder (src/zip/deflate.h): every stream inflates back to its
// input (zlib's inflate), each block takes the smallest form, and the bytes are
// pinned by golden digests (docs/formats/npy.md, "Compressed members").
#include "zip/deflate.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hash/digest.h"
#include "util/hex.h"
#include "zip/inflate.h"

namespace tensorseal {
namespace {

using detail::zip::deflate;
using detail::zip::inflate_bounded;

std::vector<std::byte> bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), reinterpret_cast<const std::byte*>(s.data()) + s.size()};
}

// xorshift64: the same sequence on every machine.
std::vector<std::byte> noise(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> out(n);
  for (auto& b : out) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    b = static_cast<std::byte>(seed >> 56);
  }
  return out;
}

// float32 values with a narrow spread (a trained layer's weights): some redundancy in
// the exponent bytes, little in the mantissas.
std::vector<std::byte> floats(std::size_t n) {
  std::vector<std::byte> out;
  const auto r = noise(n * 2, 7);
  for (std::size_t i = 0; i < n; ++i) {
    const float f = (static_cast<int>(r[2 * i]) - 128) / 1024.0f + static_cast<int>(r[2 * i + 1]) / 65536.0f;
    const auto* p = reinterpret_cast<const std::byte*>(&f);
    out.insert(out.end(), p, p + 4);
  }
  return out;
}

std::vector<std::byte> text(std::size_t n) {
  const std::string words[] = {"tensor ", "storage ", "canonical ", "npz ", "member ", "deflate ", "\n"};
  std::string s;
  const auto r = noise(n, 3);
  for (std::size_t i = 0; s.size() < n; ++i) s += words[static_cast<unsigned>(r[i % n]) % 7];
  s.resize(n);
  return bytes(s);
}

std::vector<std::byte> inflated(const std::vector<std::byte>& stream, std::uint64_t max_out) {
  const auto r = inflate_bounded(stream, max_out);
  EXPECT_TRUE(r.ended && !r.invalid && !r.over);
  EXPECT_EQ(r.consumed, stream.size());  // nothing after the final block
  return r.data;
}

std::string sha256(const std::vector<std::byte>& b) {
  return detail::util::to_hex(detail::hash::Digest::oneshot(HashAlgo::kSha256, b));
}

struct Case {
  const char* name;
  std::vector<std::byte> input;
};

std::vector<Case> cases() {
  std::vector<std::byte> pattern;
  for (int i = 0; i < 300000; ++i) pattern.push_back(static_cast<std::byte>((i * 7) % 251));
  std::vector<std::byte> mixed = noise(70000, 11);
  mixed.resize(mixed.size() + 200000, std::byte{0});  // incompressible, then a block boundary of zeros
  return {
      {"empty", {}},
      {"one", bytes("x")},
      {"short", bytes("abcabcabcabcabcabc")},
      {"zeros_1m", std::vector<std::byte>(1 << 20, std::byte{0})},
      {"noise_300k", noise(300000, 1)},
      {"floats_100k", floats(100000)},
      {"text_500k", text(500000)},
      {"pattern_300k", pattern},
      {"mixed", mixed},
  };
}

TEST(Deflate, InflatesBackToItsInput) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto stream = deflate(c.input);
    EXPECT_EQ(inflated(stream, c.input.size() + 1), c.input);
  }
}

TEST(Deflate, EveryBlockTakesItsSmallestForm) {
  // Incompressible data is stored: 5 bytes per piece of at most 65535 (plus the
  // block boundaries of kBlockInput = 128 KiB), never larger than the input by more.
  const auto n = noise(300000, 1);
  EXPECT_LE(deflate(n).size(), n.size() + 5 * (300000 / 65535 + 3));
  // Runs compress to a few bits per 258 bytes.
  EXPECT_LT(deflate(std::vector<std::byte>(1 << 20, std::byte{0})).size(), 1200u);
  // An empty input is one fixed block with only end-of-block, as zlib writes it.
  EXPECT_EQ(deflate({}), (std::vector<std::byte>{std::byte{0x03}, std::byte{0x00}}));
  // Text compresses at least as well as a third of its size.
  const auto t = text(500000);
  EXPECT_LT(deflate(t).size(), t.size() / 3);
}

TEST(Deflate, GoldenDigests) {
  // The encoder's bytes are part of the canonical .npz format: a change here is a new
  // format version (docs/formats/npy.md).
  const std::vector<std::pair<std::string, std::string>> golden = {
      {"empty", "9b4fb24edd6d1d8830e272398263cdbf026b97392cc35387b991dc0248a628f9 2"},
      {"one", "f5b976feaac71fd875e2850ce8a0f229ad2fe83beab9d1284fe2a75f1e172a56 3"},
      {"short", "b34592256953026d04c9943a41435776309344459f80b37f82fa091393b9b6cb 6"},
      {"zeros_1m", "7916653e7bd6c9e82ccf8b61cddc53808a0f20989298e02f4cf2d9c625e5b280 1135"},
      {"noise_300k", "3e242c468fe25d1c2c4ddf61a24d16bf5d93b67f9790a4930d69d08fb2e1925a 300035"},
      {"floats_100k", "75ab83ee51cbd1ef699dc02bf66cd1383256c4d631f5a7fb0563312fb30a7dcc 248584"},
      {"text_500k", "b133de50b8d9d9176fd529bb8f19bd487ee3f758d3bf526736c14a176a5645eb 50380"},
      {"pattern_300k", "4f0aaa84e246fd92f87fd204d70553c67193771a9e47200f91367c0f772044f3 1512"},
      {"mixed", "fcfb229eacd03d1fc3717b74b428b0197606ab1f3bbeecb7b72736c75b23e7ba 70594"},
  };
  const auto cs = cases();
  ASSERT_EQ(cs.size(), golden.size());
  for (std::size_t i = 0; i < cs.size(); ++i) {
    SCOPED_TRACE(cs[i].name);
    ASSERT_EQ(golden[i].first, cs[i].name);
    const auto stream = deflate(cs[i].input);
    EXPECT_EQ(deflate(cs[i].input), stream);  // the same bytes twice in one process
    EXPECT_EQ(sha256(stream) + " " + std::to_string(stream.size()), golden[i].second);
  }
}

}  // namespace
}  // namespace tensorseal
