// One test per safetensors reader and writer rule (docs/formats/safetensors.md lists
// each MUST with the test named here). Hostile input is hand-poked from a real small
// file written by safetensors 0.8 (fixture meta_one) or built by hand when the header
// itself is the hostile part. Every error must name the rule, the file and a byte offset.
#include <unistd.h>

#include <optional>

#include "safetensors/constants.h"
#include "safetensors/format.h"
#include "safetensors/header.h"
#include "test_util.h"
#include "util/endian.h"

namespace tensorseal {
namespace {

constexpr const char* kName = "poked.safetensors";

// The real file: {"__metadata__":{"format":"pt"},"w":F32[2,3] @[0,24],"b":F16[3] @[24,30]}
std::string real_file() {
  const auto s = testing::read_all(testing::fixture_dir("gen_safetensors") / "meta_one.safetensors");
  EXPECT_EQ(s.size(), 182u) << "fixture meta_one.safetensors changed";
  return s;
}

using testing::make_safetensors_file;
std::string make_file_n(std::uint64_t n, std::string_view rest) {
  std::string out;
  detail::util::append_le<std::uint64_t>(out, n);
  out += rest;
  return out;
}

// Replaces `from` by `to` (same length) once; the header length stays valid.
std::string poke(std::string s, std::string_view from, std::string_view to) {
  EXPECT_EQ(from.size(), to.size());
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

Checkpoint read_codec(const std::string& bytes, const ReadOptions& opt = {}) {
  detail::io::Input in;
  in.whole = Storage::owned(std::vector<std::byte>(testing::bytes_of(bytes).begin(), testing::bytes_of(bytes).end()));
  in.name = kName;
  in.options = &opt;
  return detail::safetensors::read_safetensors(in);
}

std::optional<Error> error_of(const std::string& bytes, const ReadOptions& opt = {}) {
  try {
    read_codec(bytes, opt);
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// Asserts the exact rule, that the message names the file and a byte offset inside
// the file, and (when `offset` is given) that offset. Through the public read_bytes
// too whenever detection recognises the bytes as safetensors.
void expect_rule(const std::string& bytes, const Rule& rule, std::optional<std::uint64_t> offset = std::nullopt,
                 const ReadOptions& opt = {}) {
  EXPECT_EQ(testing::rule_of([&] { read_codec(bytes, opt); }), rule.id);
  const auto e = error_of(bytes, opt);
  ASSERT_TRUE(e.has_value()) << "no error, expected " << rule.id;
  EXPECT_EQ(e->kind(), rule.kind);
  EXPECT_EQ(e->file(), kName);
  ASSERT_NE(e->offset(), kNoOffset) << e->what();
  EXPECT_LE(e->offset(), bytes.size()) << e->what();
  if (offset) EXPECT_EQ(e->offset(), *offset) << e->what();
  const std::string what = e->what();
  const std::string prefix =
      std::string(kName) + ": byte " + std::to_string(e->offset()) + ": [" + std::string(rule.id) + "] ";
  EXPECT_EQ(what.substr(0, prefix.size()), prefix);
  EXPECT_GT(what.size(), prefix.size());
  EXPECT_EQ(what.find('\n'), std::string::npos);
  if (detect_format(testing::bytes_of(bytes)) == Format::kSafetensors)
    EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(bytes), kName, opt); }), rule.id);
  // The header index (lazy access) is the same validator: the same error, word for word,
  // also when the fast scanner is skipped.
  std::string index_what, slow_what;
  try {
    (void)read_safetensors_index(testing::bytes_of(bytes), kName, opt);
  } catch (const Error& x) {
    index_what = x.what();
  }
  try {
    detail::io::Input in;
    in.whole = Storage::owned(std::vector<std::byte>(testing::bytes_of(bytes).begin(), testing::bytes_of(bytes).end()));
    in.name = kName;
    in.options = &opt;
    (void)detail::safetensors::index_safetensors(in, /*fast_scan=*/false);
  } catch (const Error& x) {
    slow_what = x.what();
  }
  if (rule.id != detail::safetensors::rules::kBadStructure.id) {  // the tree, not the header: read_file only
    EXPECT_EQ(index_what, what);
    EXPECT_EQ(slow_what, what);
  }
}

// ---- the baseline -----------------------------------------------------------------

TEST(SafetensorsRules, RealFileIsValid) {
  const Checkpoint c = read_codec(real_file());
  EXPECT_EQ(c.root.as_dict().items.size(), 2u);
  EXPECT_EQ(c.metadata.size(), 1u);
}

TEST(SafetensorsRules, HandBuiltMinimalFileIsValid) {
  // The hand-built helper makes valid files, so the hostile variants below fail for
  // the one reason they poke.
  const std::string f =
      make_safetensors_file("{" + testing::safetensors_entry("a", "I32", "[2]", "[0,8]") + "}", std::string(8, '\1'));
  const Checkpoint c = read_codec(f);
  ASSERT_EQ(c.root.as_dict().items.size(), 1u);
  EXPECT_EQ(c.root.as_dict().items[0].second.as_tensor()->shape, (std::vector<std::int64_t>{2}));
}

// ---- file / header framing ----------------------------------------------------------

TEST(SafetensorsRules, FileTooSmall) {
  for (std::size_t n = 0; n < 8; ++n) {
    SCOPED_TRACE(n);
    expect_rule(real_file().substr(0, n), detail::safetensors::rules::kFileTooSmall, 0);
  }
}

TEST(SafetensorsRules, HeaderTooLarge) {
  // Over safetensors' own cap of 100,000,000 bytes, however long the file is.
  expect_rule(make_file_n(100'000'001, "{}"), detail::safetensors::rules::kHeaderTooLarge, 0);
  expect_rule(make_file_n(~std::uint64_t{0}, "{}"), detail::safetensors::rules::kHeaderTooLarge, 0);
  // Exactly the cap is not "too large" (it runs past the end instead).
  expect_rule(make_file_n(100'000'000, "{}"), detail::safetensors::rules::kHeaderLength, 0);
  // Limits::max_safetensors_header lowers the cap.
  ReadOptions small;
  small.limits.max_safetensors_header = 64;
  expect_rule(real_file(), detail::safetensors::rules::kHeaderTooLarge, 0, small);
  EXPECT_EQ(error_of(real_file(), small)->kind(), ErrorKind::kLimit);
}

TEST(SafetensorsRules, HeaderLength) {
  std::string f = real_file();
  // N claims more bytes than the file holds after the prefix.
  std::string longer = f;
  longer.replace(0, 8, make_file_n(f.size() - 8 + 1, ""));
  expect_rule(longer, detail::safetensors::rules::kHeaderLength, 0);
  expect_rule(make_file_n(3, "{}"), detail::safetensors::rules::kHeaderLength, 0);
}

TEST(SafetensorsRules, HeaderUtf8) {
  const std::string f = real_file();
  // A 0xff byte inside the tensor name "w" (header byte 33 -> file byte 41).
  const auto at = f.find("\"w\"") + 1;
  std::string bad = f;
  bad[at] = '\xff';
  expect_rule(bad, detail::safetensors::rules::kHeaderUtf8, at);
  // Overlong encoding of '/', an unpaired surrogate, a truncated sequence.
  for (std::string_view seq :
       {std::string_view("\xc0\xaf"), std::string_view("\xed\xa0\x80"), std::string_view("\xe6\x97")}) {
    const std::string h = "{\"__metadata__\":{\"k\":\"" + std::string(seq) + "\"}}";
    expect_rule(make_safetensors_file(h), detail::safetensors::rules::kHeaderUtf8, 8 + h.find(seq));
  }
}

TEST(SafetensorsRules, HeaderJson) {
  const std::string f = real_file();
  // The closing brace replaced by a space: the JSON object never ends.
  const auto close = f.rfind('}');
  std::string bad = f;
  bad[close] = ' ';
  expect_rule(bad, detail::safetensors::rules::kHeaderJson);
  EXPECT_GE(error_of(bad)->offset(), 8u);
  EXPECT_LE(error_of(bad)->offset(), 8u + 0x90);
  // Padding with NUL instead of spaces is not JSON whitespace.
  std::string nul = f;
  nul[8 + 0x90 - 1] = '\0';
  expect_rule(nul, detail::safetensors::rules::kHeaderJson, 8 + 0x90 - 1);
  // NUL then anything: serde says "trailing characters"; nothing may hide after a NUL.
  expect_rule(make_safetensors_file(std::string("{}\0junk", 7)), detail::safetensors::rules::kHeaderJson, 10);
  expect_rule(make_safetensors_file(std::string("{\"a\":\"\0\"}", 8)), detail::safetensors::rules::kHeaderJson, 14);
  // Garbage, an empty header, a trailing comma, single quotes.
  for (std::string_view h : {"{\"a\":tru}", "", "{\"a\":1,}", "{'a':1}", "{\"a\":1} x", "{\"a\":\"\x01\"}"}) {
    SCOPED_TRACE(h);
    expect_rule(make_safetensors_file(h), detail::safetensors::rules::kHeaderJson);
  }
  EXPECT_EQ(error_of(make_safetensors_file(""))->offset(), 8u);
}

TEST(SafetensorsRules, HeaderJsonNestingIsCappedLikeSerde) {
  // safetensors 0.8 accepts 127 nested levels (root object + entry + 125 arrays) and
  // rejects 128 (serde_json's recursion limit).
  auto nested = [](int arrays) {
    return make_safetensors_file("{\"x\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"e\":" +
                                 std::string(arrays, '[') + std::string(arrays, ']') + "}}");
  };
  EXPECT_NO_THROW(read_codec(nested(125)));
  expect_rule(nested(126), detail::safetensors::rules::kHeaderJson, 8);
  expect_rule(nested(100000), detail::safetensors::rules::kHeaderJson, 8);
}

TEST(SafetensorsRules, HeaderNotObject) {
  for (std::string_view h : {"[]", "null", "\"str\"", "123", "  [1,2]  "}) {
    SCOPED_TRACE(h);
    expect_rule(make_safetensors_file(h), detail::safetensors::rules::kHeaderNotObject, 8);
  }
}

TEST(SafetensorsRules, DuplicateKey) {
  const std::string a = testing::safetensors_entry("a", "U8", "[1]", "[0,1]");
  expect_rule(make_safetensors_file("{" + a + "," + testing::safetensors_entry("a", "U8", "[1]", "[1,2]") + "}", "xy"),
              detail::safetensors::rules::kDuplicateKey, 8);
  // Twice __metadata__, and a duplicate field inside an entry (which would otherwise
  // let the last "dtype" silently win).
  expect_rule(make_safetensors_file("{\"__metadata__\":{},\"__metadata__\":{}}"),
              detail::safetensors::rules::kDuplicateKey, 8);
  expect_rule(
      make_safetensors_file("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "x"),
      detail::safetensors::rules::kDuplicateKey, 8);
  expect_rule(make_safetensors_file("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}"),
              detail::safetensors::rules::kDuplicateKey, 8);
}

TEST(SafetensorsRules, MetadataType) {
  for (std::string_view m : {"{\"k\":1}", "{\"k\":null}", "{\"k\":[\"v\"]}", "[]", "\"x\"", "7"}) {
    SCOPED_TRACE(m);
    expect_rule(make_safetensors_file("{\"__metadata__\":" + std::string(m) + "}"),
                detail::safetensors::rules::kMetadataType, 8);
  }
  // null and {} are accepted and mean "no metadata".
  EXPECT_TRUE(read_codec(make_safetensors_file("{\"__metadata__\":null}")).metadata.empty());
  EXPECT_TRUE(read_codec(make_safetensors_file("{\"__metadata__\":{}}")).metadata.empty());
}

TEST(SafetensorsRules, EntryType) {
  for (std::string_view e :
       {"\"a\":1", "\"a\":[]", "\"a\":\"F32\"", "\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}",
        "\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}", "\"a\":{\"dtype\":\"U8\",\"shape\":[1]}",
        "\"a\":{\"dtype\":8,\"shape\":[1],\"data_offsets\":[0,1]}"}) {
    SCOPED_TRACE(e);
    expect_rule(make_safetensors_file("{" + std::string(e) + "}", "x"), detail::safetensors::rules::kEntryType, 8);
  }
}

TEST(SafetensorsRules, UnknownDtype) {
  expect_rule(poke(real_file(), "\"F32\"", "\"F31\""), detail::safetensors::rules::kUnknownDtype, 8);
  expect_rule(poke(real_file(), "\"F32\"", "\"f32\""), detail::safetensors::rules::kUnknownDtype, 8);
  expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "", "[1]", "[0,1]") + "}", "x"),
              detail::safetensors::rules::kUnknownDtype, 8);
  expect_rule(
      make_safetensors_file("{" + testing::safetensors_entry("a", "C128", "[1]", "[0,16]") + "}", std::string(16, 'x')),
      detail::safetensors::rules::kUnknownDtype, 8);
}

TEST(SafetensorsRules, BadShape) {
  // A float where a size belongs, poked into the real file.
  expect_rule(poke(real_file(), "[2,3]", "[6e0]"), detail::safetensors::rules::kBadShape, 8);
  for (std::string_view s : {"\"x\"", "[-1]", "[-0]", "[1.5]", "[1e2]", "[true]", "[\"2\"]", "{}",
                             "[9223372036854775808]", "[18446744073709551616]"}) {
    SCOPED_TRACE(s);
    expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "U8", s, "[0,1]") + "}", "x"),
                detail::safetensors::rules::kBadShape, 8);
  }
  // More dimensions than Limits::max_ndim (64 by default).
  std::string many = "[1";
  for (int i = 1; i < 65; ++i) many += ",1";
  many += "]";
  expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "U8", many, "[0,1]") + "}", "x"),
              detail::safetensors::rules::kBadShape, 8);
  ReadOptions two;
  two.limits.max_ndim = 1;
  expect_rule(real_file(), detail::safetensors::rules::kBadShape, 8, two);
}

TEST(SafetensorsRules, BadOffsets) {
  for (std::string_view o :
       {"[0]", "[0,1,2]", "[-1,0]", "[\"0\",\"1\"]", "[0.0,1]", "{}", "null", "[0,18446744073709551616]"}) {
    SCOPED_TRACE(o);
    expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "U8", "[1]", o) + "}", "x"),
                detail::safetensors::rules::kBadOffsets, 8);
  }
  // begin > end.
  expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "U8", "[0]", "[1,0]") + "}", "x"),
              detail::safetensors::rules::kBadOffsets, 8);
}

TEST(SafetensorsRules, SizeOverflow) {
  // Element count overflows 64 bits.
  expect_rule(make_safetensors_file(
                  "{" + testing::safetensors_entry("a", "U8", "[4294967296,4294967296,2]", "[0,1]") + "}", "x"),
              detail::safetensors::rules::kSizeOverflow, 8);
  // Element count fits but count * bits does not (2^61 elements of 64 bits).
  expect_rule(
      make_safetensors_file("{" + testing::safetensors_entry("a", "F64", "[2305843009213693952]", "[0,8]") + "}",
                            std::string(8, 'x')),
      detail::safetensors::rules::kSizeOverflow, 8);
  // A zero dimension makes the product 0 even after huge ones: no overflow.
  EXPECT_EQ(read_codec(make_safetensors_file(
                           "{" + testing::safetensors_entry("a", "F64", "[0,9223372036854775807]", "[0,0]") + "}"))
                .root.as_dict()
                .items[0]
                .second.as_tensor()
                ->numel(),
            0u);
}

TEST(SafetensorsRules, SizeMismatch) {
  // F32 [2,3] needs 24 bytes; make it [2,2] (16 bytes) over the same offsets.
  expect_rule(poke(real_file(), "[2,3]", "[2,2]"), detail::safetensors::rules::kSizeMismatch, 8);
  // The dtype changed under the same offsets: F16 [2,3] is 12 bytes, not 24.
  expect_rule(poke(real_file(), "\"F32\"", "\"F16\""), detail::safetensors::rules::kSizeMismatch, 8);
  // Scalar of F32 is 4 bytes.
  expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "F32", "[]", "[0,2]") + "}", "xx"),
              detail::safetensors::rules::kSizeMismatch, 8);
}

TEST(SafetensorsRules, MisalignedSubByte) {
  // 3 fp4 values are 12 bits; 2 fp6 values are 12 bits.
  expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "F4", "[3]", "[0,2]") + "}", "xx"),
              detail::safetensors::rules::kMisaligned, 8);
  expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "F6_E2M3", "[2]", "[0,2]") + "}", "xx"),
              detail::safetensors::rules::kMisaligned, 8);
  expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "F6_E3M2", "[1]", "[0,1]") + "}", "x"),
              detail::safetensors::rules::kMisaligned, 8);
  // Whole bytes are fine: 4 fp6 values are 3 bytes, 2 fp4 values 1 byte, 2x3 fp4 3 bytes.
  const Checkpoint ok =
      read_codec(make_safetensors_file("{" + testing::safetensors_entry("a", "F6_E2M3", "[4]", "[0,3]") + "," +
                                           testing::safetensors_entry("b", "F4", "[2]", "[3,4]") + "," +
                                           testing::safetensors_entry("c", "F4", "[2,3]", "[4,7]") + "}",
                                       "abcdefg"));
  const Dict& d = ok.root.as_dict();
  EXPECT_EQ(d.find(std::string_view("a"))->as_tensor()->dtype, DType::kFloat6E2M3FN);
  EXPECT_EQ(d.find(std::string_view("a"))->as_tensor()->nbytes(), 3u);
  // An even last dimension is torch's float4_e2m1fn_x2 (two fp4 per element), as
  // safetensors' torch binding reads it; an odd one stays packed float4_e2m1fn.
  const Tensor& b = *d.find(std::string_view("b"))->as_tensor();
  EXPECT_EQ(b.dtype, DType::kFloat4E2M1FNx2);
  EXPECT_EQ(b.shape, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(tensor_sha256(b), sha256_hex(testing::bytes_of(std::string("d"))));
  const Tensor& c = *d.find(std::string_view("c"))->as_tensor();
  EXPECT_EQ(c.dtype, DType::kFloat4E2M1FN);
  EXPECT_EQ(c.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(tensor_sha256(c), sha256_hex(testing::bytes_of(std::string("efg"))));
}

TEST(SafetensorsRules, OffsetsTiling) {
  // A gap: b starts at 26 instead of 24 (the buffer still ends at 30... b's size
  // stays 6 only if end moves too, so poke both).
  const std::string gap = poke(real_file(), "[24,30]", "[26,32]");
  // header byte count unchanged; file data start = 8 + 0x90 = 152.
  expect_rule(gap, detail::safetensors::rules::kTiling, 152 + 24);
  // An overlap: b starts inside w.
  expect_rule(poke(real_file(), "[24,30]", "[20,26]"), detail::safetensors::rules::kTiling, 152 + 20);
  // Not starting at 0.
  expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "U8", "[1]", "[1,2]") + "}", "xy"),
              detail::safetensors::rules::kTiling);
  // Two tensors at the same place.
  expect_rule(make_safetensors_file("{" + testing::safetensors_entry("a", "U8", "[1]", "[0,1]") + "," +
                                        testing::safetensors_entry("b", "U8", "[1]", "[0,1]") + "}",
                                    "x"),
              detail::safetensors::rules::kTiling);
  // Hostile offsets far past the file still report an offset inside the file.
  expect_rule(make_safetensors_file(
                  "{" + testing::safetensors_entry("a", "U8", "[1]", "[0,1]") + "," +
                      testing::safetensors_entry("b", "U8", "[1]", "[18446744073709551613,18446744073709551614]") + "}",
                  "x"),
              detail::safetensors::rules::kTiling);
  // Zero-size tensors may sit anywhere a boundary is (safetensors does the same).
  EXPECT_NO_THROW(read_codec(make_safetensors_file("{" + testing::safetensors_entry("a", "U8", "[1]", "[0,1]") + "," +
                                                       testing::safetensors_entry("z", "U8", "[0]", "[1,1]") + "," +
                                                       testing::safetensors_entry("y", "U8", "[0]", "[0,0]") + "}",
                                                   "x")));
}

TEST(SafetensorsRules, BufferLength) {
  // Trailing bytes after the last tensor (e.g. a polyglot appended file).
  expect_rule(real_file() + "PK", detail::safetensors::rules::kBufferLength, 152 + 30);
  // A buffer shorter than the tensors claim.
  expect_rule(real_file().substr(0, 181), detail::safetensors::rules::kBufferLength, 152 + 29);
  // No tensors but data bytes.
  expect_rule(make_safetensors_file("{}", "x"), detail::safetensors::rules::kBufferLength, 10);
  EXPECT_NO_THROW(read_codec(make_safetensors_file("{}")));
}

TEST(SafetensorsRules, TooManyTensors) {
  ReadOptions one;
  one.limits.max_entries = 1;
  expect_rule(real_file(), detail::safetensors::rules::kTooManyTensors, 8, one);
  EXPECT_EQ(error_of(real_file(), one)->kind(), ErrorKind::kLimit);
  ReadOptions two;
  two.limits.max_entries = 3;  // 2 tensors + __metadata__
  EXPECT_NO_THROW(read_codec(real_file(), two));
}

// ---- leniency that matches safetensors ------------------------------------------------

TEST(SafetensorsRules, AcceptsJsonWhitespaceAndAnyKeyOrder) {
  const std::string h =
      " \n\t{\"a\" : { \"data_offsets\" : [0, 2], \"shape\":[2] ,\"dtype\":\"U8\", \"extra\": {\"x\":[1]}} }\r\n ";
  const Checkpoint c = read_codec(make_safetensors_file(h, "ab"));
  ASSERT_EQ(c.root.as_dict().items.size(), 1u);
  EXPECT_EQ(c.root.as_dict().items[0].second.as_tensor()->dtype, DType::kUInt8);
}

TEST(SafetensorsRules, DictIsInOffsetOrderNotHeaderOrder) {
  const Checkpoint c =
      read_codec(make_safetensors_file("{" + testing::safetensors_entry("z", "U8", "[1]", "[1,2]") + "," +
                                           testing::safetensors_entry("a", "U8", "[1]", "[0,1]") + "}",
                                       "AZ"));
  const Dict& d = c.root.as_dict();
  ASSERT_EQ(d.items.size(), 2u);
  EXPECT_EQ(d.items[0].first.as_str(), "a");
  EXPECT_EQ(d.items[1].first.as_str(), "z");
}

// ---- writer rules -------------------------------------------------------------------

std::shared_ptr<Tensor> u8_tensor(std::vector<std::int64_t> shape, std::size_t n) {
  return make_contiguous(DType::kUInt8, std::move(shape), Storage::owned(std::vector<std::byte>(n, std::byte{7})));
}

TEST(SafetensorsWriterRules, NotFlat) {
  // Nested trees, non-str keys and non-tensor values are written as a whole checkpoint
  // (flat tensors + __metadata__["tensorseal.structure"], src/safetensors/structure.h).
  // What safetensors cannot hold at all is a bare storage.
  auto storage = Storage::owned(std::vector<std::byte>(4), DType::kFloat32);
  Value in_dict = Value::dict();
  in_dict.as_dict().set(Value::str("s"), Value(storage));
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(in_dict, Format::kSafetensors); }),
            detail::safetensors::rules::kNotFlat.id);
  Value in_list = Value::list({Value(storage)});
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(in_list, Format::kSafetensors); }),
            detail::safetensors::rules::kNotFlat.id);
}

TEST(SafetensorsWriterRules, DtypeUnsupported) {
  for (DType d : {DType::kComplex128, DType::kComplex32, DType::kQInt8, DType::kUInt4, DType::kBits8}) {
    SCOPED_TRACE(std::string(name(d)));
    Value v = Value::dict();
    auto t = make_contiguous(d, {1}, Storage::owned(std::vector<std::byte>(16)));
    v.as_dict().set(Value::str("t"), Value(t));
    EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(v, Format::kSafetensors); }),
              detail::safetensors::rules::kDtypeUnsupported.id);
  }
}

TEST(SafetensorsWriterRules, ReservedName) {
  Value v = Value::dict();
  v.as_dict().set(Value::str("__metadata__"), Value(u8_tensor({1}, 1)));
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(v, Format::kSafetensors); }),
            detail::safetensors::rules::kReservedName.id);
}

TEST(SafetensorsWriterRules, HeaderTooLarge) {
  // A header over 100,000,000 bytes would be unreadable (by safetensors and by us):
  // the writer refuses it, as safetensors' serialize() does.
  Value v = Value::dict();
  for (int i = 0; i < 100; ++i) {
    std::string name(1'000'000, 'n');
    name += std::to_string(i);
    v.as_dict().set(Value::str(std::move(name)), Value(u8_tensor({0}, 0)));
  }
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(v, Format::kSafetensors); }),
            detail::safetensors::rules::kHeaderTooLarge.id);
  v.as_dict().items.resize(99);  // 99 MB of names: fine
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(v, Format::kSafetensors); }), "");
}

TEST(SafetensorsWriterRules, DuplicateMetadataKey) {
  Value v = Value::dict();
  WriteOptions o;
  o.metadata = {{"k", "1"}, {"k", "2"}};
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(v, Format::kSafetensors, o); }),
            detail::safetensors::rules::kDuplicateKey.id);
}

TEST(SafetensorsWriterRules, InvalidTensorIsRejectedBeforeWriting) {
  Value v = Value::dict();
  auto t = u8_tensor({4}, 2);  // view reaches past its 2-byte storage
  v.as_dict().set(Value::str("t"), Value(t));
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(v, Format::kSafetensors); }), rules::kViewOutOfBounds.id);
  // And write_file leaves nothing behind.
  const auto dir = std::filesystem::temp_directory_path() / ("tseal_st_rules_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_EQ(testing::rule_of([&] { write_file(v, dir / "x.safetensors", Format::kSafetensors); }),
            rules::kViewOutOfBounds.id);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tensorseal
