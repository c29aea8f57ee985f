// scan_file against the bypass classes of issue 32, one test per rule (docs/security.md,
// "What scan follows"): names classed as find_class resolves them, nested payloads
// reached through _rebuild_from_type_v2 and installed methods, payloads before a
// broken stream, stacked pickles, latent CVE-2026-24747 shapes. The ground truth for
// each shape (the stock loader runs it) is proved in tests/py/test_scan_bypass.py.
#include <tensorseal/scan.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

std::string su(std::string_view s) { return "\x8c" + std::string(1, static_cast<char>(s.size())) + std::string(s); }
std::string sg(std::string_view m, std::string_view n) { return su(m) + su(n) + "\x93"; }
std::string binbytes(std::string_view b) {
  std::string out = "B";
  for (int i = 0; i < 4; ++i) out += static_cast<char>((b.size() >> (8 * i)) & 0xff);
  return out + std::string(b);
}
// PROTO 4, body, STOP.
std::string p4(const std::string& body) { return std::string("\x80\x04", 2) + body + "."; }
// os.system("id") called by REDUCE, protocol 2.
using namespace std::string_literals;
const std::string kEvil =
    "\x80\x02"
    "cposix\nsystem\nX\x02\x00\x00\x00id\x85R."s;

const ScanFinding* find(const ScanReport& r, std::string_view module, std::string_view name_prefix) {
  for (const auto& f : r.findings)
    if (f.module == module && f.name.starts_with(name_prefix)) return &f;
  return nullptr;
}

TEST(ScanBypass, DottedNamesAreClassedAsResolved) {
  std::string why;
  EXPECT_EQ(classify_global("torch", "storage._load_from_bytes"), Verdict::kSafe);  // the same callable
  EXPECT_EQ(classify_global("torch.serialization", "os.system"), Verdict::kDangerous);
  EXPECT_EQ(classify_global("torch.serialization", "torch.load", &why), Verdict::kDangerous);
  EXPECT_NE(why.find("torch.load"), std::string::npos) << why;
  EXPECT_EQ(classify_global("numpy", "testing._private.utils.runstring"), Verdict::kDangerous);
  EXPECT_EQ(classify_global("builtins", "open.__call__"), Verdict::kDangerous);
  EXPECT_EQ(classify_global("torch._utils", "_rebuild_tensor.__globals__"), Verdict::kDangerous);
  EXPECT_EQ(classify_global("code", "InteractiveInterpreter.runsource"), Verdict::kDangerous);
  EXPECT_EQ(classify_global("pathlib", "Path.touch"), Verdict::kDangerous);
  EXPECT_EQ(classify_global("torch._C", "_jit_pass_inline"), Verdict::kDangerous);
}

TEST(ScanBypass, PrivateTwinsAndGadgetsAreDangerous) {
  for (auto [m, n] : {std::pair{"_operator", "methodcaller"},
                      {"_functools", "partial"},
                      {"_pyio", "open"},
                      {"operator", "call"},
                      {"pydoc", "pipepager"},
                      {"timeit", "timeit"},
                      {"cProfile", "run"},
                      {"runpy", "_run_code"},
                      {"pty", "spawn"},
                      {"_ctypes", "dlopen"},
                      {"_posixsubprocess", "fork_exec"},
                      {"torch.fx.graph_module", "_forward_from_src"},
                      {"torch.package", "PackageImporter"}})
    EXPECT_EQ(classify_global(m, n), Verdict::kDangerous) << m << "." << n;
  // The allowlist is unchanged.
  EXPECT_EQ(classify_global("torch._utils", "_rebuild_tensor_v2"), Verdict::kSafe);
  EXPECT_EQ(classify_global("torch._dynamo.decorators", "_DimRange"), Verdict::kSafe);
  EXPECT_EQ(classify_global("collections", "OrderedDict"), Verdict::kSafe);
  EXPECT_EQ(classify_global("mylib", "Config"), Verdict::kUnknown);
}

TEST(ScanBypass, NestedPayloadThroughADottedName) {
  const ScanReport r =
      testing::scan_bytes("dotted", p4(sg("torch", "storage._load_from_bytes") + binbytes(kEvil) + "\x85R"));
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  const ScanFinding* f = find(r, "posix", "system");
  ASSERT_TRUE(f);
  EXPECT_NE(f->where.find("/_load_from_bytes#1"), std::string::npos) << f->where;
}

TEST(ScanBypass, NestedPayloadAsAnArgumentOfRebuildFromType) {
  const std::string lfb = sg("torch.storage", "_load_from_bytes");
  const ScanReport r = testing::scan_bytes("rebuild", p4(sg("torch._tensor", "_rebuild_from_type_v2") + "(" + lfb +
                                                         sg("torch", "Tensor") + "(" + binbytes(kEvil) + "t}tR"));
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  EXPECT_TRUE(find(r, "posix", "system"));
  // Handed to any other call, the payload is not followed: a finding of its own.
  const ScanReport other =
      testing::scan_bytes("passed", p4(sg("torch._utils", "_rebuild_tensor_v2") + "(" + lfb + binbytes(kEvil) + "tR"));
  EXPECT_EQ(other.verdict, Verdict::kDangerous);
  EXPECT_TRUE(find(other, "<unfollowed>", "<torch.storage._load_from_bytes passed to torch._utils._rebuild_tensor_v2"));
}

TEST(ScanBypass, NestedPayloadThroughInstalledMethods) {
  const std::string lfb = sg("torch.storage", "_load_from_bytes");
  const std::string od = sg("collections", "OrderedDict") + ")R";
  // BUILD {'__setstate__': _load_from_bytes}, then BUILD payload: __setstate__(payload).
  ScanReport r =
      testing::scan_bytes("setstate", p4(od + "}" + su("__setstate__") + lfb + "sb" + binbytes(kEvil) + "b"));
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  EXPECT_TRUE(find(r, "posix", "system"));
  // BUILD {'append': _load_from_bytes} on a Counter, then APPEND payload.
  const std::string counter = sg("collections", "Counter") + ")R";
  r = testing::scan_bytes("append", p4(counter + "}" + su("append") + lfb + "sb" + binbytes(kEvil) + "a"));
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  EXPECT_TRUE(find(r, "posix", "system"));
}

TEST(ScanBypass, PayloadBeforeATruncatedFrame) {
  // FRAME claims 4096 bytes more than there are: pickle's Python unpickler runs what is there.
  std::string body = sg("posix", "system") + su("id") + "\x85R0]";
  std::string b = std::string("\x80\x04\x95", 3);
  const std::uint64_t len = body.size() + 4096;
  for (int i = 0; i < 8; ++i) b += static_cast<char>((len >> (8 * i)) & 0xff);
  const ScanReport r = testing::scan_bytes("frame", b + body);
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  EXPECT_TRUE(r.incomplete);
  EXPECT_TRUE(find(r, "posix", "system"));
}

TEST(ScanBypass, StackedPicklesAreAllScanned) {
  const std::string benign = p4("}");
  ScanReport r = testing::scan_bytes("stacked", benign + kEvil);
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  const ScanFinding* f = find(r, "posix", "system");
  ASSERT_TRUE(f);
  EXPECT_NE(f->where.find("#stacked1"), std::string::npos) << f->where;
  // Trailing bytes that are no pickle are left alone.
  r = testing::scan_bytes("trailing", benign + "\n");
  EXPECT_EQ(r.verdict, Verdict::kSafe);
}

TEST(ScanBypass, SetItemOnATensorNamesTheCve) {
  const std::string tensor = sg("torch._utils", "_rebuild_tensor_v2") + "(NK\x01))\x89NtR";
  const ScanReport r = testing::scan_bytes("setitem", p4("}" + su("w") + tensor + "K\x02K\x01ss"));
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  const ScanFinding* f = find(r, "<latent>", "<SETITEM on a torch._utils._rebuild_tensor_v2 result");
  ASSERT_TRUE(f);
  EXPECT_NE(f->reason.find("CVE-2026-24747"), std::string::npos);
  // SETITEMS on an OrderedDict (torch.save's state dicts): nothing.
  const ScanReport ok = testing::scan_bytes("od", p4(sg("collections", "OrderedDict") + ")R(K\x02K\x01u"));
  EXPECT_EQ(ok.verdict, Verdict::kSafe);
}

}  // namespace
}  // namespace tensorseal
