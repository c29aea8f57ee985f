// The standard-library call table (src/pickle/stdlib.h; spec docs/formats/pickle.md
// "Standard-library calls"): one table, and every entry point reads the same bytes as
// the same value. Real pickles come from tests/fixtures/gen_pickle.py (CPython 3.11,
// protocols 0-5); hand-built Objects only for arguments CPython's picklers never write.
#include <filesystem>
#include <map>
#include <set>

#include "pickle/stdlib.h"
#include "pickle_test_util.h"
#include "tensorseal/checkpoint.h"
#include "tensorseal/hash.h"
#include "tensorseal/scan.h"

namespace tensorseal::testing {
namespace {
namespace fs = std::filesystem;

fs::path fixtures() { return fixture_dir("gen_pickle"); }

Object call(std::string module, std::string name, std::vector<Value> args, Construct how = Construct::kReduce) {
  Object o;
  o.callable = std::make_shared<Value>(Value::global(std::move(module), std::move(name)));
  o.args = std::make_shared<Value>(Value::tuple(std::move(args)));
  o.how = how;
  return o;
}

std::string reduced(const Object& o) {
  auto v = detail::pickle::stdlib_reduce(o);
  return v ? describe(*v) : "-";
}

// Every CPython 3.11 pickle of plain data, at every protocol.
std::vector<fs::path> plain_pickles() {
  std::vector<fs::path> out;
  if (!fs::exists(fixtures())) return out;
  for (const auto& e : fs::directory_iterator(fixtures())) {
    const std::string f = e.path().filename().string();
    if (f.rfind("py3_", 0) == 0 && e.path().extension() == ".pkl") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string expected_for(const fs::path& pkl) {
  std::string stem = pkl.stem().string();
  return read_all(pkl.parent_path() / (stem.substr(0, stem.rfind("_p")) + ".expected"));
}

TEST(StdlibCalls, TableIsSortedAndEveryRowIsFound) {
  const auto rows = detail::pickle::stdlib_calls();
  ASSERT_GE(rows.size(), 10u);
  for (const auto& r : rows) {
    const auto* found = detail::pickle::find_stdlib_call(r.module, r.name);
    ASSERT_NE(found, nullptr) << r.module << "." << r.name;
    EXPECT_EQ(found, &r);
  }
  EXPECT_EQ(detail::pickle::find_stdlib_call("builtins", "eval"), nullptr);
  EXPECT_EQ(detail::pickle::find_stdlib_call("collections", "Counte"), nullptr);
  EXPECT_EQ(detail::pickle::find_stdlib_call("posix", "system"), nullptr);
}

// The VM with the table as its hook gives, for every real pickle, what Python loads;
// and the rows CPython's picklers actually emit are all exercised by the corpus.
TEST(StdlibCalls, CpythonPicklesReadAsPythonLoadsThem) {
  const auto files = plain_pickles();
  ASSERT_GE(files.size(), 6u * 20) << "fixtures not generated";
  std::set<std::string> fired;
  detail::pickle::Hooks h;
  h.reduce = [&](const Object& o, std::uint64_t) {
    auto v = detail::pickle::stdlib_reduce(o);
    if (v) fired.insert(o.callable->as_global().module + "." + o.callable->as_global().name);
    return v;
  };
  for (const auto& f : files) {
    auto p = detail::pickle::parse(bytes_of(read_all(f)), f.filename().string(), 0, {}, h);
    EXPECT_EQ(describe(p.value), expected_for(f)) << f.filename();
  }
  for (std::string row :
       {"_codecs.encode", "builtins.bytearray", "builtins.bytes", "builtins.complex", "builtins.frozenset",
        "builtins.getattr", "builtins.set", "collections.Counter", "collections.OrderedDict"})
    EXPECT_TRUE(fired.count(row)) << row << " is never emitted by the corpus";
}

// The torch reader (torch::unpickle: bare pickles, torch files) installs the same
// table: a plain pickle reads to the same value through tensorseal::read_file, at
// every protocol, with the same content hash for every protocol of one value.
TEST(StdlibCalls, TorchReaderReadsPlainPicklesAsTheVm) {
  const auto files = plain_pickles();
  ASSERT_FALSE(files.empty()) << "fixtures not generated";
  std::map<std::string, std::set<std::string>> digests;  // case -> content hashes over protocols
  for (const auto& f : files) {
    Checkpoint c = read_file(f);
    EXPECT_EQ(describe(c.root), expected_for(f)) << f.filename();
    const std::string stem = f.stem().string();
    digests[stem.substr(0, stem.rfind("_p"))].insert(content_hash(c.root));
  }
  for (const auto& [name, ds] : digests) EXPECT_EQ(ds.size(), 1u) << name << ": protocols hash differently";
}

// scan sees a stdlib call as the value it builds, never as a call to judge: every
// global of plain data is safe and the report is complete.
TEST(StdlibCalls, ScanFindsPlainPicklesSafe) {
  const auto files = plain_pickles();
  ASSERT_FALSE(files.empty()) << "fixtures not generated";
  for (const auto& f : files) {
    if (f.filename().string().rfind("py3_nested_name", 0) == 0) continue;  // names a test class: unknown
    ScanReport r = scan_file(f);
    EXPECT_FALSE(r.incomplete) << f.filename() << ": " << r.error;
    for (const auto& g : r.findings)
      EXPECT_EQ(g.verdict, Verdict::kSafe) << f.filename() << ": " << g.module << "." << g.name;
  }
}

// What used to differ between the torch layer and the other hooks, now one answer.
TEST(StdlibCalls, OneAnswerForFormerDisagreements) {
  using V = Value;
  // Sets keep equal items once (Python's set(), not the list).
  EXPECT_EQ(reduced(call("builtins", "set", {V::list({V(1), V(2), V(1)})})), "S{i1,i2}");
  EXPECT_EQ(reduced(call("builtins", "frozenset", {V::tuple({V::str("a"), V::str("a")})})), "Z{u61}");
  EXPECT_EQ(reduced(call("builtins", "set", {V::list({V::list()})})), "-") << "unhashable item";
  // dict / OrderedDict / Counter: from a dict or pairs; the last of equal keys wins.
  EXPECT_EQ(reduced(call("builtins", "dict", {V::list({V::tuple({V(1), V(2)}), V::tuple({V(1), V(3)})})})), "{i1:i3}");
  EXPECT_EQ(reduced(call("collections", "OrderedDict", {V::list({V::list({V::str("k"), V(1)})})})), "O{u6b:i1}");
  EXPECT_EQ(reduced(call("collections", "Counter", {})), "C{}");
  EXPECT_EQ(reduced(call("collections", "OrderedDict", {V::list({V(1)})})), "-") << "not a pair";
  EXPECT_EQ(reduced(call("builtins", "dict", {V::list({V::tuple({V::list(), V(1)})})})), "-") << "unhashable key";
  // getattr: one level, '' kept (the inverse of the writer's split at the last dot).
  EXPECT_EQ(reduced(call("builtins", "getattr", {V::global("m", "A"), V::str("")})), "Gm.A.");
  EXPECT_EQ(reduced(call("builtins", "getattr", {V::global("m", "A"), V::str("b.c")})), "-");
  EXPECT_EQ(reduced(call("builtins", "getattr", {V::str("m"), V::str("b")})), "-");
  // bytes: bytes() and bytes([0..255]); anything else stays an object.
  EXPECT_EQ(reduced(call("builtins", "bytes", {})), "b");
  EXPECT_EQ(reduced(call("builtins", "bytes", {V::list({V(0), V(255)})})), "b00ff");
  EXPECT_EQ(reduced(call("builtins", "bytes", {V::list({V(256)})})), "-");
  EXPECT_EQ(reduced(call("builtins", "bytes", {V(3)})), "-") << "bytes(3) is zeros; not a form picklers write";
  // bytearray(str, 'latin-1'); a non-latin-1 code point stays an object.
  EXPECT_EQ(reduced(call("builtins", "bytearray", {V::str("\xc3\xbf"), V::str("latin-1")})), "yff");
  EXPECT_EQ(reduced(call("builtins", "bytearray", {V::str("\xe1\x88\xb4"), V::str("latin-1")})), "-");
  // _codecs.encode: utf-8 by default and by name, latin-1 by either name.
  EXPECT_EQ(reduced(call("_codecs", "encode", {V::str("\xc3\xa9")})), "bc3a9");
  EXPECT_EQ(reduced(call("_codecs", "encode", {V::str("\xc3\xa9"), V::str("utf-8")})), "bc3a9");
  EXPECT_EQ(reduced(call("_codecs", "encode", {V::str("\xc3\xa9"), V::str("latin1")})), "be9");
  EXPECT_EQ(reduced(call("_codecs", "encode", {V::str("x"), V::str("rot13")})), "-");
  EXPECT_EQ(reduced(call("_codecs", "encode", {V::str("\xed\xa0\x80")})), "-") << "a lone surrogate raises";
  // complex: REDUCE or NEWOBJ (complex.__new__(complex, re, im)); str parts stay objects.
  EXPECT_EQ(reduced(call("builtins", "complex", {V(1), V(2.5)}, Construct::kNewObj)),
            reduced(call("builtins", "complex", {V(1), V(2.5)})));
  EXPECT_NE(reduced(call("builtins", "complex", {V(1), V(2.5)})), "-");
  EXPECT_EQ(reduced(call("builtins", "complex", {V::str("1+2j")})), "-");
  // Only NEWOBJ of complex: NEWOBJ of set is set.__new__(set, items), an empty set.
  EXPECT_EQ(reduced(call("builtins", "set", {V::list({V(1)})}, Construct::kNewObj)), "-");
}

// State, items or kwargs on the call are never folded away.
TEST(StdlibCalls, ObjectsWithStateStayObjects) {
  Object o = call("builtins", "set", {Value::list({Value(1)})});
  o.state = std::make_shared<Value>(Value(1));
  EXPECT_EQ(reduced(o), "-");
  Object k = call("builtins", "dict", {});
  k.kwargs = std::make_shared<Value>(Value::dict());
  EXPECT_EQ(reduced(k), "-");
}

}  // namespace
}  // namespace tensorseal::testing
