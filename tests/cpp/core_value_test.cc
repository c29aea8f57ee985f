// Value tree, Dict semantics, BigInt, equality, collect_tensors, repr, and Error rendering.
#include <cmath>
#include <cstring>

#include "test_util.h"

namespace tensorseal {
namespace {

// ---- Dict -------------------------------------------------------------------------

TEST(CoreValue, DictSetReplacesAndKeepsOrder) {
  Value v = Value::dict();
  Dict& d = v.as_dict();
  d.set(testing::str("b"), Value(1));
  d.set(testing::str("a"), Value(2));
  d.set(Value(7), Value(3));
  d.set(testing::str("b"), Value(10));  // replace: stays first
  ASSERT_EQ(d.items.size(), 3u);
  EXPECT_EQ(d.items[0].first.as_str(), "b");
  EXPECT_EQ(d.items[0].second.as_int(), 10);
  EXPECT_EQ(d.items[1].first.as_str(), "a");
  EXPECT_EQ(d.items[2].first.as_int(), 7);
  EXPECT_EQ(d.find(std::string_view("a"))->as_int(), 2);
  EXPECT_EQ(d.find(Value(7))->as_int(), 3);
  EXPECT_EQ(d.find(std::string_view("zz")), nullptr);
  EXPECT_EQ(d.find(Value(8)), nullptr);
  // Python: True == 1, so they are the same key; "1" is a different key.
  d.set(Value(true), Value(4));
  d.set(Value(1), Value(5));
  EXPECT_EQ(d.items.size(), 4u);
  EXPECT_EQ(d.find(Value(true))->as_int(), 5);
  EXPECT_EQ(d.find(std::string_view("1")), nullptr);
  // Non-indexed keys (tuples) fall back to a scan with structural equality.
  d.set(Value::tuple({Value(1), testing::str("x")}), Value(6));
  d.set(Value::tuple({Value(1), testing::str("x")}), Value(7));
  EXPECT_EQ(d.items.size(), 5u);
  EXPECT_EQ(d.find(Value::tuple({Value(1), testing::str("x")}))->as_int(), 7);
}

TEST(CoreValue, DictIndexSurvivesManyInsertsAndDirectEdits) {
  Value v = Value::dict();
  Dict& d = v.as_dict();
  for (int i = 0; i < 5000; ++i) d.set(testing::str("k" + std::to_string(i)), Value(i));
  for (int i = 0; i < 5000; i += 97) d.set(testing::str("k" + std::to_string(i)), Value(-i));
  EXPECT_EQ(d.items.size(), 5000u);
  for (int i = 0; i < 5000; i += 13)
    EXPECT_EQ(d.find(std::string_view("k" + std::to_string(i)))->as_int(), i % 97 ? i : -i);
  // Readers may append to items directly; find still sees the new entries.
  d.items.emplace_back(testing::str("late"), Value(1));
  EXPECT_NE(d.find(std::string_view("late")), nullptr);
  // And shrinking items rebuilds the index.
  d.items.clear();
  EXPECT_EQ(d.find(std::string_view("k1")), nullptr);
  d.items.emplace_back(testing::str("x"), Value(2));
  EXPECT_EQ(d.find(std::string_view("x"))->as_int(), 2);
}

// Python's key identity: True == 1 == 1.0, -0.0 == 0 == False, NaN equals nothing,
// tuples elementwise, frozensets as sets, str and bytes never equal.
TEST(CoreValue, DictKeysFollowPythonIdentity) {
  Value v = Value::dict();
  Dict& d = v.as_dict();
  d.set(Value(1), Value(testing::str("int")));
  d.set(Value(true), Value(testing::str("bool")));
  d.set(Value(1.0), Value(testing::str("float")));
  ASSERT_EQ(d.items.size(), 1u);
  EXPECT_TRUE(d.items[0].first.is(Value::Kind::kInt));  // the first key object stays
  for (const Value& k : {Value(1), Value(true), Value(1.0)}) EXPECT_EQ(d.find(k)->as_str(), "float");
  d.set(Value(-0.0), Value(testing::str("zero")));
  EXPECT_EQ(d.find(Value(0))->as_str(), "zero");
  EXPECT_EQ(d.find(Value(false))->as_str(), "zero");
  EXPECT_EQ(d.find(Value(0.0))->as_str(), "zero");
  d.set(Value(1.5), Value(testing::str("x")));
  EXPECT_EQ(d.items.size(), 3u);
  EXPECT_EQ(d.find(Value(1.5))->as_str(), "x");
  EXPECT_EQ(d.find(Value(2)), nullptr);
  // NaN is never equal to a key, not even another NaN.
  d.set(Value(std::nan("")), Value(1));
  d.set(Value(std::nan("")), Value(2));
  EXPECT_EQ(d.items.size(), 5u);
  EXPECT_EQ(d.find(Value(std::nan(""))), nullptr);
  // Tuples compare elementwise with the same identity.
  d.set(Value::tuple({Value(1), testing::str("a")}), Value(3));
  EXPECT_EQ(d.find(Value::tuple({Value(true), testing::str("a")}))->as_int(), 3);
  EXPECT_EQ(d.find(Value::tuple({Value(1.0), testing::str("a")}))->as_int(), 3);
  EXPECT_EQ(d.find(Value::tuple({Value(1), testing::str("b")})), nullptr);
  // Frozensets ignore order; str and bytes of the same text are different keys.
  auto fs = [](std::vector<Value> xs) {
    auto s = std::make_shared<Set>();
    s->items = std::move(xs);
    s->frozen = true;
    return Value(s);
  };
  d.set(fs({Value(1), Value(2)}), Value(4));
  EXPECT_EQ(d.find(fs({Value(2), Value(1)}))->as_int(), 4);
  d.set(testing::str("k"), Value(5));
  EXPECT_EQ(d.find(Value::bytes("k")), nullptr);
  // Globals by name; tensors by identity.
  d.set(Value::global("torch", "float32"), Value(6));
  EXPECT_EQ(d.find(Value::global("torch", "float32"))->as_int(), 6);
  auto t = make_contiguous(DType::kUInt8, {1}, Storage::owned(std::vector<std::byte>(1)));
  auto u = make_contiguous(DType::kUInt8, {1}, Storage::owned(std::vector<std::byte>(1)));
  d.set(Value(t), Value(7));
  EXPECT_EQ(d.find(Value(t))->as_int(), 7);
  EXPECT_EQ(d.find(Value(u)), nullptr);
  // Unhashable keys (hand-built trees only) fall back to structural equality.
  d.set(Value::list({Value(1)}), Value(8));
  d.set(Value::list({Value(1)}), Value(9));
  EXPECT_EQ(d.find(Value::list({Value(1)}))->as_int(), 9);
}

TEST(CoreValue, DictCopiesKeepTheirOwnIndex) {
  Value v = Value::dict();
  Dict& d = v.as_dict();
  for (int i = 0; i < 100; ++i) d.set(Value(i), Value(i));
  ASSERT_NE(d.find(Value(5)), nullptr);  // builds the index
  Dict copy = d;
  copy.items.clear();
  copy.set(Value(5), Value(-5));
  EXPECT_EQ(copy.items.size(), 1u);
  EXPECT_EQ(copy.find(Value(5))->as_int(), -5);
  EXPECT_EQ(d.find(Value(5))->as_int(), 5);
  EXPECT_EQ(d.find(Value(99))->as_int(), 99);
  Dict moved = std::move(copy);
  EXPECT_EQ(moved.find(Value(5))->as_int(), -5);
  d = moved;
  EXPECT_EQ(d.items.size(), 1u);
  EXPECT_EQ(d.find(Value(99)), nullptr);
}

// ---- BigInt -------------------------------------------------------------------------

TEST(CoreValue, BigIntToDecimal) {
  EXPECT_EQ((BigInt{std::string("\0\0\0\0\0\0\0\0\x01", 9)}).to_decimal(), "18446744073709551616");       // 2**64
  EXPECT_EQ((BigInt{std::string("\0\0\0\0\0\0\0\x80\0", 9)}).to_decimal(), "9223372036854775808");        // 2**63
  EXPECT_EQ((BigInt{std::string("\x03\0\0\0\0\0\0\0\xc0", 9)}).to_decimal(), "-1180591620717411303421");  // -(2**70)+3
  EXPECT_EQ((BigInt{std::string("\xff\xff\xff\xff\xff\xff\xff\x7f\xff", 9)}).to_decimal(),
            "-9223372036854775809");  // -(2**63)-1
  EXPECT_EQ((BigInt{""}).to_decimal(), "0");
  EXPECT_EQ((BigInt{"\xff"}).to_decimal(), "-1");
  EXPECT_EQ((BigInt{"\x80"}).to_decimal(), "-128");
  EXPECT_EQ((BigInt{std::string("\x80\0", 2)}).to_decimal(), "128");
  // 10**30 = 0x0c9f2c9cd04674edea40000000 (big-endian)
  const unsigned char be[] = {0x0c, 0x9f, 0x2c, 0x9c, 0xd0, 0x46, 0x74, 0xed, 0xea, 0x40, 0x00, 0x00, 0x00};
  std::string le(std::rbegin(be), std::rend(be));
  EXPECT_EQ(BigInt{le}.to_decimal(), "1000000000000000000000000000000");
}

TEST(CoreValue, BigIntNormalisesToInt) {
  EXPECT_TRUE(Value(BigInt{std::string("\0\0\0\0\0\0\0\x80\0", 9)}).is(Value::Kind::kBigInt));
  const Value fits(BigInt{std::string("\x00\x00\x00\x00\x00\x00\x00\x80", 8)});
  ASSERT_TRUE(fits.is(Value::Kind::kInt));
  EXPECT_EQ(fits.as_int(), INT64_MIN);
  EXPECT_EQ(Value(BigInt{"\xfe"}).as_int(), -2);
  EXPECT_EQ(Value(BigInt{std::string("\xff\x00", 2)}).as_int(), 255);
  EXPECT_EQ(Value(BigInt{""}).as_int(), 0);
}

// ---- accessors, equality, repr, tensors --------------------------------------------

TEST(CoreValue, AccessorsThrowInternalOnWrongKind) {
  EXPECT_EQ(testing::rule_of([] { (void)Value(1).as_str(); }), rules::kInternal.id);
  EXPECT_EQ(testing::rule_of([] { (void)Value().as_dict(); }), rules::kInternal.id);
  EXPECT_EQ(testing::rule_of([] { (void)testing::str("x").items(); }), rules::kInternal.id);
  EXPECT_EQ(Value(2.5).as_float(), 2.5);
  EXPECT_EQ(kind_name(Value::Kind::kBigInt), "int");
  EXPECT_TRUE(Value::global("torch", "Size").is_global("torch", "Size"));
  EXPECT_FALSE(Value::global("torch", "Size").is_global("torch", "size"));
}

TEST(CoreValue, EqualityIsStructuralAndBitExactForFloats) {
  auto bits = [](std::uint64_t b) {
    double d;
    std::memcpy(&d, &b, 8);
    return Value(d);
  };
  EXPECT_TRUE(equal(Value::list({Value(1), testing::str("a")}), Value::list({Value(1), testing::str("a")})));
  EXPECT_FALSE(equal(Value::list({Value(1)}), Value::tuple({Value(1)})));
  EXPECT_FALSE(equal(Value(0.0), Value(-0.0)));
  EXPECT_TRUE(equal(bits(0x7ff8000000000001), bits(0x7ff8000000000001)));
  EXPECT_FALSE(equal(bits(0x7ff8000000000001), bits(0x7ff8000000000002)));
  EXPECT_FALSE(equal(Value::bytes("x"), Value::bytes("x", true)));
  Value a = Value::dict(), b = Value::dict(DictKind::kOrderedDict);
  EXPECT_FALSE(equal(a, b));
  auto t = make_contiguous(DType::kUInt8, {1}, Storage::owned(std::vector<std::byte>(1)));
  auto u = make_contiguous(DType::kUInt8, {1}, Storage::owned(std::vector<std::byte>(1)));
  EXPECT_TRUE(equal(Value(t), Value(t)));
  EXPECT_FALSE(equal(Value(t), Value(u)));  // tensors compare by identity
}

TEST(CoreValue, CollectTensorsPathsAndSharing) {
  auto t = make_contiguous(DType::kUInt8, {1}, Storage::owned(std::vector<std::byte>(1)));
  Value root = Value::dict();
  Value layer = Value::dict(DictKind::kOrderedDict);
  layer.as_dict().set(testing::str("weight"), Value(t));
  root.as_dict().set(testing::str("encoder"), layer);
  root.as_dict().set(testing::str("list"), Value::list({Value(1), Value(t)}));
  root.as_dict().set(Value(3), Value::tuple({Value(std::shared_ptr<const Tensor>(
                                   make_contiguous(DType::kUInt8, {1}, Storage::owned(std::vector<std::byte>(1)))))}));
  const auto refs = collect_tensors(root);
  ASSERT_EQ(refs.size(), 2u);  // the shared tensor once
  EXPECT_EQ(refs[0].path, "encoder.weight");
  EXPECT_EQ(refs[1].path, "3.0");
}

TEST(CoreValue, ReprIsBoundedAndPythonLike) {
  Value v = Value::dict();
  v.as_dict().set(testing::str("a"), Value::list({Value(1), Value(2.5), Value(), Value(true), Value::bytes("x\n")}));
  EXPECT_EQ(repr(v), "{'a': [1, 2.5, None, True, b'x\\x0a']}");
  Value big = Value::list();
  for (int i = 0; i < 1000; ++i) big.items().push_back(Value(i));
  EXPECT_LE(repr(big, 50).size(), 60u);
  EXPECT_EQ(repr(Value(BigInt{std::string("\0\0\0\0\0\0\0\0\x01", 9)})), "18446744073709551616");
}

// ---- Error ---------------------------------------------------------------------------

TEST(CoreError, WhatIsOneLineWithFileOffsetAndRule) {
  const Rule r{"fmt/some-rule", ErrorKind::kCorrupt};
  const Error e(r, "bad value 7\nsecond line\r", "model.bin", 1234);
  EXPECT_STREQ(e.what(), "model.bin: byte 1234: [fmt/some-rule] bad value 7 second line ");
  EXPECT_EQ(e.rule(), "fmt/some-rule");
  EXPECT_EQ(e.kind(), ErrorKind::kCorrupt);
  EXPECT_EQ(e.file(), "model.bin");
  EXPECT_EQ(e.offset(), 1234u);
  // detail() is printable too: the Python exception hands it out as a str.
  EXPECT_EQ(e.detail(), "bad value 7 second line ");
  EXPECT_EQ(Error(r, std::string("\xe9\x01")).detail(), "\\xe9\\x01");
  EXPECT_STREQ(Error(r, "d").what(), "[fmt/some-rule] d");
  EXPECT_STREQ(Error(r, "d", "f").what(), "f: [fmt/some-rule] d");
  EXPECT_STREQ(Error(r, "d", "", 0).what(), "byte 0: [fmt/some-rule] d");
  EXPECT_STREQ(Error(r, "d", "a\nb", 1).what(), "a b: byte 1: [fmt/some-rule] d");
}

TEST(CoreError, LocatedAddsFileAndBaseOffset) {
  const Rule r{"x/y", ErrorKind::kLimit};
  const Error inner(r, "d", "", 10);
  const Error outer = inner.located("outer.pt", 100);
  EXPECT_EQ(outer.file(), "outer.pt");
  EXPECT_EQ(outer.offset(), 110u);
  EXPECT_STREQ(outer.what(), "outer.pt: byte 110: [x/y] d");
  const Error nested = Error(r, "d", "data.pkl", kNoOffset).located("outer.pt", 5);
  EXPECT_EQ(nested.file(), "outer.pt: data.pkl");
  EXPECT_EQ(nested.offset(), kNoOffset);
  EXPECT_EQ(Error(r, "d", "same").located("same").file(), "same");
}

TEST(CoreError, KindNames) {
  EXPECT_EQ(kind_name(ErrorKind::kInvalidArgument), "invalid-argument");
  EXPECT_EQ(kind_name(ErrorKind::kIo), "io");
  EXPECT_EQ(kind_name(ErrorKind::kCorrupt), "corrupt");
  EXPECT_EQ(kind_name(ErrorKind::kUnsafe), "unsafe");
  EXPECT_EQ(kind_name(ErrorKind::kUnsupported), "unsupported");
  EXPECT_EQ(kind_name(ErrorKind::kLimit), "limit");
  EXPECT_EQ(kind_name(ErrorKind::kInternal), "internal");
}

}  // namespace
}  // namespace tensorseal
