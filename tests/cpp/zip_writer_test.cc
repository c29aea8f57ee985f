// The zip writer's profiles. Key proof: re-writing the records of real torch.save files
// (tests/fixtures/gen_zip.py, torch 2.x) with the torch profile gives the very same
// bytes. Past-4-GiB layouts (zip64 extra fields, 24-byte descriptors) are checked with
// a sink that keeps only the headers, rebuilt into a sparse file the reader parses.
// Spec: docs/formats/zip.md.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "io/sink.h"
#include "test_util.h"
#include "util/crc32.h"
#include "util/endian.h"
#include "zip/constants.h"
#include "zip/reader.h"
#include "zip/writer.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path dir() { return testing::fixture_dir("gen_zip"); }

std::uint16_t le16(const std::string& s, std::uint64_t at) {
  std::uint16_t v;
  std::memcpy(&v, s.data() + at, 2);
  return v;
}
std::uint32_t le32(const std::string& s, std::uint64_t at) {
  std::uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}
std::uint64_t le64(const std::string& s, std::uint64_t at) {
  std::uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}

// Reads a torch.save file and writes its records again, in the same order.
std::string rewrite_torch(const std::string& bytes, const std::string& name, std::size_t chunk = 0) {
  const auto file = testing::bytes_of(bytes);
  const auto a = detail::zip::read(file, name, Limits{});
  std::uint32_t alignment = 64;
  for (const auto& e : a.entries)
    if (e.name.ends_with("/.storage_alignment")) {
      std::vector<std::byte> scratch;
      alignment = static_cast<std::uint32_t>(
          std::stoul(std::string(detail::util::as_chars(detail::zip::entry_bytes(file, e, scratch, name, Limits{})))));
    }
  detail::io::StringSink sink;
  detail::zip::Writer w(sink, detail::zip::Profile::kTorch, alignment);
  for (const auto& e : a.entries) {
    std::vector<std::byte> scratch;
    const auto data = detail::zip::entry_bytes(file, e, scratch, name, Limits{});
    w.begin_record(e.name, data.size());
    if (chunk == 0) {
      w.write(data);
    } else {
      for (std::size_t i = 0; i < data.size(); i += chunk) w.write(data.subspan(i, std::min(chunk, data.size() - i)));
    }
    w.end_record();
  }
  w.finish();
  return std::move(sink.out);
}

TEST(ZipWriter, TorchSaveFilesAreReproducedByteForByte) {
  const auto text = testing::read_all(dir() / "manifest.json");
  ASSERT_FALSE(text.empty()) << "run tests/fixtures/gen_zip.py (ctest does it)";
  int checked = 0;
  const json m = json::parse(text);
  for (const auto& f : m["files"]) {
    if (!f["torch_rewrite"].get<bool>()) continue;
    const std::string name = f["file"];
    SCOPED_TRACE(name);
    const std::string orig = testing::read_all(dir() / name);
    const std::string ours = rewrite_torch(orig, name);
    ASSERT_EQ(ours.size(), orig.size());
    if (ours != orig) {
      std::size_t i = 0;
      while (ours[i] == orig[i]) ++i;
      FAIL() << "first difference at byte " << i;
    }
    ++checked;
  }
  // a.pt, b.pt, many.pt (13 storages, one empty), empty_dict.pt, buffer.pt, align4096.pt
  EXPECT_EQ(checked, 6);
}

// Opt-in (gen_zip.py with TENSORSEAL_BIG_FIXTURES=1): a real 4.3 GB torch.save file
// with a record of 2^32 + 100 bytes, records past 4 GiB and an empty record past
// 4 GiB, rewritten through a file sink and compared with torch's bytes.
TEST(ZipWriter, TorchSavePastFourGiBIsReproducedByteForByte) {
  const fs::path big = dir() / "big.pt";
  if (!fs::exists(big)) GTEST_SKIP() << "set TENSORSEAL_BIG_FIXTURES=1 when generating fixtures";
  const auto in = MappedFile::open(big);
  const auto a = detail::zip::read(in->bytes(), big.string(), Limits{});
  const fs::path out = fs::temp_directory_path() / ("tseal_big_rewrite." + std::to_string(::getpid()));
  {
    detail::io::AtomicFileSink sink(out, false);
    detail::zip::Writer w(sink);
    for (const auto& e : a.entries) {
      std::vector<std::byte> scratch;
      const auto data = detail::zip::entry_bytes(in->bytes(), e, scratch, big.string(), Limits{});
      w.begin_record(e.name, data.size());
      w.write(data);
      w.end_record();
    }
    w.finish();
    sink.commit();
  }
  const auto ours = MappedFile::open(out);
  const bool same =
      ours->size() == in->size() && std::memcmp(ours->bytes().data(), in->bytes().data(), in->size()) == 0;
  fs::remove(out);
  EXPECT_TRUE(same);
}

// The CRC32 is computed while streaming: any chunking gives the same bytes.
TEST(ZipWriter, StreamingCrcDoesNotDependOnChunking) {
  const std::string orig = testing::read_all(dir() / "many.pt");
  ASSERT_FALSE(orig.empty());
  for (std::size_t chunk : {1u, 7u, 64u, 1000u}) EXPECT_EQ(rewrite_torch(orig, "many.pt", chunk), orig) << chunk;
}

TEST(ZipWriter, DeclaredSizeAndCrcAreEnforced) {
  detail::io::StringSink sink;
  detail::zip::Writer w(sink);
  w.begin_record("x/data/0", 4);
  const std::string three = "abc";
  w.write(testing::bytes_of(three));
  EXPECT_EQ(testing::rule_of([&] { w.end_record(); }), "zip/writer-misuse");
  EXPECT_EQ(testing::rule_of([&] { w.write(testing::bytes_of(three)); }), "zip/writer-misuse");

  detail::io::StringSink sink2;
  detail::zip::Writer np(sink2, detail::zip::Profile::kNumpy);
  EXPECT_EQ(testing::rule_of([&] { np.begin_record("a.npy", 3); }), "zip/writer-misuse");  // no CRC
  np.begin_record("a.npy", 3, 1234);
  np.write(testing::bytes_of(three));
  EXPECT_EQ(testing::rule_of([&] { np.end_record(); }), "zip/writer-misuse");  // wrong CRC
}

TEST(ZipWriter, RoundTripThroughReader) {
  for (auto profile : {detail::zip::Profile::kTorch, detail::zip::Profile::kNumpy}) {
    detail::io::StringSink sink;
    detail::zip::Writer w(sink, profile);
    std::map<std::string, std::string> records = {{"r/data.pkl", "pickle"},
                                                  {"r/data/0", std::string(1000, '\x07')},
                                                  {"r/empty", ""},
                                                  {"r/\xc3\xa9t\xc3\xa9", "utf8 name"}};
    for (const auto& [n, d] : records) w.record(n, d);
    w.finish();
    const auto a = detail::zip::read(testing::bytes_of(sink.out), "rt", Limits{});
    ASSERT_EQ(a.entries.size(), records.size());
    EXPECT_EQ(a.unaccounted_bytes, 0u);
    for (const auto& e : a.entries) {
      std::vector<std::byte> scratch;
      const auto data = detail::zip::entry_bytes(testing::bytes_of(sink.out), e, scratch, "rt", Limits{});
      EXPECT_EQ(std::string(detail::util::as_chars(data)), records.at(e.name));
      EXPECT_NO_THROW(detail::zip::verify_crc(e, data, "rt"));
      if (profile == detail::zip::Profile::kTorch) {
        if (e.size) EXPECT_EQ(e.data_offset % 64, 0u) << e.name;
        EXPECT_EQ(e.flags, e.size ? 0x0808 : 0x0800);
      } else {
        EXPECT_EQ(e.flags, e.name.find('\xc3') != std::string::npos ? 0x0800 : 0);
        EXPECT_EQ(e.version_made_by, 0x032D);
        EXPECT_EQ(e.dos_date, 0x21);
      }
    }
  }
}

// A sink that stores small writes (headers) at their offsets and only counts large
// ones (record data), so archives past 4 GiB cost no memory.
class HeaderSink final : public detail::io::Sink {
 public:
  void write(std::span<const std::byte> data) override {
    if (data.size() <= 1 << 16) pieces[position_] = std::string(detail::util::as_chars(data));
    position_ += data.size();
  }
  // Rebuilds the archive as a sparse file (data regions are holes of zeros).
  fs::path materialize(const std::string& name) const {
    const fs::path p = fs::temp_directory_path() / (name + "." + std::to_string(::getpid()));
    const int fd = ::open(p.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(position_)), 0);
    for (const auto& [at, s] : pieces)
      EXPECT_EQ(::pwrite(fd, s.data(), s.size(), static_cast<off_t>(at)), static_cast<ssize_t>(s.size()));
    ::close(fd);
    return p;
  }
  std::map<std::uint64_t, std::string> pieces;
};

void write_zeros(detail::zip::Writer& w, std::uint64_t n) {
  static const std::vector<std::byte> zeros(1 << 22);
  while (n) {
    const std::uint64_t k = std::min<std::uint64_t>(n, zeros.size());
    w.write({zeros.data(), k});
    n -= k;
  }
}

// torch profile past 4 GiB, checked field by field against miniz's code
// (mz_zip_writer_add_mem_ex_v2, mz_zip_writer_create_zip64_extra_data) and torch's
// getPadding, then parsed back by the reader from a sparse file.
TEST(ZipWriter, TorchProfilePastFourGiB) {
  HeaderSink sink;
  detail::zip::Writer w(sink, detail::zip::Profile::kTorch);
  const std::uint64_t big = 0x100000000ull + 5;  // >= 0xFFFFFFFF: zip64 sizes
  w.record("big/data.pkl", "small first");
  const std::uint64_t big_at = sink.position();
  w.begin_record("big/data/0", big);
  write_zeros(w, big);
  w.end_record();
  const std::uint64_t after_at = sink.position();  // > 4 GiB: zip64 offset
  w.record("big/data/1", "after");
  const std::uint64_t empty_at = sink.position();
  w.record("big/empty", "");
  w.finish();

  // Big record: local extra = zip64 (usize, csize 0) + FB padding; data aligned.
  const std::string& h = sink.pieces.at(big_at);
  const std::uint16_t name_len = le16(h, 26), extra_len = le16(h, 28);
  EXPECT_EQ(le32(h, 14), 0u);
  EXPECT_EQ(le32(h, 18), 0u);  // sizes 0: in the descriptor
  const std::uint64_t x = 30 + name_len;
  EXPECT_EQ(le16(h, x), 1);
  EXPECT_EQ(le16(h, x + 2), 16);
  EXPECT_EQ(le64(h, x + 4), big);
  EXPECT_EQ(le64(h, x + 12), 0u);
  EXPECT_EQ(le16(h, x + 20), 0x4246);  // "FB"
  EXPECT_EQ((big_at + 30 + name_len + extra_len) % 64, 0u);
  // Its descriptor: 24 bytes with 8-byte sizes.
  const std::uint64_t desc_at = big_at + 30 + name_len + extra_len + big;
  const std::string& d = sink.pieces.at(desc_at);
  ASSERT_EQ(d.size(), 24u);
  EXPECT_EQ(le32(d, 0), 0x08074b50u);
  EXPECT_EQ(le64(d, 8), big);
  EXPECT_EQ(le64(d, 16), big);
  // Record after 4 GiB: zip64 field with the offset only, 24-byte descriptor.
  const std::string& a = sink.pieces.at(after_at);
  EXPECT_EQ(le16(a, 30 + 10), 1);
  EXPECT_EQ(le16(a, 30 + 10 + 2), 8);
  EXPECT_EQ(le64(a, 30 + 10 + 4), after_at);
  const std::uint64_t a_data = after_at + 30 + 10 + le16(a, 28);
  EXPECT_EQ(a_data % 64, 0u);
  EXPECT_EQ(sink.pieces.at(a_data + 5).size(), 24u);
  // Empty record after 4 GiB: zip64 offset field, flags 0x0800, no descriptor.
  const std::string& em = sink.pieces.at(empty_at);
  EXPECT_EQ(le16(em, 6), 0x0800);
  EXPECT_EQ(le16(em, 30 + 9), 1);

  const fs::path p = sink.materialize("tseal_zip64_torch");
  const auto mapped = MappedFile::open(p);
  const auto arc = detail::zip::read(mapped->bytes(), p.string(), Limits{});
  fs::remove(p);
  ASSERT_EQ(arc.entries.size(), 4u);
  EXPECT_TRUE(arc.zip64);
  EXPECT_EQ(arc.entries[1].size, big);
  EXPECT_EQ(arc.entries[1].descriptor_size, 24u);
  EXPECT_EQ(arc.entries[2].local_offset, after_at);
  EXPECT_EQ(arc.entries[3].local_offset, empty_at);
  EXPECT_EQ(arc.entries[3].descriptor_size, 0u);
  EXPECT_EQ(arc.unaccounted_bytes, 0u);
  // Central zip64 fields: big -> sizes (both = size); after -> offset only.
  EXPECT_EQ(arc.entries[1].central_extra.size(), 20u);
  EXPECT_EQ(arc.entries[2].central_extra.size(), 12u);
  EXPECT_TRUE(arc.entries[0].central_extra.empty());
}

// numpy profile (python zipfile): zip64 central fields and end records past
// ZIP64_LIMIT = 2^31 - 1, as python's _write_end_record writes them.
TEST(ZipWriter, NumpyProfilePastTwoGiB) {
  const std::uint64_t big = (1ull << 31) + 3;
  std::uint32_t crc = 0;
  {
    static const std::vector<std::byte> zeros(1 << 22);
    for (std::uint64_t n = big; n;) {
      const std::uint64_t k = std::min<std::uint64_t>(n, zeros.size());
      crc = detail::util::crc32(crc, {zeros.data(), k});
      n -= k;
    }
  }
  HeaderSink sink;
  detail::zip::Writer w(sink, detail::zip::Profile::kNumpy);
  w.record("first.npy", "x");
  const std::uint64_t big_at = sink.position();
  w.begin_record("big.npy", big, crc);
  write_zeros(w, big);
  w.end_record();
  const std::uint64_t after_at = sink.position();
  w.record("after.npy", "y");
  w.finish();

  const std::string& h = sink.pieces.at(big_at);
  EXPECT_EQ(le32(h, 18), 0xFFFFFFFFu);
  EXPECT_EQ(le32(h, 22), 0xFFFFFFFFu);
  EXPECT_EQ(le64(h, 30 + 7 + 4), big);

  const fs::path p = sink.materialize("tseal_zip64_numpy");
  const auto mapped = MappedFile::open(p);
  const auto arc = detail::zip::read(mapped->bytes(), p.string(), Limits{});
  fs::remove(p);
  ASSERT_EQ(arc.entries.size(), 3u);
  EXPECT_TRUE(arc.zip64);  // the central directory starts past 2^31 - 1
  EXPECT_EQ(arc.entries[1].size, big);
  EXPECT_EQ(arc.entries[1].crc32, crc);
  EXPECT_EQ(arc.entries[1].central_extra.size(), 20u);
  EXPECT_EQ(arc.entries[2].local_offset, after_at);
  EXPECT_EQ(arc.entries[2].central_extra.size(), 12u);
  EXPECT_TRUE(arc.entries[0].central_extra.empty());
  EXPECT_EQ(arc.unaccounted_bytes, 0u);
}

}  // namespace
}  // namespace tensorseal
