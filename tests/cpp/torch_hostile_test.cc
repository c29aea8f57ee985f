// Hostile and corrupt torch checkpoints: every one gets its precise rule (or scan
// verdict), quickly and without a crash. Valid bytes come from real torch
// (tests/fixtures/gen_torch.py: tiny.pt, tiny.legacy.pt, torchscript.pt, hostile/*);
// only the corruption is made here. Specs: docs/formats/torch-zip.md,
// docs/formats/torch-legacy.md.
#include <tensorseal/scan.h>

#include <ctime>
#include <functional>

#include "test_util.h"
#include "torch/constants.h"
#include "util/utf8.h"
#include "zip/constants.h"
#include "zip/reader.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

fs::path dir() { return testing::fixture_dir("gen_torch"); }

std::string fixture(const std::string& name) {
  std::string s = testing::read_all(dir() / name);
  EXPECT_FALSE(s.empty()) << name << ": run tests/fixtures/gen_torch.py (ctest does it)";
  return s;
}

// The error a read of `bytes` throws: rule and kind ("" when it reads fine).
struct Outcome {
  std::string rule;
  ErrorKind kind = ErrorKind::kInternal;
};
Outcome read_outcome(const std::string& bytes, const ReadOptions& options = {}) {
  try {
    (void)read_bytes(testing::bytes_of(bytes), "hostile", options);
  } catch (const Error& e) {
    return {e.rule(), e.kind()};
  }
  return {};
}

// CPU seconds `fn` takes (process CPU time, all threads): the bound is on the work
// done, not on how busy a shared test machine is.
// The CPU-time bounds below hold for optimised builds. Sanitizer builds run the same
// inputs to find memory errors; their instrumented allocator dominates these
// allocation-bound inputs (a million nested lists: 0.2 CPU-s optimised, 2.3 under
// ASan), so they get four times the bound.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kCpuScale = 4.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr double kCpuScale = 4.0;
#else
constexpr double kCpuScale = 1.0;
#endif
#else
constexpr double kCpuScale = 1.0;
#endif

double seconds(const std::function<void()>& fn) {
  const std::clock_t t0 = std::clock();
  fn();
  return static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
}

std::string pickle_bytes(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (auto p : parts) s += p;
  return s;
}

// ---- truncation and bit flips -----------------------------------------------------

void every_prefix_fails(const std::string& file) {
  const std::string whole = fixture(file);
  ASSERT_FALSE(whole.empty());
  ASSERT_EQ(read_outcome(whole).rule, "");  // the whole file reads
  double worst = 0;
  for (std::size_t n = 0; n < whole.size(); ++n) {
    Outcome o;
    worst = std::max(worst, seconds([&] { o = read_outcome(whole.substr(0, n)); }));
    ASSERT_NE(o.rule, "") << file << " cut to " << n << " bytes was accepted";
    ASSERT_NE(o.kind, ErrorKind::kInternal) << file << " cut to " << n << ": " << o.rule;
  }
  EXPECT_LT(worst, 1.0 * kCpuScale);
}

TEST(TorchHostile, ZipTruncatedAtEveryLengthIsAnError) { every_prefix_fails("tiny.pt"); }
TEST(TorchHostile, LegacyTruncatedAtEveryLengthIsAnError) { every_prefix_fails("tiny.legacy.pt"); }

// torch never checks CRC32; tensorseal does: a flipped bit in any record's data
// (data.pkl, a storage, version...) is zip/crc-mismatch.
TEST(TorchHostile, ZipBitFlipInAnyRecordIsCrcMismatch) {
  const std::string whole = fixture("tiny.pt");
  const auto archive = detail::zip::read(testing::bytes_of(whole), "tiny.pt", Limits{});
  std::size_t flips = 0;
  for (const auto& e : archive.entries) {
    SCOPED_TRACE(e.name);
    for (std::uint64_t i = e.data_offset; i < e.data_offset + e.size; ++i)
      for (int bit = 0; bit < 8; ++bit) {
        std::string b = whole;
        b[i] = static_cast<char>(b[i] ^ (1 << bit));
        ASSERT_EQ(read_outcome(b).rule, detail::zip::rules::kCrcMismatch.id) << "byte " << i << " bit " << bit;
        ++flips;
      }
  }
  EXPECT_GT(flips, 8u * 100);
}

// Anywhere in the file (headers, central directory, end records): an error with a
// rule, or a file that still reads (a flip in a field nothing depends on).
TEST(TorchHostile, ZipBitFlipAnywhereNeverCrashes) {
  const std::string whole = fixture("tiny.pt");
  std::size_t errors = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    std::string b = whole;
    b[i] = static_cast<char>(b[i] ^ (1 << (i % 8)));
    Outcome o = read_outcome(b);
    EXPECT_TRUE(o.rule.empty() || o.kind != ErrorKind::kInternal) << "byte " << i << ": " << o.rule;
    errors += !o.rule.empty();
  }
  EXPECT_GT(errors, whole.size() / 2);
}

// Legacy files carry no checksum: a flip in storage data reads as different content
// (the content hash changes), anywhere else it is an error or harmless; never a crash.
TEST(TorchHostile, LegacyBitFlipAnywhereNeverCrashes) {
  const std::string whole = fixture("tiny.legacy.pt");
  const std::string good = content_hash(read_bytes(testing::bytes_of(whole), "tiny").root);
  std::size_t changed = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    std::string b = whole;
    b[i] = static_cast<char>(b[i] ^ (1 << (i % 8)));
    try {
      Checkpoint c = read_bytes(testing::bytes_of(b), "flip");
      changed += content_hash(c.root) != good;
    } catch (const Error& e) {
      EXPECT_NE(e.kind(), ErrorKind::kInternal) << "byte " << i << ": " << e.what();
    }
  }
  EXPECT_GE(changed, 16u + 8u);  // at least every byte of the two storages' data
}

// ---- structural attacks on the zip container ------------------------------------------

TEST(TorchHostile, LocalHeaderDisagreeingWithCentralDirectory) {
  std::string b = fixture("tiny.pt");
  ASSERT_GT(b.size(), 40u);
  b[detail::zip::kLocalHeaderSize] = static_cast<char>(b[detail::zip::kLocalHeaderSize] ^ 0x20);  // first name byte
  EXPECT_EQ(read_outcome(b).rule, detail::zip::rules::kLocalMismatch.id);
}

TEST(TorchHostile, TorchScriptArchiveIsRefused) {
  const std::string b = fixture("torchscript.pt");
  EXPECT_EQ(read_outcome(b).rule, detail::torch::rules::kTorchScript.id);
}

// data.pkl patched (same length) to claim 255 floats for a 4-float record: the
// CVE-2026-24747 shape. Read without CRC checks, as torch reads, to reach the rule.
TEST(TorchHostile, StorageLargerThanItsRecord) {
  std::string b = fixture("tiny.pt");
  const auto archive = detail::zip::read(testing::bytes_of(b), "tiny.pt", Limits{});
  const detail::zip::Entry* pkl = nullptr;
  for (const auto& e : archive.entries)
    if (e.name.ends_with("/data.pkl")) pkl = &e;
  ASSERT_TRUE(pkl);
  // ('storage', FloatStorage, '0', 'cpu', 4): BININT1 4 follows the 'cpu' string.
  std::string_view pk(b.data() + pkl->data_offset, pkl->size);
  const auto cpu = pk.find("cpu");
  ASSERT_NE(cpu, std::string_view::npos);
  const auto k = pk.find("K\x04", cpu);
  ASSERT_NE(k, std::string_view::npos);
  b[pkl->data_offset + k + 1] = '\xff';
  ReadOptions no_crc;
  no_crc.verify_checksums = false;
  EXPECT_EQ(read_outcome(b, no_crc).rule, detail::torch::rules::kStorageTooSmall.id);
  EXPECT_EQ(read_outcome(b).rule, detail::zip::rules::kCrcMismatch.id);  // with checks: the CRC first
}

// ---- pickle-level attacks -------------------------------------------------------------

// os.system via REDUCE: reading builds an opaque object (nothing runs), scan says
// dangerous and names the global.
TEST(TorchHostile, ReduceOsSystemIsDangerousAndInert) {
  for (const char* f : {"hostile/reduce_os_system.pkl", "hostile/evil.pt", "hostile/evil.legacy.pt"}) {
    SCOPED_TRACE(f);
    Checkpoint c = read_file(dir() / f);
    ScanReport r = scan(c);
    EXPECT_EQ(r.verdict, Verdict::kDangerous);
    bool found = false;
    for (const auto& g : r.findings)
      found |= g.module == "posix" && g.name == "system" && g.verdict == Verdict::kDangerous;
    EXPECT_TRUE(found);
  }
}

// STACK_GLOBAL whose module and name come from the memo (MEMOIZE, POP, BINGET): the
// scan still sees os.system.
TEST(TorchHostile, StackGlobalThroughTheMemo) {
  const std::string b =
      pickle_bytes({"\x80\x04", "\x8c\x02os", "\x94", "\x8c\x06system", "\x94", "00", std::string_view("h\x00h\x01", 4),
                    "\x93", "\x8c\x0ctouch /tmp/x", "\x85", "R", "."});
  Checkpoint c = read_bytes(testing::bytes_of(b), "memo-global.pkl");
  ScanReport r = scan(c);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].module, "os");
  EXPECT_EQ(r.findings[0].name, "system");
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
}

// A storage's _load_from_bytes payload (a whole nested torch file) holding os.system:
// found, and located inside the nested file.
TEST(TorchHostile, NestedLoadFromBytesWithDangerousGlobal) {
  for (const char* f : {"hostile/nested_evil.pkl", "hostile/nested_evil_zip.pkl"}) {
    SCOPED_TRACE(f);
    ScanReport r = scan_file(dir() / f);
    EXPECT_EQ(r.verdict, Verdict::kDangerous);
    const ScanFinding* sys = nullptr;
    for (const auto& g : r.findings)
      if (g.name == "system") sys = &g;
    ASSERT_TRUE(sys);
    EXPECT_NE(sys->where.find("/_load_from_bytes#1"), std::string::npos) << sys->where;
  }
}

// 10^6 nested lists (EMPTY_LIST x N, APPEND x N): refused at max_depth in well under
// a second, no recursion on the C++ stack.
TEST(TorchHostile, MillionDeepNestingFailsFast) {
  constexpr std::size_t kN = 1'000'000;
  std::string b = "\x80\x02" + std::string(kN - 1, ']') + std::string(kN - 2, 'a') + ".";
  Outcome o;
  EXPECT_LT(seconds([&] { o = read_outcome(b); }), 1.0 * kCpuScale);
  EXPECT_EQ(o.rule, "pickle/max-depth");
  // A million MARKs: the metastack is bounded too.
  std::string marks = "\x80\x02" + std::string(kN, '(') + ".";
  EXPECT_LT(seconds([&] { o = read_outcome(marks); }), 1.0 * kCpuScale);
  EXPECT_EQ(o.rule, "pickle/max-depth");
}

// Memo bomb: each level is a list holding the previous level twice (BINGET, BINGET),
// 64 levels = 2^64 elements once expanded. Refused by the max_alloc accounting.
TEST(TorchHostile, MemoBombIsRefused) {
  std::string b("\x80\x02]q\x00", 5);
  for (int i = 0; i < 64; ++i) {
    b += "(h";
    b += static_cast<char>(i);
    b += "h";
    b += static_cast<char>(i);
    b += "lq";
    b += static_cast<char>(i + 1);
  }
  b += ".";
  Outcome o;
  EXPECT_LT(seconds([&] { o = read_outcome(b); }), 1.0 * kCpuScale);
  EXPECT_EQ(o.rule, "pickle/max-alloc");
}

// A storage persistent id whose element count overflows 64-bit bytes.
TEST(TorchHostile, StorageNumelOverflow) {
  // data.pkl alone cannot reach the rule without a zip around it; a legacy file's
  // object pickle can: magic, protocol, sys_info, object, keys, built from tiny's.
  const std::string whole = fixture("tiny.legacy.pt");
  std::string b = whole;
  // Every storage pid has 'cpu' then the numel; make the first one 2^62 (LONG1).
  const auto cpu = b.find("cpu");
  ASSERT_NE(cpu, std::string::npos);
  const auto k = b.find("K\x04", cpu);
  ASSERT_NE(k, std::string::npos);
  b.replace(k, 2, std::string("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40", 10));
  EXPECT_EQ(read_outcome(b).rule, rules::kSizeOverflow.id);
}

// ---- legacy format rules (bytes patched in a real torch.save legacy file) -----------

std::string patched(std::string b, std::string_view from, std::string_view to, std::size_t after = 0) {
  const auto at = b.find(from, after);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) b.replace(at, from.size(), to);
  return b;
}

TEST(TorchHostile, LegacyProtocolVersionMustBe1001) {
  const std::string b =
      patched(fixture("tiny.legacy.pt"), std::string_view("M\xe9\x03", 3), std::string_view("M\xea\x03", 3));
  EXPECT_EQ(read_outcome(b).rule, detail::torch::rules::kLegacyProtocol.id);
}

TEST(TorchHostile, LegacySysInfoNeedsLittleEndianFlag) {
  const std::string b = patched(fixture("tiny.legacy.pt"), "little_endian", "little_endiaX");
  EXPECT_EQ(read_outcome(b).rule, detail::torch::rules::kLegacySysInfo.id);
}

// The key list after the object pickle must name exactly the storages the object
// uses, once each.
TEST(TorchHostile, LegacyKeyListNamesUnusedStorage) {
  const std::string whole = fixture("tiny.legacy.pt");
  // The key list is the last pickle: "]q\x00(X<len><key>..." ; change the first key's
  // last digit there (keys are decimal addresses).
  const auto list = whole.rfind("]q");
  ASSERT_NE(list, std::string::npos);
  const auto x = whole.find('X', list);
  ASSERT_NE(x, std::string::npos);
  std::string b = whole;
  const std::size_t last = x + 5 + static_cast<unsigned char>(whole[x + 1]) - 1;
  b[last] = b[last] == '1' ? '2' : '1';
  EXPECT_EQ(read_outcome(b).rule, detail::torch::rules::kLegacyKeys.id);
}

TEST(TorchHostile, LegacyStorageRecordLargerThanFile) {
  std::string b = fixture("tiny.legacy.pt");
  // Storage records follow the key list's STOP: u64 element count, then the data.
  // (tiny's data bytes hold no '.', so the last '.' is that STOP.)
  const auto stop = b.rfind('.');
  ASSERT_NE(stop, std::string::npos);
  ASSERT_LT(static_cast<unsigned char>(b[stop + 1]), 5);  // 1 ("n") or 4 ("w"), little-endian
  b[stop + 8] = '\x10';
  EXPECT_EQ(read_outcome(b).rule, detail::torch::rules::kLegacyStorageHeader.id);
}

TEST(TorchHostile, LegacyTrailingBytes) {
  EXPECT_EQ(read_outcome(fixture("tiny.legacy.pt") + "x").rule, detail::torch::rules::kLegacyTrailing.id);
}

// The object's persistent id claims more elements than the storage record holds.
TEST(TorchHostile, LegacyStorageSmallerThanItsPersistentId) {
  const std::string whole = fixture("tiny.legacy.pt");
  const auto cpu = whole.find("cpu");
  ASSERT_NE(cpu, std::string::npos);
  const std::string b = patched(whole, "K\x04", "K\x05", cpu);
  EXPECT_EQ(read_outcome(b).rule, detail::torch::rules::kStorageTooSmall.id);
}

TEST(TorchHostile, PickleTrailingBytes) {
  EXPECT_EQ(read_outcome(fixture("hostile/reduce_os_system.pkl") + "\n").rule,
            detail::torch::rules::kPickleTrailing.id);
}

// Every error message is one line of valid UTF-8 (the CLI prints it; the Python module
// decodes it). DISABLED: src/pickle/vm.cc copies raw pickle bytes into some details
// (pickle/bad-memo-index "PUT index '<bytes>'"), e.g. after flipping byte 24 of
// tiny.legacy.pt. Enable once the VM escapes them.
TEST(TorchHostile, ErrorMessagesAreOneUtf8Line) {
  for (const char* file : {"tiny.pt", "tiny.legacy.pt"}) {
    const std::string whole = fixture(file);
    for (std::size_t i = 0; i < whole.size(); ++i) {
      std::string b = whole;
      b[i] = static_cast<char>(b[i] ^ (1 << (i % 8)));
      try {
        (void)read_bytes(testing::bytes_of(b), "flip");
      } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_EQ(m.find('\n'), std::string::npos) << file << " byte " << i << ": " << m;
        EXPECT_FALSE(detail::util::first_invalid_utf8(m)) << file << " byte " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tensorseal
