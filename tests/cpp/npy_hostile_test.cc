// Hostile .npy input: hand-made headers for every reader rule, the literal subset the
// parser accepts (any key order, whitespace, Python 2 longs), truncation at every
// length and bit flips of a real np.save file (an Error or a valid parse, never a
// crash). Spec: docs/formats/npy.md.
#include <cstring>

#include "io/sink.h"
#include "test_util.h"
#include "zip/writer.h"

namespace tensorseal {
namespace {

// A .npy image: magic, version, header length, `dict` padded like numpy, data.
std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append(63 - (prefix + header.size()) % 64, ' ');
  header += '\n';
  const std::uint32_t n = static_cast<std::uint32_t>(header.size());
  out.append(reinterpret_cast<const char*>(&n), major == 1 ? 2 : 4);
  return out + header + data;
}

std::string rule(const std::string& bytes, const ReadOptions& o = {}) {
  return testing::rule_of([&] { (void)read_bytes(testing::bytes_of(bytes), "h.npy", o); });
}

const std::string k6f4(24, '\x01');  // data for shape (2, 3) of <f4

TEST(NpyHostile, WellFormedBaseline) {
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", k6f4)), "");
}

TEST(NpyHostile, MagicAndVersion) {
  std::string s = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", k6f4);
  std::string v = s;
  v[6] = 4;
  EXPECT_EQ(rule(v), "npy/unsupported-version");
  v = s;
  v[7] = 1;
  EXPECT_EQ(rule(v), "npy/unsupported-version");
  // detect_format dispatches on the magic; the codec itself rechecks it.
  EXPECT_EQ(rule(std::string("\x93NUMPY", 6)), "npy/truncated-header");
}

TEST(NpyHostile, HeaderLengths) {
  std::string s = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", k6f4);
  s[8] = '\xff';
  s[9] = '\xff';
  EXPECT_EQ(rule(s), "npy/truncated-header");
  std::string v2 = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", k6f4, 2);
  EXPECT_EQ(rule(v2), "");
  const std::uint32_t huge = 0x80000000u;
  std::memcpy(v2.data() + 8, &huge, 4);
  EXPECT_EQ(rule(v2), "npy/header-too-large");
}

TEST(NpyHostile, LiteralSubsetAccepted) {
  // Any key order, whitespace, double quotes, no trailing comma, Python 2 longs (v1/v2).
  EXPECT_EQ(rule(npy("{ 'shape':(2,3) ,'descr':\"<f4\",'fortran_order':False}", k6f4)), "");
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", k6f4)), "");
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", k6f4)), "");
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3,), }", k6f4)), "");
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }", k6f4)), "");
  // 'L' is Python 2 only: not in a 3.0 (Python 3 era) header.
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", k6f4, 3)), "npy/bad-header");
}

TEST(NpyHostile, BadLiterals) {
  const char* bad[] = {
      "{'descr': '<f4', 'fortran_order': False}",                                   // no shape
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}",          // extra key
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",  // duplicate
      "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}",                      // not a bool
      "{'descr': 4, 'fortran_order': False, 'shape': (2, 3)}",                      // not a string
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)",                   // unterminated
      "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3)}",              // escapes
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} junk",             // trailing text
      "{'descr': '<f4', 'fortran_order': False, 'shape': (02, 3)}",                 // leading zero
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}",                   // missing comma
      "__import__('os').system('true')",                                            // code
      "",
  };
  for (const char* h : bad) EXPECT_EQ(rule(npy(h, k6f4)), "npy/bad-header") << h;
}

TEST(NpyHostile, Shapes) {
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': '6'}", k6f4)), "npy/bad-shape");
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': 6}", k6f4)), "npy/bad-header");
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", k6f4)), "npy/bad-header");
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, -3)}", k6f4)), "npy/bad-shape");
  // "(6)" is the int 6, not a tuple.
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", k6f4)), "npy/bad-header");
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", k6f4)),
            "npy/shape-overflow");
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4)}", k6f4)),
            "npy/shape-overflow");
  // A zero dimension does not excuse the others from fitting.
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296)}", "")),
            "npy/shape-overflow");
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296)}", "")), "");
  std::string many = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 70; ++i) many += "1, ";
  many += ")}";
  EXPECT_EQ(rule(npy(many, std::string(4, '\0'))), "npy/too-many-dims");
  ReadOptions o;
  o.limits.max_ndim = 1;
  EXPECT_EQ(rule(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", k6f4), o), "npy/too-many-dims");
}

TEST(NpyHostile, Dtypes) {
  // An object array's data must be a pickled numpy object array.
  EXPECT_EQ(rule(npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,)}", std::string(16, '\0'))),
            "npy/object-array");
  EXPECT_EQ(rule(npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,)}", "\x80\x02K\x01.")), "npy/object-array")
      << "a pickle of something else";
  EXPECT_EQ(rule(npy("{'descr': [('a', '<f4'), ('b', '<i2')], 'fortran_order': False, 'shape': (2,)}", "")),
            "npy/structured-dtype");
  EXPECT_EQ(rule(npy("{'descr': ('<f4', (2,)), 'fortran_order': False, 'shape': (2,)}", "")), "npy/structured-dtype");
  for (const char* d : {"<U3", "|S4", "<M8[D]", "<f16", "|V8", "", "<q8"})
    EXPECT_EQ(rule(npy(std::string("{'descr': '") + d + "', 'fortran_order': False, 'shape': (2,)}", "")),
              "npy/dtype-unsupported")
        << d;
}

TEST(NpyHostile, BigEndianCopyIsLimited) {
  const std::string s = npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", k6f4);
  EXPECT_EQ(rule(s), "");
  ReadOptions o;
  o.limits.max_alloc = 8;
  EXPECT_EQ(rule(s, o), "npy/too-large");
}

// npz members must be "<key>.npy" arrays; an npz member's errors name the member.
TEST(NpyHostile, NpzMembers) {
  const std::string good = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", k6f4);
  auto make = [&](const std::string& second_name, const std::string& second) {
    detail::io::StringSink sink;
    detail::zip::Writer w(sink, detail::zip::Profile::kNumpy);
    w.record("a.npy", good);
    w.record(second_name, second);
    w.finish();
    return sink.out;
  };
  auto npz_rule = [](const std::string& bytes) {
    return testing::rule_of([&] { (void)read_bytes(testing::bytes_of(bytes), "h.npz"); });
  };
  EXPECT_EQ(npz_rule(make("b.npy", good)), "");
  EXPECT_EQ(npz_rule(make("notes.txt", "hello")), "npz/member-not-npy");
  EXPECT_EQ(npz_rule(make(".npy", good)), "npz/member-not-npy");
  const std::string bad = make("b.npy", good + "x");
  try {
    (void)read_bytes(testing::bytes_of(bad), "h.npz");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.rule(), "npy/trailing-data");
    EXPECT_NE(e.detail().find("member 'b.npy'"), std::string::npos) << e.what();
    // The offset is in the file: inside the second member's data.
    EXPECT_EQ(e.offset(), bad.find("b.npy") + 5 + 20 + good.size());
  }
}

TEST(NpyHostile, DataLength) {
  const std::string head = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(rule(npy(head, k6f4.substr(1))), "npy/truncated-data");
  EXPECT_EQ(rule(npy(head, k6f4 + "x")), "npy/trailing-data");
  // A second payload hidden after the array (npy + pickle polyglot) is refused.
  EXPECT_EQ(rule(npy(head, k6f4 + "\x80\x02}q\x00.")), "npy/trailing-data");
}

TEST(NpyHostile, ErrorsNameTheOffset) {
  const std::string s = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", k6f4 + "xx");
  try {
    (void)read_bytes(testing::bytes_of(s), "h.npy");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "h.npy");
    EXPECT_EQ(e.offset(), s.size() - 2);
  }
}

TEST(NpyHostile, RealFileTruncatedAtEveryLength) {
  const std::string s = testing::read_all(testing::fixture_dir("gen_numpy") / "big_float32.npy");
  ASSERT_FALSE(s.empty());
  for (std::size_t n = 6; n < s.size(); ++n)  // from the magic on, so it is still "npy"
    EXPECT_NE(rule(s.substr(0, n)), "") << n;
}

TEST(NpyHostile, RealFilesBitFlipsNeverCrash) {
  for (const char* f : {"fortran_f4.npy", "big_float32.npy", "savez_odd_layouts.npz", "savez_compressed.npz"}) {
    const std::string orig = testing::read_all(testing::fixture_dir("gen_numpy") / f);
    ASSERT_FALSE(orig.empty()) << f;
    std::size_t refused = 0;
    for (std::size_t i = 0; i < orig.size(); ++i)
      for (int bit = 0; bit < 8; ++bit) {
        std::string s = orig;
        s[i] = static_cast<char>(s[i] ^ (1 << bit));
        try {
          const Checkpoint c = read_bytes(testing::bytes_of(s), f);
          for (const auto& t : collect_tensors(c.root)) (void)tensor_sha256(*t.tensor);
        } catch (const Error&) {
          ++refused;
        }
      }
    EXPECT_GT(refused, 0u) << f;
  }
}

}  // namespace
}  // namespace tensorseal
