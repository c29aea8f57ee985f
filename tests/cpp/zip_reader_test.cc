// Reads every archive tests/fixtures/gen_zip.py made with real producers (torch.save,
// np.savez, python's zipfile) and checks each entry against the manifest python's
// zipfile computed. Spec: docs/formats/zip.md.
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "util/crc32.h"
#include "zip/constants.h"
#include "zip/reader.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path dir() { return testing::fixture_dir("gen_zip"); }

json manifest() {
  const auto text = testing::read_all(dir() / "manifest.json");
  return text.empty() ? json::object() : json::parse(text);
}

using testing::hex_of;

const json* find_file(const json& m, const std::string& name) {
  for (const auto& f : m["files"])
    if (f["file"] == name) return &f;
  return nullptr;
}

TEST(ZipReader, FixturesExist) {
  const auto m = manifest();
  ASSERT_TRUE(m.contains("files")) << "run tests/fixtures/gen_zip.py (ctest does it)";
  EXPECT_GE(m["files"].size(), 12u);
}

// Every entry of every real archive: names, methods, sizes, CRCs, offsets, system,
// timestamps and the data itself (sha256) agree with python's zipfile.
TEST(ZipReader, RealArchivesMatchPythonZipfile) {
  const auto m = manifest();
  ASSERT_TRUE(m.contains("files"));
  for (const auto& f : m["files"]) {
    const std::string file = f["file"];
    SCOPED_TRACE(file);
    const std::string bytes = testing::read_all(dir() / file);
    ASSERT_EQ(bytes.size(), f["size"].get<std::uint64_t>());
    const auto a = detail::zip::read(testing::bytes_of(bytes), file, Limits{});
    ASSERT_EQ(a.entries.size(), f["entries"].size());
    EXPECT_EQ(a.prefix_size, f["prefix"].get<std::uint64_t>());
    EXPECT_EQ(hex_of(a.comment), f["comment"].get<std::string>());
    for (std::size_t i = 0; i < a.entries.size(); ++i) {
      const auto& e = a.entries[i];
      const auto& x = f["entries"][i];
      SCOPED_TRACE(e.name);
      EXPECT_EQ(e.name, x["name"].get<std::string>());
      EXPECT_EQ(e.method, x["method"].get<int>());
      EXPECT_EQ(e.compressed_size, x["compressed_size"].get<std::uint64_t>());
      EXPECT_EQ(e.size, x["size"].get<std::uint64_t>());
      EXPECT_EQ(e.crc32, x["crc32"].get<std::uint32_t>());
      EXPECT_EQ(e.flags, x["flag_bits"].get<std::uint16_t>());
      EXPECT_EQ(e.local_offset, x["header_offset"].get<std::uint64_t>());
      EXPECT_EQ(e.data_offset, x["data_offset"].get<std::uint64_t>());
      EXPECT_EQ(e.version_made_by >> 8, x["create_system"].get<int>());
      const auto dt = x["date_time"].get<std::vector<int>>();
      EXPECT_EQ(1980 + (e.dos_date >> 9), dt[0]);
      EXPECT_EQ((e.dos_date >> 5) & 15, dt[1]);
      EXPECT_EQ(e.dos_date & 31, dt[2]);
      EXPECT_EQ(e.dos_time >> 11, dt[3]);
      EXPECT_EQ((e.dos_time >> 5) & 63, dt[4]);
      EXPECT_EQ((e.dos_time & 31) * 2, dt[5]);
      std::vector<std::byte> scratch;
      const auto data = detail::zip::entry_bytes(testing::bytes_of(bytes), e, scratch, file, Limits{});
      EXPECT_EQ(sha256_hex(data), x["sha256"].get<std::string>());
      EXPECT_NO_THROW(detail::zip::verify_crc(e, data, file));
      // STORED entries are views into the file, not copies.
      if (e.method == detail::zip::kMethodStored && !data.empty())
        EXPECT_EQ(reinterpret_cast<const char*>(data.data()), bytes.data() + e.data_offset);
    }
  }
}

// torch, numpy and python write archives where every byte belongs to a record; the
// prefixed archive (a pickle glued in front: a polyglot) reports its prefix.
TEST(ZipReader, UnaccountedBytesRevealPolyglots) {
  const auto m = manifest();
  ASSERT_TRUE(m.contains("files"));
  for (const auto& f : m["files"]) {
    const std::string file = f["file"];
    SCOPED_TRACE(file);
    const std::string bytes = testing::read_all(dir() / file);
    const auto a = detail::zip::read(testing::bytes_of(bytes), file, Limits{});
    if (file == "prefixed.zip") {
      EXPECT_EQ(a.prefix_size, 6u);
      EXPECT_EQ(a.unaccounted_bytes, 6u);
    } else {
      EXPECT_EQ(a.prefix_size, 0u);
      EXPECT_EQ(a.unaccounted_bytes, 0u);
    }
  }
}

// torch always writes zip64 end records (miniz MZ_ZIP_FLAG_WRITE_ZIP64); python only
// when it must.
TEST(ZipReader, Zip64EndRecords) {
  const auto m = manifest();
  ASSERT_TRUE(m.contains("files"));
  for (const auto& f : m["files"]) {
    const std::string file = f["file"];
    const std::string bytes = testing::read_all(dir() / file);
    const auto a = detail::zip::read(testing::bytes_of(bytes), file, Limits{});
    EXPECT_EQ(a.zip64, f["producer"] == "torch") << file;
  }
}

// Data descriptors: 16 bytes with 4-byte sizes, 24 with 8-byte sizes when the local
// header has a zip64 field (python's force_zip64 on a non-seekable stream; torch's
// records have a 16-byte descriptor and none when empty).
TEST(ZipReader, DataDescriptorSizes) {
  const std::string bytes = testing::read_all(dir() / "descriptors.zip");
  ASSERT_FALSE(bytes.empty());
  const auto a = detail::zip::read(testing::bytes_of(bytes), "descriptors.zip", Limits{});
  ASSERT_EQ(a.entries.size(), 3u);
  EXPECT_TRUE(a.entries[0].has_data_descriptor);
  EXPECT_EQ(a.entries[0].descriptor_size, 24u);  // desc64.bin
  EXPECT_EQ(a.entries[1].descriptor_size, 16u);  // desc32.bin
  EXPECT_EQ(a.entries[2].descriptor_size, 16u);  // desc_deflated.bin

  const std::string torch = testing::read_all(dir() / "many.pt");
  const auto t = detail::zip::read(testing::bytes_of(torch), "many.pt", Limits{});
  bool saw_empty = false;
  for (const auto& e : t.entries) {
    if (e.size == 0) {
      saw_empty = true;
      EXPECT_EQ(e.flags, 0x0800) << e.name;
      EXPECT_EQ(e.descriptor_size, 0u) << e.name;
    } else {
      EXPECT_EQ(e.flags, 0x0808) << e.name;
      EXPECT_EQ(e.descriptor_size, 16u) << e.name;
    }
  }
  EXPECT_TRUE(saw_empty) << "many.pt holds an empty storage";
}

// torch aligns every record's data to .storage_alignment (64, or what the config says).
TEST(ZipReader, TorchRecordsAreAligned) {
  for (const auto& [file, align] :
       {std::pair{"a.pt", 64u}, std::pair{"many.pt", 64u}, std::pair{"align4096.pt", 4096u}}) {
    const std::string bytes = testing::read_all(dir() / file);
    ASSERT_FALSE(bytes.empty()) << file;
    const auto a = detail::zip::read(testing::bytes_of(bytes), file, Limits{});
    for (const auto& e : a.entries) EXPECT_EQ(e.data_offset % align, 0u) << file << " " << e.name;
  }
}

// A comment that contains an end signature: Python's zipfile and miniz read that one,
// so the file is refused rather than read differently from them.
TEST(ZipReader, CommentContainingEndSignatureIsAmbiguous) {
  std::string bytes = testing::read_all(dir() / "comment.zip");
  ASSERT_FALSE(bytes.empty());
  const auto at = bytes.find("XK\x05\x06");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'P';
  // zipfile and miniz take the last signature (the one in the comment); the reader
  // would take the record the comment belongs to: loaders disagree, so it is refused.
  EXPECT_EQ(testing::rule_of([&] { (void)detail::zip::read(testing::bytes_of(bytes), "comment.zip", Limits{}); }),
            "zip/ambiguous-end-of-central-directory");
}

TEST(ZipReader, Crc32IsZipCrcAndChainable) {
  const std::string check = "123456789";
  EXPECT_EQ(detail::util::crc32(0, testing::bytes_of(check)), 0xCBF43926u);  // the CRC-32 check value
  const std::string a = "hello, ", b = "world";
  EXPECT_EQ(detail::util::crc32(detail::util::crc32(0, testing::bytes_of(a)), testing::bytes_of(b)),
            detail::util::crc32(0, testing::bytes_of(a + b)));
}

}  // namespace
}  // namespace tensorseal
