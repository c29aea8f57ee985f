// Streamed inflation of zip entries (zip::inflate_entry) and the archive expansion
// limit (zip::check_inflate, Limits::max_inflate / max_inflate_ratio), and the .npz
// reader's streamed members built on them (docs/formats/zip.md, docs/limits.md).
#include <sys/mman.h>
#include <zlib.h>

#include <cstring>
#include <random>

#include "io/sink.h"
#include "numpy/npy.h"
#include "test_util.h"
#include "util/crc32.h"
#include "util/endian.h"
#include "zip/constants.h"
#include "zip/inflate.h"
#include "zip/reader.h"
#include "zip/writer.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using detail::zip::Entry;

// Raw deflate (zip method 8) of `data` by zlib, as CPython's zipfile writes it.
std::vector<std::byte> zlib_deflate(std::span<const std::byte> data, int level = 6) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<std::byte> out(deflateBound(&zs, data.size()));
  zs.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

struct Member {
  std::string name;
  std::vector<std::byte> data;
};

// An .npz (numpy's zip profile) whose members are DEFLATED by zlib.
std::string deflated_npz(const std::vector<Member>& members, int level = 6) {
  detail::io::StringSink sink;
  detail::zip::Writer w(sink, detail::zip::Profile::kNumpy);
  for (const auto& m : members)
    w.record_deflated(m.name, m.data.size(), detail::util::crc32(0, m.data), zlib_deflate(m.data, level));
  w.finish();
  return sink.out;
}

// A .npy image: numpy's header for `descr` and `shape`, then `data`.
std::vector<std::byte> npy_image(std::string_view descr, const std::vector<std::int64_t>& shape,
                                 std::span<const std::byte> data, bool fortran = false) {
  const std::string head = detail::numpy::header(descr, fortran, shape);
  std::vector<std::byte> out(reinterpret_cast<const std::byte*>(head.data()),
                             reinterpret_cast<const std::byte*>(head.data()) + head.size());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// `n` bytes of values below `below`: compressible when small, not trivially.
std::vector<std::byte> small_symbols(std::size_t n, unsigned seed, unsigned below = 7) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() % below);
  return out;
}

// Every inflated byte of entry `e`, collected from inflate_entry's windows.
std::vector<std::byte> streamed(std::span<const std::byte> file, const Entry& e, std::uint64_t window,
                                bool release = false) {
  std::vector<std::byte> out;
  detail::zip::inflate_entry(file, e, "x", true, release, window, [&](std::uint64_t at, std::span<const std::byte> b) {
    EXPECT_EQ(at, out.size());
    EXPECT_LE(b.size(), window);
    out.insert(out.end(), b.begin(), b.end());
    return true;
  });
  return out;
}

std::string rule_of_stream(std::span<const std::byte> file, const Entry& e) {
  return testing::rule_of([&] { (void)streamed(file, e, detail::zip::kInflateWindow); });
}

// ---- inflate_entry ------------------------------------------------------------------

TEST(ZipInflate, StreamGivesTheOneShotBytesInAnyWindow) {
  const std::string s = testing::zip_fixture("savez_compressed.npz");
  const auto file = testing::bytes_of(s);
  const auto a = detail::zip::read(file, "x", Limits{});
  std::vector<std::byte> scratch;
  for (const Entry& e : a.entries) {
    ASSERT_EQ(e.method, detail::zip::kMethodDeflated);
    const auto whole = detail::zip::entry_bytes(file, e, scratch, "x", Limits{});
    const std::vector<std::byte> want(whole.begin(), whole.end());
    for (std::uint64_t window : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{4096}, detail::zip::kInflateWindow})
      EXPECT_EQ(streamed(file, e, window), want) << e.name << " window " << window;
    EXPECT_EQ(detail::zip::inflate_entry_whole(file, e, "x", true, Limits{}), want) << e.name;
  }
}

TEST(ZipInflate, StreamRefusesWhatTheOneShotRefuses) {
  const std::string s = testing::zip_fixture("savez_compressed.npz");
  const auto file = testing::bytes_of(s);
  const Entry e = detail::zip::read(file, "x", Limits{}).entries[0];
  Entry shorter = e;  // the stream gives more than declared: refused at the first byte over
  shorter.size = e.size - 1;
  EXPECT_EQ(rule_of_stream(file, shorter), "zip/inflate-failed");
  Entry longer = e;
  longer.size = e.size + 1;
  EXPECT_EQ(rule_of_stream(file, longer), "zip/inflate-failed");
  Entry cut = e;  // the stream ends before its last block
  cut.compressed_size = e.compressed_size - 1;
  EXPECT_EQ(rule_of_stream(file, cut), "zip/inflate-failed");
  Entry trailing = e;  // bytes after the end of the stream
  trailing.compressed_size = e.compressed_size + 1;
  EXPECT_EQ(rule_of_stream(file, trailing), "zip/inflate-failed");
  Entry bomb = e;  // a claim deflate cannot produce: refused before inflating
  bomb.size = e.compressed_size * 1033;
  EXPECT_EQ(rule_of_stream(file, bomb), "zip/deflate-ratio");
  Entry stored = e;
  stored.method = 12;
  EXPECT_EQ(rule_of_stream(file, stored), "zip/unsupported-method");
  Entry crc = e;
  crc.crc32 ^= 1;
  EXPECT_EQ(rule_of_stream(file, crc), "zip/crc-mismatch");
  std::string broken = s;
  for (std::uint64_t i = 0; i < 8; ++i) broken[e.data_offset + i] = '\xff';
  EXPECT_EQ(rule_of_stream(testing::bytes_of(broken), e), "zip/inflate-failed");
  Limits small;
  small.max_alloc = e.size - 1;
  EXPECT_EQ(testing::rule_of([&] { (void)detail::zip::inflate_entry_whole(file, e, "x", true, small); }),
            "zip/entry-too-large");
}

TEST(ZipInflate, StoppedStreamReadsOnlyItsStart) {
  const auto image = small_symbols(3 << 20, 1);
  const std::string s = deflated_npz({{"a.npy", image}});
  const auto file = testing::bytes_of(s);
  const Entry e = detail::zip::read(file, "x", Limits{}).entries[0];
  std::uint64_t calls = 0, got = 0;
  detail::zip::inflate_entry(file, e, "x", true, false, 4096, [&](std::uint64_t, std::span<const std::byte> b) {
    ++calls;
    got += b.size();
    return got < 10000;
  });
  EXPECT_EQ(calls, 3u);
  EXPECT_EQ(got, 3u * 4096);
}

TEST(ZipInflate, ReleasedPagesOfAMappedFileReadBackTheSame) {
  // Pages of the compressed bytes are given back to the kernel as they are consumed; a
  // second pass (and the rest of the mapping) reads the file's bytes again. Several
  // 4 MiB pieces of compressed input.
  const auto image = small_symbols(9 << 20, 2, 256);
  const std::string s = deflated_npz({{"a.npy", image}}, 1);
  ASSERT_GT(s.size(), 8u << 20);
  const fs::path p = fs::temp_directory_path() / "tensorseal_zip_inflate_release.npz";
  { std::ofstream(p, std::ios::binary).write(s.data(), static_cast<std::streamsize>(s.size())); }
  const auto mapped = MappedFile::open(p);
  const Entry e = detail::zip::read(mapped->bytes(), "x", Limits{}).entries[0];
  EXPECT_EQ(streamed(mapped->bytes(), e, detail::zip::kInflateWindow, true), image);
  EXPECT_EQ(streamed(mapped->bytes(), e, detail::zip::kInflateWindow, true), image);
  EXPECT_EQ(std::memcmp(mapped->bytes().data(), s.data(), s.size()), 0);
  fs::remove(p);
}

// ---- check_inflate: zip/inflate-limit -----------------------------------------------

TEST(ZipInflate, InflateLimitIsOnTheArchivesDeclaredTotal) {
  // Three members of zeros: ~1000:1 each. 3 x 600 KiB inflated from ~1.8 KiB.
  const std::vector<std::byte> zeros(600 << 10);
  const std::string s = deflated_npz({{"a.npy", zeros}, {"b.npy", zeros}, {"c.npy", zeros}});
  const auto file = testing::bytes_of(s);
  const auto a = detail::zip::read(file, "x", Limits{});
  EXPECT_NO_THROW(detail::zip::check_inflate(a, "x", Limits{}));  // under max_inflate: any ratio
  Limits l;
  l.max_inflate = 1 << 20;  // the second member crosses 1 MiB
  try {
    detail::zip::check_inflate(a, "x.npz", l);
    FAIL() << "not refused";
  } catch (const Error& err) {
    EXPECT_EQ(err.rule(), "zip/inflate-limit");
    EXPECT_EQ(err.kind(), ErrorKind::kLimit);
    EXPECT_EQ(err.file(), "x.npz");
    EXPECT_EQ(err.offset(), a.entries[1].data_offset);
    const std::string what = err.what();
    for (const char* part : {"'b.npy'", "--max-inflate 1048576", "--max-inflate-ratio 100", "1228800 inflated"})
      EXPECT_NE(what.find(part), std::string::npos) << what;
  }
  l.max_inflate_ratio = 2000;  // past max_inflate, within the ratio: passes
  EXPECT_NO_THROW(detail::zip::check_inflate(a, "x", l));
  l.max_inflate_ratio = 0;  // a hard cap
  l.max_inflate = 3 * (600 << 10);
  EXPECT_NO_THROW(detail::zip::check_inflate(a, "x", l));
  l.max_inflate -= 1;
  EXPECT_EQ(testing::rule_of([&] { detail::zip::check_inflate(a, "x", l); }), "zip/inflate-limit");
}

TEST(ZipInflate, LowRatioArchivesPassWhateverTheirSize) {
  // Past max_inflate, an archive whose deflated members inflate at most max_inflate_ratio
  // times their compressed size passes: its cost is bounded by its own size.
  const auto image = small_symbols(2 << 20, 3);
  const std::string s = deflated_npz({{"a.npy", image}});
  const auto a = detail::zip::read(testing::bytes_of(s), "x", Limits{});
  Limits l;
  l.max_inflate = 1 << 20;
  const std::uint64_t ratio = a.entries[0].size / a.entries[0].compressed_size;
  l.max_inflate_ratio = ratio + 1;
  EXPECT_NO_THROW(detail::zip::check_inflate(a, "x", l));
  l.max_inflate_ratio = ratio - 1;
  EXPECT_EQ(testing::rule_of([&] { detail::zip::check_inflate(a, "x", l); }), "zip/inflate-limit");
}

// ---- the .npz reader: deflated members stream -------------------------------------

TEST(ZipInflate, NpzBombIsRefusedByReadBeforeInflating) {
  // One member declaring 4 GiB from a stream of a few bytes per MiB would need
  // inflating to be refused by its stream; the declared total refuses it first.
  const std::vector<std::byte> zeros(600 << 10);
  const auto image = npy_image("<f4", {150 << 10}, zeros);
  std::string s = deflated_npz({{"w.npy", image}});
  EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(s), "bomb.npz"); }), "");
  ReadOptions o;
  o.limits.max_inflate = 64 << 10;
  EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(s), "bomb.npz", o); }), "zip/inflate-limit");
  o.limits.max_inflate_ratio = 1032;
  EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(s), "bomb.npz", o); }), "");
}

TEST(ZipInflate, NpzDeflatedMembersStreamAndHashAsTheirStoredTwins) {
  // Little- and big-endian float32 data of several windows, a Fortran-order member and
  // an odd size: the content hash, each tensor's SHA-256 and the joined bytes of the
  // deflated file equal those of the same arrays written STORED.
  const std::size_t n = (3 << 20) / 4 + 17;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 1000) * 0.25f;
  std::vector<std::byte> le(n * 4), be(n * 4);
  std::memcpy(le.data(), values.data(), le.size());
  be = le;
  detail::util::byteswap_inplace(be, 4);
  const auto fortran = small_symbols(6 * 7 * 2, 4);
  const std::vector<Member> members = {{"le.npy", npy_image("<f4", {static_cast<std::int64_t>(n)}, le)},
                                       {"be.npy", npy_image(">f4", {static_cast<std::int64_t>(n)}, be)},
                                       {"fo.npy", npy_image("<i2", {6, 7}, fortran, true)}};
  const std::string deflated = deflated_npz(members);
  detail::io::StringSink sink;
  {
    detail::zip::Writer w(sink, detail::zip::Profile::kNumpy);
    for (const auto& m : members) w.record(m.name, detail::util::as_chars(m.data));
    w.finish();
  }
  const Checkpoint c = read_bytes(testing::bytes_of(deflated), "d.npz");
  const Checkpoint twin = read_bytes(testing::bytes_of(sink.out), "s.npz");
  EXPECT_EQ(option_value(c.layout, "compress"), "1");
  EXPECT_EQ(content_hash(c.root), content_hash(twin.root));
  const auto& d = c.root.as_dict();
  for (const char* key : {"le", "be", "fo"}) {
    const auto t = d.find(Value::str(key))->as_tensor();
    const auto u = twin.root.as_dict().find(Value::str(key))->as_tensor();
    EXPECT_TRUE(t->storage->is_streamed()) << key;
    EXPECT_EQ(tensor_sha256(*t), tensor_sha256(*u)) << key;
    std::vector<std::byte> a, b;
    const auto x = t->contiguous_bytes(a);
    const auto y = u->contiguous_bytes(b);
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << key;
  }
  // The big-endian member reads as the little-endian values, window after window.
  const auto be_t = d.find(Value::str("be"))->as_tensor();
  std::vector<std::byte> got;
  be_t->storage->stream(5, n * 4 - 9, [&](std::span<const std::byte> b) { got.insert(got.end(), b.begin(), b.end()); });
  EXPECT_TRUE(std::equal(got.begin(), got.end(), le.begin() + 5, le.end() - 4));
}

TEST(ZipInflate, NpzDeflatedCrcIsCheckedWhenTheDataStreams) {
  const auto image = npy_image("<u1", {5000}, small_symbols(5000, 5));
  std::string s = deflated_npz({{"a.npy", image}});
  const auto a = detail::zip::read(testing::bytes_of(s), "x", Limits{});
  // The CRC in both headers: the reader's local/central agreement still holds.
  std::uint32_t bad = a.entries[0].crc32 ^ 0x10;
  for (std::uint64_t at : {a.entries[0].local_offset + 14, a.central_offset + 16}) std::memcpy(s.data() + at, &bad, 4);
  const Checkpoint c = read_bytes(testing::bytes_of(s), "x.npz");  // the header alone is read
  EXPECT_EQ(testing::rule_of([&] { (void)content_hash(c.root); }), "zip/crc-mismatch");
  EXPECT_EQ(testing::rule_of([&] { (void)collect_tensors(c.root)[0].tensor->storage->bytes(); }), "zip/crc-mismatch");
  ReadOptions no_crc;
  no_crc.verify_checksums = false;
  const Checkpoint unchecked = read_bytes(testing::bytes_of(s), "x.npz", no_crc);
  EXPECT_EQ(testing::rule_of([&] { (void)content_hash(unchecked.root); }), "");
}

TEST(ZipInflate, NpzJoinedMemberRespectsMaxAlloc) {
  // Streaming holds a window whatever the member's size; one buffer of it (a strided
  // view, Python's arrays) is an allocation, under max_alloc.
  const auto image = npy_image("<u1", {100000}, small_symbols(100000, 6));
  const std::string s = deflated_npz({{"a.npy", image}});
  ReadOptions o;
  o.limits.max_alloc = 50000;
  const Checkpoint c = read_bytes(testing::bytes_of(s), "x.npz", o);
  EXPECT_EQ(testing::rule_of([&] { (void)content_hash(c.root); }), "");
  EXPECT_EQ(testing::rule_of([&] { (void)collect_tensors(c.root)[0].tensor->storage->bytes(); }),
            "zip/entry-too-large");
}

}  // namespace
}  // namespace tensorseal
