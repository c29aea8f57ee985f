// scan_file against the names, encodings, nested archives and directory layouts of
// issue 32, one test per rule (docs/security.md, "Names and encodings the loaders
// accept", "Directories"). Archives here are hand-made (hostile input); the ground truth
// that stock loaders run each shape is proved in tests/py/test_scan_bypass.py.
#include <bzlib.h>
#include <lzma.h>
#include <tensorseal/scan.h>
#include <tensorseal/training_dir.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "numpy/npy.h"
#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

// os.system("id") called by REDUCE: protocol 2 and protocol 0.
const std::string kEvilP2 =
    "\x80\x02"
    "cposix\nsystem\nX\x02\x00\x00\x00id\x85R."s;
const std::string kEvilP0 = "cposix\nsystem\n(Vid\ntR."s;

void le(std::string& s, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}

struct Member {
  std::string name, data;
  std::uint16_t method = 0;
  std::string raw;  // the compressed bytes, for method != 0
};

// A zip of `members` (no data descriptors, no zip64).
std::string zip(const std::vector<Member>& members) {
  std::string out, central;
  for (const auto& m : members) {
    const std::string& stored = m.method ? m.raw : m.data;
    const auto crc = crc32(0, reinterpret_cast<const Bytef*>(m.data.data()), static_cast<uInt>(m.data.size()));
    const std::uint64_t at = out.size();
    std::string common;
    le(common, 20, 2), le(common, 0, 2), le(common, m.method, 2), le(common, 0, 4), le(common, crc, 4);
    le(common, stored.size(), 4), le(common, m.data.size(), 4), le(common, m.name.size(), 2), le(common, 0, 2);
    out += "PK\3\4" + common + m.name + stored;
    std::string c = "PK\1\2";
    le(c, 20, 2);
    c += common;
    le(c, 0, 2), le(c, 0, 2), le(c, 0, 2), le(c, 0, 4), le(c, at, 4);
    central += c + m.name;
  }
  std::string end = "PK\5\6";
  le(end, 0, 4), le(end, members.size(), 2), le(end, members.size(), 2), le(end, central.size(), 4);
  le(end, out.size(), 4), le(end, 0, 2);
  return out + central + end;
}

// A version-1 .npy of one element with this descr literal, then `data`.
std::string npy(const std::string& descr, const std::string& data, int version = 1) {
  std::string h = "{'descr': " + descr + ", 'fortran_order': False, 'shape': (1,), }";
  const std::size_t prefix = version == 1 ? 10 : 12;
  h += std::string((64 - (prefix + h.size() + 1) % 64) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY"s + static_cast<char>(version) + '\0';
  le(out, h.size(), version == 1 ? 2 : 4);
  return out + h + data;
}

bool names(const ScanReport& r, std::string_view module, std::string_view name) {
  for (const auto& f : r.findings)
    if (f.module == module && f.name == name) return true;
  return false;
}

TEST(ScanNames, PklNamesInAnyCase) {
  const ScanReport r =
      testing::scan_bytes("upper.pt", zip({{"archive/DATA.PKL", kEvilP2}, {"archive/version", "3\n"}}));
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  EXPECT_TRUE(names(r, "posix", "system"));
}

TEST(ScanNames, MembersOpeningWithAnyOpcodeArePickleCandidates) {
  ScanReport r = testing::scan_bytes("p0.zip", zip({{"payload", kEvilP0}}));
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  EXPECT_TRUE(names(r, "posix", "system"));
  // Text that happens to open with an opcode ('l' LIST) and is no pickle: left alone.
  r = testing::scan_bytes("text.zip", zip({{"byteorder", "little"}, {"notes", "plain text"}}));
  EXPECT_EQ(r.verdict, Verdict::kSafe);
}

TEST(ScanNames, TensorRecordsAreNotPickles) {
  // Raw storage bytes under a data.pkl's data/ folder: no loader unpickles them.
  const ScanReport r = testing::scan_bytes(
      "records.pt",
      zip({{"archive/data.pkl", "\x80\x02}."s}, {"archive/data/0", kEvilP2}, {"archive/version", "3\n"}}));
  EXPECT_EQ(r.verdict, Verdict::kSafe);
}

TEST(ScanNames, NpyMembersByTheirMagic) {
  for (const char* name : {"x", "X.NPY", "weights.bin"}) {
    const ScanReport r = testing::scan_bytes("magic.npz", zip({{name, npy("'|O'", kEvilP2)}}));
    EXPECT_EQ(r.verdict, Verdict::kDangerous) << name;
    EXPECT_TRUE(names(r, "posix", "system")) << name;
  }
}

std::string bzip2(const std::string& data) {
  std::string out(data.size() + data.size() / 100 + 600, '\0');
  unsigned len = static_cast<unsigned>(out.size());
  EXPECT_EQ(BZ2_bzBuffToBuffCompress(out.data(), &len, const_cast<char*>(data.data()),
                                     static_cast<unsigned>(data.size()), 9, 0, 0),
            BZ_OK);
  out.resize(len);
  return out;
}

// zipfile's LZMA member: u8 9, u8 4 (the liblzma version it names), u16 le 5, the
// LZMA1 properties, the raw stream with an end marker.
std::string lzma(const std::string& data) {
  lzma_options_lzma opt;
  lzma_lzma_preset(&opt, 6);
  lzma_filter filters[2] = {{LZMA_FILTER_LZMA1, &opt}, {LZMA_VLI_UNKNOWN, nullptr}};
  std::uint32_t psize = 0;
  EXPECT_EQ(lzma_properties_size(&psize, &filters[0]), LZMA_OK);
  std::string props(psize, '\0');
  EXPECT_EQ(lzma_properties_encode(&filters[0], reinterpret_cast<std::uint8_t*>(props.data())), LZMA_OK);
  lzma_stream s = LZMA_STREAM_INIT;
  EXPECT_EQ(lzma_raw_encoder(&s, filters), LZMA_OK);
  std::string out(data.size() + 1024, '\0');
  s.next_in = reinterpret_cast<const std::uint8_t*>(data.data());
  s.avail_in = data.size();
  s.next_out = reinterpret_cast<std::uint8_t*>(out.data());
  s.avail_out = out.size();
  EXPECT_EQ(lzma_code(&s, LZMA_FINISH), LZMA_STREAM_END);
  out.resize(out.size() - s.avail_out);
  lzma_end(&s);
  std::string head = "\x09\x04"s;
  le(head, psize, 2);
  return head + props + out;
}

TEST(ScanNames, Bzip2AndLzmaMembersAreDecompressed) {
  const std::string image = npy("'|O'", kEvilP2);
  for (auto [method, raw] : {std::pair<std::uint16_t, std::string>{12, bzip2(image)}, {14, lzma(image)}}) {
    const ScanReport r = testing::scan_bytes("methods.npz", zip({{"x.npy", image, method, raw}}));
    EXPECT_EQ(r.verdict, Verdict::kDangerous) << method;
    EXPECT_TRUE(names(r, "posix", "system")) << method;
    const ScanReport ok = testing::scan_bytes(
        "methods-ok.npz",
        zip({{"x.npy", npy("'<f8'", std::string(8, '\0')), method,
              method == 12 ? bzip2(npy("'<f8'", std::string(8, '\0'))) : lzma(npy("'<f8'", std::string(8, '\0')))}}));
    EXPECT_EQ(ok.verdict, Verdict::kSafe) << method;
  }
}

std::optional<std::uint64_t> pickled(const std::string& descr, int version = 1) {
  return detail::numpy::pickled_data(testing::bytes_of(npy(descr, "")));
}

TEST(ScanNames, NpyDataIsAPickleUnlessTheHeaderProvesOtherwise) {
  // Every spelling numpy turns into an object dtype (and anything not provably plain).
  for (const char* d : {"'O'", "'|O8'", "'<O'", "'object'", "'object_'", "'i4,O'", "'(2,)O'", "u'O'", "'\\x4f'",
                        "\"O\"", "('|O', (2,))", "[('a', '<i4'), ('b', '|O')]", "[('s', [('o', 'O')])]",
                        "[(('title', 'a'), 'O')]", "'o' 'bject'", "b'O'", "dtype('O')"})
    EXPECT_TRUE(pickled(d).has_value()) << d;
  EXPECT_TRUE(pickled("'O'", 3).has_value());
  // Plain dtypes, structs and subarrays of plain fields: numpy reads bytes, not a pickle.
  for (const char* d : {"'<f4'", "'|u1'", "'<U3'", "'|S5'", "'<M8[ns]'", "[('a', '<i4'), ('b', '<f8')]",
                        "('<f4', (3,))", "[('v', '<f4', (3,)), ('', '|V4')]", "[('\xc3\xa9', '<f4')]"})
    EXPECT_FALSE(pickled(d).has_value()) << d;
  // Headers numpy refuses before it reads data.
  EXPECT_FALSE(
      detail::numpy::pickled_data(testing::bytes_of("\x93NUMPY\x01\x00\x10\x00['descr', 'O']   \n"s)).has_value());
  // A repeated key: literal_eval keeps the last one; not proven here, so scanned.
  const std::string dup = "{'descr': '<f4', 'descr': 'O', 'fortran_order': False, 'shape': (1,), }";
  std::string img = "\x93NUMPY\x01\x00"s;
  le(img, dup.size(), 2);
  EXPECT_TRUE(detail::numpy::pickled_data(testing::bytes_of(img + dup)).has_value());
}

TEST(ScanNames, StructuredArraysScanSafe) {
  const std::string rec = npy("[('id', '<i4'), ('x', '<f8')]", std::string(12, '\0'));
  EXPECT_EQ(testing::scan_bytes("rec.npy", rec).verdict, Verdict::kSafe);
  EXPECT_EQ(testing::scan_bytes("rec.npz", zip({{"r.npy", rec}})).verdict, Verdict::kSafe);
  const ScanReport r = testing::scan_bytes("recobj.npy", npy("[('id', '<i4'), ('o', '|O')]", kEvilP2));
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
}

TEST(ScanNames, ArchivesInsideArchives) {
  const std::string inner = zip({{"archive/data.pkl", kEvilP2}, {"archive/version", "3\n"}});
  ScanReport r = testing::scan_bytes("nested.zip", zip({{"model.pt", inner}}));
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  bool located = false;
  for (const auto& f : r.findings) located = located || f.where.find("/model.pt/archive/data.pkl") != std::string::npos;
  EXPECT_TRUE(located);
  // Nesting is bounded by max_nested_files (8): nine levels fail closed, an error
  // (the payload deepest inside is never reached, so nothing unsafe was seen).
  std::string deep = inner;
  for (int i = 0; i < 9; ++i) deep = zip({{"level.zip", deep}});
  EXPECT_EQ(testing::rule_of([&] { (void)testing::scan_bytes("deep.zip", deep); }), "torch/nested-files-too-deep");
}

void write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

TEST(ScanNames, DirectoriesAreWalkedRecursively) {
  testing::TempDir d;
  write(d.path() / "README", "plain text, no checkpoint\n");
  write(d.path() / "config.json", "{}");
  write(d.path() / "sub" / "deeper" / "optimizer.pt", zip({{"archive/data.pkl", kEvilP2}}));
  const ScanReport r = scan_file(d.path());
  EXPECT_EQ(r.verdict, Verdict::kDangerous);
  EXPECT_TRUE(names(r, "posix", "system"));
}

TEST(ScanNames, HubCacheLinksAreFollowedInsideTheRepository) {
  testing::TempDir d;
  const fs::path repo = d.path() / "models--org--m";
  write(repo / "blobs" / "abc", kEvilP2);
  write(repo / "refs" / "main", std::string(40, 'a'));
  const fs::path snap = repo / "snapshots" / std::string(40, 'a');
  fs::create_directories(snap);
  fs::create_symlink(fs::path("..") / ".." / "blobs" / "abc", snap / "pytorch_model.bin");
  for (const fs::path& p : {snap, repo}) {
    const ScanReport r = scan_file(p);
    EXPECT_EQ(r.verdict, Verdict::kDangerous) << p;
    EXPECT_TRUE(names(r, "posix", "system")) << p;
  }
  // A link out of the repository: a loader would read it; scan refuses to vouch.
  write(d.path() / "elsewhere.bin", "\x80\x02}.");
  fs::create_symlink(d.path() / "elsewhere.bin", snap / "other.bin");
  const ScanReport r = scan_file(snap);
  EXPECT_TRUE(r.incomplete);
  EXPECT_NE(r.error.find("[dir/entry]"), std::string::npos) << r.error;
  fs::remove(snap / "pytorch_model.bin");
  EXPECT_EQ(testing::rule_of([&] { (void)scan_file(snap); }), "dir/entry");
}

}  // namespace
}  // namespace tensorseal
