// torch 0.1's tar checkpoints and the tar reader under them (docs/formats/tar.md).
// Valid archives come from the producer (tests/py/producers/torch_tar.py via
// tests/fixtures/gen_tar.py: Python's tarfile and pickle, each file read by today's
// torch.load, which also re-saved it as <name>.zip.pt); hostile archives are built
// here byte by byte, one per rule, each asserting its rule id and byte offset.
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tar/constants.h"
#include "tar/reader.h"
#include "test_util.h"
#include "torch/constants.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
namespace tr = detail::tar::rules;
namespace tt = detail::torch::rules;

fs::path dir() { return testing::fixture_dir("gen_tar"); }

nlohmann::json manifest() {
  std::ifstream f(dir() / "manifest.json");
  EXPECT_TRUE(f.good()) << "run tests/fixtures/gen_tar.py (ctest does it)";
  return nlohmann::json::parse(f, nullptr, false);
}

const char* const kFiles[] = {"ustar.pt", "gnu.pt", "pax.pt", "hardlink.pt"};

// ---- hostile archives, byte by byte -----------------------------------------------

std::string octal(std::uint64_t v, std::size_t width) {  // width - 1 digits, then NUL
  std::string s(width - 1, '0');
  for (std::size_t i = width - 1; i-- > 0; v >>= 3) s[i] = static_cast<char>('0' + (v & 7));
  return s + '\0';
}

struct Header {
  std::string name;
  std::uint64_t size = 0;
  char type = '0';
  std::string link;
  std::string magic = std::string(detail::tar::kUstarMagic);
  std::string prefix;
};

// Sets the checksum of a 512-byte header to the unsigned sum of its bytes.
void seal(std::string& block) {
  block.replace(148, 8, "        ");
  std::uint64_t sum = 0;
  for (unsigned char c : block) sum += c;
  block.replace(148, 8, octal(sum, 7) + " ");
}

std::string header(const Header& h) {
  std::string b(512, '\0');
  b.replace(0, h.name.size(), h.name);
  b.replace(100, 8, octal(0644, 8));
  b.replace(108, 8, octal(0, 8));
  b.replace(116, 8, octal(0, 8));
  b.replace(124, 12, octal(h.size, 12));
  b.replace(136, 12, octal(1'500'000'000, 12));
  b[156] = h.type;
  b.replace(157, h.link.size(), h.link);
  b.replace(257, 8, h.magic);
  b.replace(345, h.prefix.size(), h.prefix);
  seal(b);
  return b;
}

std::string padded(std::string data) {
  data.append((512 - data.size() % 512) % 512, '\0');
  return data;
}
std::string member(const std::string& name, const std::string& data, char type = '0') {
  return header({.name = name, .size = data.size(), .type = type}) + padded(data);
}
std::string pax(const std::string& records) { return member("././@PaxHeader", records, 'x'); }
std::string record(const std::string& kv) {  // "len key=value\n", len counting itself
  std::size_t n = kv.size() + 2;
  while (std::to_string(n).size() + kv.size() + 2 != n) ++n;
  return std::to_string(n) + " " + kv + "\n";
}
const std::string kEnd(1024, '\0');

// Pickles (protocol 2), hand-written.
std::string le(std::uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}
std::string pk_int(std::int32_t v) { return "J" + le(static_cast<std::uint32_t>(v), 4); }
std::string pk_str(const std::string& s) { return "X" + le(s.size(), 4) + s; }
std::string pk_global(const std::string& m, const std::string& n) { return "c" + m + "\n" + n + "\n"; }
std::string pk(const std::string& body) { return "\x80\x02" + body + "."; }
std::string pk_tuple3(const std::string& a, const std::string& b, const std::string& c) {
  return pk(a + b + c + "\x87");
}

// A minimal torch-tar: storage 7 (FloatStorage of 2 elements), tensor 9 over it, the
// object the tensor itself. Each part replaceable.
struct Parts {
  std::string sys_info = pk("}" + pk_str("little_endian") + "\x88s");
  std::string storages = pk(pk_int(1)) + pk_tuple3(pk_int(7), pk_str("cpu"), pk_global("torch", "FloatStorage")) +
                         le(2, 8) + std::string("\0\0\x80?\0\0\0@", 8) + pk("]");
  std::string tensors = pk(pk_int(1)) + pk_tuple3(pk_int(9), pk_int(7), pk_global("torch", "FloatTensor")) + le(1, 4) +
                        le(0, 4) + le(2, 8) + le(1, 8) + le(0, 8);
  std::string object = pk(pk_str("9") + "Q");
  std::string file() const {
    return member("sys_info", sys_info) + member("storages", storages) + member("tensors", tensors) +
           member("pickle", object) + kEnd;
  }
};
// Offsets in Parts::file(): each member is a header block plus its padded data.
std::uint64_t data_of(const Parts& p, const std::string& name) {
  std::uint64_t at = 512 + padded(p.sys_info).size();
  if (name == "storages") return at + 512;
  at += 512 + padded(p.storages).size();
  if (name == "tensors") return at + 512;
  at += 512 + padded(p.tensors).size();
  return at + 512;  // pickle
}

struct Outcome {
  std::string rule;
  std::uint64_t offset = kNoOffset;
};
Outcome read_outcome(const std::string& bytes, const ReadOptions& options = {}) {
  try {
    (void)read_bytes(testing::bytes_of(bytes), "hostile.pt", options);
  } catch (const Error& e) {
    return {e.rule(), e.offset()};
  }
  return {};
}
void expect_refused(const std::string& bytes, Rule rule, std::uint64_t offset, const ReadOptions& options = {}) {
  const Outcome o = read_outcome(bytes, options);
  EXPECT_EQ(o.rule, rule.id);
  EXPECT_EQ(o.offset, offset) << rule.id;
}

// ---- real files ---------------------------------------------------------------------

TEST(TarRead, FilesMatchTorchsOwnResave) {
  const auto m = manifest();
  ASSERT_TRUE(m.is_object());
  for (const char* name : kFiles) {
    SCOPED_TRACE(name);
    const Checkpoint tar = read_file(dir() / name);
    EXPECT_EQ(tar.format, Format::kTorchTar);
    const Checkpoint zip = read_file(dir() / (std::string(name).substr(0, std::strlen(name) - 3) + ".zip.pt"));
    EXPECT_EQ(content_hash(tar.root), content_hash(zip.root));
    const auto a = collect_tensors(tar.root), b = collect_tensors(zip.root);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].path, b[i].path);
      EXPECT_EQ(a[i].tensor->dtype, b[i].tensor->dtype) << a[i].path;
      EXPECT_EQ(a[i].tensor->shape, b[i].tensor->shape) << a[i].path;
      EXPECT_EQ(a[i].tensor->strides, b[i].tensor->strides) << a[i].path;
      EXPECT_EQ(a[i].tensor->storage_offset, b[i].tensor->storage_offset) << a[i].path;
    }
  }
}

TEST(TarRead, MembersAreNamedAsTarfileNamesThem) {
  const auto m = manifest();
  for (const char* name : kFiles) {
    SCOPED_TRACE(name);
    const std::string bytes = testing::read_all(dir() / name);
    const auto a = detail::tar::read(testing::bytes_of(bytes), name, Limits{});
    const auto& want = m["files"][name];
    ASSERT_EQ(a.members.size(), want["members"].size());
    for (std::size_t i = 0; i < a.members.size(); ++i) {
      const auto& mem = a.members[i];
      EXPECT_EQ(mem.name, want["members"][i].get<std::string>());
      EXPECT_EQ(mem.hard_link, want["links"].contains(mem.name)) << mem.name;
      if (!mem.hard_link) continue;
      // A hard link reads as the earlier member it names (tarfile's extractfile).
      const auto& target = a.members[mem.target];
      EXPECT_EQ(target.name, want["links"][mem.name].get<std::string>());
      EXPECT_EQ(mem.data_offset, target.data_offset);
      EXPECT_EQ(mem.size, target.size);
    }
  }
  // The dialects tarfile wrote: a ustar prefix, GNU long names, pax records.
  auto dialect = [](const char* f) {
    const std::string bytes = testing::read_all(dir() / f);
    return detail::tar::read(testing::bytes_of(bytes), f, Limits{}).dialect.text();
  };
  EXPECT_EQ(dialect("ustar.pt"), "ustar");
  EXPECT_EQ(dialect("gnu.pt"), "gnu+long-names");
  EXPECT_EQ(dialect("pax.pt"), "ustar+pax");
}

TEST(TarRead, SharedStoragesStayShared) {
  const Checkpoint c = read_file(dir() / "ustar.pt");
  std::map<std::string, std::shared_ptr<const Tensor>> t;
  for (const auto& r : collect_tensors(c.root)) t[r.path] = r.tensor;
  ASSERT_TRUE(t.count("fc.weight") && t.count("rows") && t.count("fc.weight_t"));
  EXPECT_EQ(t["fc.weight"]->storage, t["rows"]->storage);
  EXPECT_EQ(t["fc.weight"]->storage, t["fc.weight_t"]->storage);
  EXPECT_EQ(t["rows"]->storage_offset, 3);
  EXPECT_EQ(t["fc.weight_t"]->strides, (std::vector<std::int64_t>{1, 3}));
  // Tied weights: one tensor, twice (collect_tensors visits a node once).
  EXPECT_EQ(t.count("head.weight"), 0u);
}

TEST(TarRead, StorageViewsAndModuleClasses) {
  const Checkpoint c = read_file(dir() / "pax.pt");
  const Dict& d = c.root.as_dict();
  const Value* base = d.find(std::string_view("base"));
  const Value* view = d.find(std::string_view("view_storage"));
  const Value* arch = d.find(std::string_view("arch"));
  ASSERT_TRUE(base && view && arch);
  ASSERT_TRUE(view->is(Value::Kind::kStorage));
  const auto& root = base->as_tensor()->storage;
  // The view is elements 2..8 of base's storage, not a copy.
  EXPECT_EQ(view->as_storage()->bytes().data(), root->bytes().data() + 2 * 8);
  EXPECT_EQ(view->as_storage()->size(), 6u * 8);
  EXPECT_TRUE(arch->is_global("torch.nn.modules.linear", "Linear"));
}

TEST(TarRead, FactsForExplain) {
  const Checkpoint c = read_file(dir() / "ustar.pt");
  std::map<std::string, std::string> facts;
  for (const auto& f : c.facts) facts.emplace(f.topic, f.value);
  EXPECT_EQ(facts["tar.dialect"], "ustar");
  EXPECT_TRUE(facts.count("storage.key"));
  EXPECT_TRUE(facts.count("torch.sys_info"));
  EXPECT_TRUE(facts["torch.unexpected_records"].starts_with("notes/"));
}

TEST(TarRead, MinimalHandBuiltArchiveReads) {
  const Checkpoint c = read_bytes(testing::bytes_of(Parts{}.file()), "min.pt");
  ASSERT_TRUE(c.root.is(Value::Kind::kTensor));
  EXPECT_EQ(c.root.as_tensor()->shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(c.root.as_tensor()->dtype, DType::kFloat32);
}

TEST(TarRead, ImportingPicklePrefixIsAmbiguous) {
  // A first member named so that the archive's first bytes are a pickle importing
  // os.system: pickle.load would run it, torch.load reads the tar. Refused unless the
  // format is asked for.
  const std::string f = member("cos\nsystem\n", "x") + Parts{}.file().substr(0, Parts{}.file().size() - 1024) + kEnd;
  expect_refused(f, rules::kAmbiguousFormat, 0);
  ReadOptions as_tar;
  as_tar.format = Format::kTorchTar;
  EXPECT_EQ(read_outcome(f, as_tar).rule, "");
}

TEST(TarRead, CanonWritesTheCanonicalTorchZip) {
  const Checkpoint c = read_file(dir() / "gnu.pt");
  ASSERT_EQ(format_info(Format::kTorchTar)->canonical, Format::kTorchZip);
  EXPECT_FALSE(format_info(Format::kTorchTar)->writable);
  const std::string out = write_bytes(c.root, Format::kTorchZip);
  EXPECT_EQ(content_hash(read_bytes(testing::bytes_of(out), "canon.pt").root), content_hash(c.root));
}

// ---- every rule ---------------------------------------------------------------------

TEST(TarHostile, Truncated) {
  const std::string f = Parts{}.file();
  expect_refused(f.substr(0, 700), tr::kTruncated, 124);  // the first member's data (padded) cut short
  expect_refused(f.substr(0, f.size() - 1024), tr::kTruncated, f.size() - 1024);  // no end block
}

TEST(TarHostile, BadChecksum) {
  std::string f = Parts{}.file();
  const std::uint64_t second = 512 + padded(Parts{}.sys_info).size();
  f[second + 1] ^= 0x20;  // 'storages' -> 'sTorages', checksum left alone
  expect_refused(f, tr::kBadChecksum, second + 148);
}

TEST(TarHostile, BadNumber) {
  // In the second header: tarfile would end the archive there and read no more.
  std::string f = Parts{}.file();
  const std::uint64_t second = 512 + padded(Parts{}.sys_info).size();
  std::string h = f.substr(second, 512);
  h.replace(100, 8, std::string("06x4\0\0\0\0", 8));
  seal(h);
  f.replace(second, 512, h);
  expect_refused(f, tr::kBadNumber, second + 100);
  // In the first header: tarfile raises, torch.load reads the file as a pickle, so it
  // is no tar (and, here, nothing tensorseal knows).
  std::string g = Parts{}.file();
  std::string first = g.substr(0, 512);
  first.replace(100, 8, std::string("06x4\0\0\0\0", 8));
  seal(first);
  g.replace(0, 512, first);
  EXPECT_FALSE(detail::tar::looks_like_tar(testing::bytes_of(g)));
  expect_refused(g, rules::kUnknownFormat, 0);
  // Python's int() spellings tarfile takes in a first header are recognised, then refused.
  std::string k = Parts{}.file();
  std::string sp = k.substr(0, 512);
  sp.replace(100, 8, std::string("0o_644\0\0", 8));
  seal(sp);
  k.replace(0, 512, sp);
  EXPECT_TRUE(detail::tar::looks_like_tar(testing::bytes_of(k)));
  expect_refused(k, tr::kBadNumber, 100);
}

TEST(TarHostile, Base256NegativeSize) {
  std::string f = Parts{}.file();
  std::string h = f.substr(0, 512);
  h.replace(124, 12, std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xf0", 12));
  seal(h);
  f.replace(0, 512, h);
  expect_refused(f, tr::kNegativeSize, 124);
}

TEST(TarHostile, Base256SizeIsRead) {
  // The same size in GNU base-256 reads like the octal one.
  Parts p;
  std::string f = p.file();
  std::string h = f.substr(0, 512);
  std::string b256(12, '\0');
  b256[0] = '\x80';
  b256[11] = static_cast<char>(p.sys_info.size());
  h.replace(124, 12, b256);
  seal(h);
  f.replace(0, 512, h);
  EXPECT_EQ(read_outcome(f).rule, "");
}

TEST(TarHostile, BadMagic) {
  std::string f = Parts{}.file();
  std::string h = f.substr(0, 512);
  h.replace(257, 8, std::string(8, '\0'));  // pre-POSIX (v7) header
  seal(h);
  f.replace(0, 512, h);
  expect_refused(f, tr::kBadMagic, 257);
}

TEST(TarHostile, GnuHeaderWithPrefixIsAmbiguous) {
  Parts p;
  const std::string f = header({.name = "sys_info",
                                .size = p.sys_info.size(),
                                .magic = std::string(detail::tar::kGnuMagic),
                                .prefix = "x"}) +
                        padded(p.sys_info) + kEnd;
  expect_refused(f, tr::kAmbiguousPrefix, 345);
}

TEST(TarHostile, SymlinkIsAnUnsupportedType) {
  Parts p;
  const std::string f = header({.name = "storages", .type = '2', .link = "/etc/passwd"}) +
                        member("tensors", p.tensors) + member("pickle", p.object) + kEnd;
  expect_refused(f, tr::kUnsupportedType, 156);
}

TEST(TarHostile, MemberNameTraversal) {
  Parts p;
  expect_refused(member("../storages", p.storages) + kEnd, tr::kUnsafeName, 0);
  expect_refused(member("/tmp/storages", p.storages) + kEnd, tr::kUnsafeName, 0);
  expect_refused(member("./pickle", p.object) + kEnd, tr::kUnsafeName, 0);
  expect_refused(header({.name = "x", .size = 0, .prefix = "a/.."}) + kEnd, tr::kUnsafeName, 345);
  // Through a pax path: the offset is the record's value.
  const std::string rec = record("path=a/../../pickle");
  expect_refused(pax(rec) + member("pickle", p.object) + kEnd, tr::kUnsafeName, 512 + rec.find('=') + 1);
}

TEST(TarHostile, DuplicateMembers) {
  Parts p;
  const std::string f = member("pickle", p.object) + member("pickle", pk(pk_int(1))) + kEnd;
  expect_refused(f, tr::kDuplicateMember, 512 + padded(p.object).size());
}

TEST(TarHostile, BadHardLinks) {
  Parts p;
  // A link to no earlier member: the offset is the linkname field.
  expect_refused(header({.name = "pickle", .type = '1', .link = "later"}) + member("later", p.object) + kEnd,
                 tr::kBadLink, 157);
  // A link with data: tarfile skips none of it.
  expect_refused(member("x", p.object) + header({.name = "pickle", .size = 512, .type = '1', .link = "x"}) +
                     std::string(512, '\0') + kEnd,
                 tr::kBadLink, 512 + padded(p.object).size() + 124);
  // A link to itself is not to an earlier member either.
  expect_refused(header({.name = "pickle", .type = '1', .link = "pickle"}) + kEnd, tr::kBadLink, 157);
}

TEST(TarHostile, BadPaxRecords) {
  Parts p;
  expect_refused(pax(record("GNU.sparse.size=4")) + member("pickle", p.object) + kEnd, tr::kBadPax, 512);
  expect_refused(pax("99 path=pickle\n") + member("pickle", p.object) + kEnd, tr::kBadPax, 512);
  expect_refused(pax(record("size=12x")) + member("pickle", p.object) + kEnd, tr::kBadPax, 512 + 8);
  expect_refused(pax(record("mtime=1") + record("mtime=2")) + member("pickle", p.object) + kEnd, tr::kBadPax,
                 512 + record("mtime=1").size());
  expect_refused(pax(record("mtime=1")) + kEnd, tr::kBadPax, 0);  // no member follows
}

TEST(TarHostile, PaxSizeLying) {
  Parts p;
  // The header says the member's true size, the pax record another: readers disagree.
  const std::string f = pax(record("size=1")) + member("pickle", p.object) + kEnd;
  expect_refused(f, tr::kPaxSizeMismatch, 1024 + 124);
  // A pax size past the end of the file (the header's size 0: tarfile's own way).
  const std::string g = pax(record("size=99999")) + header({.name = "pickle"}) + padded(p.object) + kEnd;
  expect_refused(g, tr::kTruncated, 1024 + 124);
}

TEST(TarHostile, BadGnuLongNames) {
  Parts p;
  const std::string name = "pickle";
  // A long name with bytes after its NUL, one with no member after it, and a member
  // named by both a long name and a pax path.
  expect_refused(member("././@LongLink", name + std::string("\0z", 2), 'L') + member("x", p.object) + kEnd,
                 tr::kBadLongName, 512 + name.size());
  expect_refused(member("././@LongLink", name, 'L') + kEnd, tr::kBadLongName, 0);
  expect_refused(member("././@LongLink", name, 'L') + pax(record("path=other")) + member("x", p.object) + kEnd,
                 tr::kBadLongName, 0);
  // A good long name names the member.
  Parts q;
  const std::string f = member("sys_info", q.sys_info) + member("storages", q.storages) + member("tensors", q.tensors) +
                        member("././@LongLink", name + '\0', 'L') + member("truncated-nam", q.object) + kEnd;
  EXPECT_EQ(read_outcome(f).rule, "");
}

TEST(TarHostile, TrailingData) {
  std::string f = Parts{}.file();
  f.back() = 'x';
  expect_refused(f, tr::kTrailingData, f.size() - 1);
  std::string g = Parts{}.file();
  g[512 + Parts{}.sys_info.size()] = 'x';  // padding after the first member's data
  expect_refused(g, tr::kTrailingData, 512 + Parts{}.sys_info.size());
}

TEST(TarHostile, TooManyMembers) {
  ReadOptions o;
  o.limits.max_entries = 3;
  expect_refused(Parts{}.file(), tr::kTooManyMembers, data_of(Parts{}, "pickle") - 512, o);
}

TEST(TarHostile, MissingPickleMember) {
  Parts p;
  const std::string f = member("storages", p.storages) + member("tensors", p.tensors) + kEnd;
  expect_refused(f, tt::kTarMissingMember, f.size() - 1024);
}

TEST(TarHostile, HugeDeclaredCounts) {
  Parts p;
  p.storages = pk("J\xff\xff\xff\x7f") + p.storages.substr(pk(pk_int(1)).size());
  expect_refused(p.file(), tt::kTarBadCount, data_of(p, "storages"));
  Parts q;
  q.tensors = pk(pk_int(-1)) + q.tensors.substr(pk(pk_int(1)).size());
  expect_refused(q.file(), tt::kTarBadCount, data_of(q, "tensors"));
}

TEST(TarHostile, BadStorageRecords) {
  Parts p;  // numel beyond the member
  p.storages.replace(
      pk(pk_int(1)).size() + pk_tuple3(pk_int(7), pk_str("cpu"), pk_global("torch", "FloatStorage")).size(), 8,
      le(1ull << 40, 8));
  const std::uint64_t numel_at = data_of(p, "storages") + pk(pk_int(1)).size() +
                                 pk_tuple3(pk_int(7), pk_str("cpu"), pk_global("torch", "FloatStorage")).size();
  expect_refused(p.file(), tt::kTarBadStorage, numel_at);
  Parts q;  // not a storage class
  const std::string bad = pk_tuple3(pk_int(7), pk_str("cpu"), pk_global("os", "system"));
  q.storages = pk(pk_int(1)) + bad + le(2, 8) + std::string(8, '\0') + pk("]");
  expect_refused(q.file(), tt::kTarBadStorage, data_of(q, "storages") + pk(pk_int(1)).size());
}

TEST(TarHostile, StorageViewOutsideItsRoot) {
  Parts p;  // views [(11, 7, 1, 5)]: five elements from element 1 of a two-element storage
  const std::string head = p.storages.substr(0, p.storages.size() - pk("]").size());
  p.storages = head + pk("](" + pk_int(11) + pk_int(7) + pk_int(1) + pk_int(5) + "ta");
  expect_refused(p.file(), tt::kTarBadView, data_of(p, "storages") + head.size());
}

TEST(TarHostile, BadTensorRecords) {
  Parts p;  // ndim -1
  const std::string args = pk_tuple3(pk_int(9), pk_int(7), pk_global("torch", "FloatTensor"));
  p.tensors = pk(pk_int(1)) + args + le(0xffffffff, 4) + le(0, 4) + le(0, 8);
  expect_refused(p.file(), tt::kTarBadTensor, data_of(p, "tensors") + pk(pk_int(1)).size() + args.size());
  Parts q;  // a storage key no storage has
  const std::string unknown = pk_tuple3(pk_int(9), pk_int(8), pk_global("torch", "FloatTensor"));
  q.tensors = pk(pk_int(1)) + unknown + le(1, 4) + le(0, 4) + le(2, 8) + le(1, 8) + le(0, 8);
  expect_refused(q.file(), tt::kTarBadTensor, data_of(q, "tensors") + pk(pk_int(1)).size());
  Parts r;  // a view past its storage: 3 elements of a 2-element storage
  const std::string ok = pk_tuple3(pk_int(9), pk_int(7), pk_global("torch", "FloatTensor"));
  r.tensors = pk(pk_int(1)) + ok + le(1, 4) + le(0, 4) + le(3, 8) + le(1, 8) + le(0, 8);
  // (torch's set_ would grow the storage with zeros.)
  expect_refused(r.file(), rules::kViewOutOfBounds, data_of(r, "tensors") + pk(pk_int(1)).size() + ok.size());
  Parts n;  // a negative stride
  n.tensors = pk(pk_int(1)) + ok + le(1, 4) + le(0, 4) + le(2, 8) + le(static_cast<std::uint64_t>(-1), 8) + le(0, 8);
  expect_refused(n.file(), rules::kBadShape, data_of(n, "tensors") + pk(pk_int(1)).size() + ok.size());
}

TEST(TarHostile, DuplicateKeys) {
  Parts p;  // the tensor reuses the storage's key
  const std::string args = pk_tuple3(pk_int(7), pk_int(7), pk_global("torch", "FloatTensor"));
  p.tensors = pk(pk_int(1)) + args + le(1, 4) + le(0, 4) + le(2, 8) + le(1, 8) + le(0, 8);
  expect_refused(p.file(), tt::kTarDuplicateKey, data_of(p, "tensors") + pk(pk_int(1)).size());
}

TEST(TarHostile, BadPersistentIds) {
  Parts p;
  p.object = pk(pk_str("09") + "Q");  // int('09') is 9 to torch; only str(key) is read
  expect_refused(p.file(), tt::kTarBadPersistentId, data_of(p, "pickle") + 2 + 5 + 2);
  Parts q;
  q.object = pk(pk_str("8") + "Q");
  expect_refused(q.file(), tt::kTarBadPersistentId, data_of(q, "pickle") + 2 + 5 + 1);
}

TEST(TarHostile, TrailingBytesInAMember) {
  Parts p;
  p.tensors += "zz";
  expect_refused(p.file(), tt::kTarTrailing, data_of(p, "tensors") + p.tensors.size() - 2);
  Parts q;
  q.object += "zz";
  expect_refused(q.file(), tt::kTarTrailing, data_of(q, "pickle") + q.object.size() - 2);
}

TEST(TarHostile, SysInfo) {
  Parts p;
  p.sys_info = pk(pk_int(3));
  expect_refused(p.file(), tt::kTarBadSysInfo, 512);
  Parts q;
  q.sys_info = pk("}" + pk_str("little_endian") + "\x89s");
  expect_refused(q.file(), tt::kTarBigEndian, 512);
}

TEST(TarHostile, TruncatedAtEveryLengthOrBitFlippedNeverCrashes) {
  const std::string whole = testing::read_all(dir() / "gnu.pt");
  ASSERT_FALSE(whole.empty());
  for (std::size_t n = 0; n < whole.size(); n += 7) (void)read_outcome(whole.substr(0, n));
  for (std::size_t i = 0; i < whole.size(); i += 3) {
    std::string f = whole;
    f[i] ^= 0x10;
    (void)read_outcome(f);
  }
}

}  // namespace
}  // namespace tensorseal
