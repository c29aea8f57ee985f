// The shared helpers: util/text.h (UTF-8, latin-1), util/hex.h, shape_text and
// number_text.
#include <tensorseal/diff.h>

#include <cmath>

#include "test_util.h"
#include "util/hex.h"
#include "util/text.h"

namespace tensorseal {
namespace {

TEST(UtilText, Latin1RoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string text = detail::util::latin1_decode(all);
  EXPECT_EQ(text.size(), 128u + 2 * 128u);  // U+0080..U+00FF take two bytes
  EXPECT_EQ(detail::util::code_points(text).size(), 256u);
  EXPECT_EQ(detail::util::code_points(text)[255], 0xFFu);
  EXPECT_EQ(detail::util::latin1_encode(text), all);
}

TEST(UtilText, Latin1EncodeRefusesWhatLatin1CannotHold) {
  EXPECT_EQ(detail::util::latin1_encode("caf\xc3\xa9"), std::string("caf\xe9"));
  EXPECT_FALSE(detail::util::latin1_encode("\xc4\x80"));          // U+0100
  EXPECT_FALSE(detail::util::latin1_encode("\xe1\x88\xb4"));      // U+1234
  EXPECT_FALSE(detail::util::latin1_encode("\xf0\x9f\x98\x80"));  // U+1F600
  EXPECT_FALSE(detail::util::latin1_encode("\xc3"));              // truncated
  EXPECT_FALSE(detail::util::latin1_encode("\xc3\x41"));          // not a continuation byte
  EXPECT_EQ(detail::util::latin1_encode(""), std::string());
}

TEST(UtilText, Utf8OfCodePoints) {
  std::string s;
  for (std::uint32_t cp : {0x41u, 0xE9u, 0x20ACu, 0x1F600u}) detail::util::append_utf8(s, cp);
  EXPECT_EQ(s, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(detail::util::code_points(s), (std::vector<std::uint32_t>{0x41u, 0xE9u, 0x20ACu, 0x1F600u}));
}

TEST(UtilHex, EncodeAndDigits) {
  EXPECT_EQ(detail::util::to_hex(std::string("\x00\x0f\xa5\xff", 4)), "000fa5ff");
  std::string out = "x";
  detail::util::append_hex(out, 0xAB);
  EXPECT_EQ(out, "xab");
  EXPECT_EQ(detail::util::hex_digit('7'), 7);
  EXPECT_EQ(detail::util::hex_digit('c'), 12);
  EXPECT_EQ(detail::util::hex_digit('F'), 15);
  EXPECT_EQ(detail::util::hex_digit('g'), -1);
}

TEST(UtilText, ShapeAndNumberText) {
  EXPECT_EQ(shape_text({}), "[]");
  EXPECT_EQ(shape_text({2, 3}), "[2, 3]");
  EXPECT_EQ(number_text(std::nan("")), "nan");
  EXPECT_EQ(number_text(-INFINITY), "-inf");
  EXPECT_EQ(number_text(INFINITY), "inf");
  EXPECT_EQ(number_text(0.000123456), "0.0001235");
  EXPECT_EQ(number_text(1.0 / 3, 17), "0.33333333333333331");
}

}  // namespace
}  // namespace tensorseal
