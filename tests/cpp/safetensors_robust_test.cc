// Hostile-input sweeps over a small real safetensors file: every truncation and every
// single-bit flip either parses to a consistent value tree or throws tensorseal::Error
// (with a rule, the file name and an offset inside the file). Never a crash, never
// another exception type.
#include <map>

#include "safetensors/format.h"
#include "test_util.h"

namespace tensorseal {
namespace {

std::string real_file(const char* name) { return testing::read_all(testing::fixture_dir("gen_safetensors") / name); }

// Parses `bytes` through the public API; returns "" for success or the rule.
// Anything other than tensorseal::Error escaping is a test failure.
std::string outcome(const std::string& bytes, const std::string& label) {
  try {
    const Checkpoint c = read_bytes(testing::bytes_of(bytes), label);
    // A successful parse is internally consistent: every tensor validates and its
    // bytes lie inside the input.
    for (const auto& ref : collect_tensors(c.root)) {
      ref.tensor->validate();
      EXPECT_LE(ref.tensor->nbytes(), bytes.size());
      (void)tensor_sha256(*ref.tensor);
    }
    (void)content_hash(c.root);
    return "";
  } catch (const Error& e) {
    EXPECT_FALSE(e.rule().empty());
    EXPECT_EQ(e.file(), label);
    if (e.offset() != kNoOffset) {
      EXPECT_LE(e.offset(), bytes.size()) << e.what();
    }
    return e.rule();
  } catch (const std::exception& e) {
    ADD_FAILURE() << label << ": non-tensorseal exception: " << e.what();
    return "?";
  }
}

// The codec alone (no format detection in front): "" or the rule.
std::string codec_rule(const std::string& bytes) {
  ReadOptions opt;
  detail::io::Input in;
  in.whole = Storage::owned(std::vector<std::byte>(testing::bytes_of(bytes).begin(), testing::bytes_of(bytes).end()));
  in.name = "codec";
  in.options = &opt;
  try {
    (void)detail::safetensors::read_safetensors(in);
  } catch (const Error& e) {
    EXPECT_NE(e.offset(), kNoOffset) << e.what();
    EXPECT_LE(e.offset(), bytes.size()) << e.what();
    return e.rule();
  }
  return "";
}

TEST(SafetensorsRobust, EveryTruncationIsAnError) {
  for (const char* f : {"meta_one.safetensors", "scalars.safetensors", "names.safetensors"}) {
    const std::string whole = real_file(f);
    ASSERT_GT(whole.size(), 16u) << f;
    EXPECT_EQ(outcome(whole, f), "");
    for (std::size_t n = 0; n < whole.size(); ++n) {
      const std::string label = std::string(f) + "[:" + std::to_string(n) + "]";
      const std::string r = outcome(whole.substr(0, n), label);
      // Every proper prefix is broken: the data buffer or the header is incomplete.
      EXPECT_NE(r, "") << label;
      const std::string c = codec_rule(whole.substr(0, n));
      if (n < 8)
        EXPECT_EQ(c, "safetensors/file-too-small") << label;
      else
        EXPECT_TRUE(c == "safetensors/header-length" || c == "safetensors/buffer-length") << label << " -> " << c;
      if (n >= 10 && n < whole.size() && r.starts_with("safetensors/")) {
        // Past the framing, the header or buffer rules name what is missing.
        EXPECT_TRUE(r == "safetensors/header-length" || r == "safetensors/buffer-length" ||
                    r == "safetensors/header-json")
            << label << " -> " << r;
      }
    }
  }
}

TEST(SafetensorsRobust, EverySingleBitFlipIsErrorOrValid) {
  const std::string whole = real_file("meta_one.safetensors");
  ASSERT_EQ(whole.size(), 182u);
  std::map<std::string, int> rules;
  int valid = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string b = whole;
      b[i] = static_cast<char>(b[i] ^ (1 << bit));
      const std::string r = outcome(b, "flip@" + std::to_string(i) + "." + std::to_string(bit));
      const std::string c = codec_rule(b);
      // Detection may turn a broken length into detect/unknown-format; otherwise the
      // public API and the codec agree.
      if (r != "detect/unknown-format") EXPECT_EQ(r, c) << i << "." << bit;
      if (c.empty())
        ++valid;
      else
        ++rules[c];
    }
  }
  // Flips in the data buffer (30 bytes = 240 flips) always parse; flips in the
  // header mostly break a rule. Several different rules must have fired.
  EXPECT_GE(valid, 240);
  EXPECT_GE(rules.size(), 5u);
  EXPECT_GT(rules["safetensors/header-json"], 0);
  EXPECT_GT(rules["safetensors/header-length"] + rules["safetensors/header-too-large"], 0);
}

TEST(SafetensorsRobust, EveryByteValueAtEveryHeaderPosition) {
  // Heavier than bit flips, on the smallest real file: 256 values x header bytes.
  const std::string whole = real_file("scalars.safetensors");
  ASSERT_GT(whole.size(), 16u);
  int errors = 0;
  for (std::size_t i = 8; i < std::min<std::size_t>(whole.size(), 8 + 96); ++i) {
    for (int v = 0; v < 256; ++v) {
      std::string b = whole;
      b[i] = static_cast<char>(v);
      if (!outcome(b, "byte@" + std::to_string(i)).empty()) ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace tensorseal
