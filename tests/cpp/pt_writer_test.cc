// The canonical .pt writer's serialization_id (docs/formats/canonical-pt.md): computed
// here the slow, obvious way from the archive the writer wrote, and compared. Storage
// counts past 10 put "data/10" before "data/2" in name order, past 100 "data/100"
// before "data/11": the writer orders storage names without sorting them.
#include <openssl/evp.h>

#include <algorithm>
#include <tuple>

#include "test_util.h"
#include "util/endian.h"
#include "zip/reader.h"

namespace tensorseal {
namespace {

// 40 decimal digits of the first 16 bytes of SHA-256 over (name, NUL, u64 size, u32
// CRC32) of every record but the id's own, sorted by (name, size, crc).
std::string expected_id(const detail::zip::Archive& a) {
  std::vector<std::tuple<std::string, std::uint64_t, std::uint32_t>> records;
  for (const auto& e : a.entries)
    if (e.name != "archive/.data/serialization_id") records.emplace_back(e.name, e.size, e.crc32);
  std::sort(records.begin(), records.end());
  std::string buf;
  for (const auto& [name, size, crc] : records) {
    buf += name;
    buf += '\0';
    detail::util::append_le<std::uint64_t>(buf, size);
    detail::util::append_le<std::uint32_t>(buf, crc);
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(buf.data(), buf.size(), md, &len, EVP_sha256(), nullptr);
  unsigned __int128 x = 0;
  for (int i = 0; i < 16; ++i) x = (x << 8) | md[i];
  std::string digits;
  for (int i = 0; i < 40; ++i, x /= 10)
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(x % 10)));
  return digits;
}

TEST(CanonicalPt, SerializationIdIsSha256OverRecordsSortedByName) {
  for (std::size_t n : {0, 1, 2, 9, 10, 11, 99, 100, 101, 1000, 1234}) {
    Value d = Value::dict();
    for (std::size_t i = 0; i < n; ++i) {
      // Distinct bytes per storage: the CRCs differ, so an order mistake changes the id.
      std::vector<std::byte> b(4 + i % 3);
      for (std::size_t j = 0; j < b.size(); ++j) b[j] = static_cast<std::byte>(i * 31 + j);
      const std::int64_t numel = static_cast<std::int64_t>(b.size());
      d.as_dict().set(Value::str("t" + std::to_string(i)),
                      Value(std::shared_ptr<const Tensor>(
                          make_contiguous(DType::kUInt8, {numel}, Storage::owned(std::move(b), DType::kUInt8)))));
    }
    const std::string file = write_bytes(d, Format::kTorchZip);
    const auto a = detail::zip::read(testing::bytes_of(file), "t.pt", Limits{});
    std::vector<std::byte> scratch;
    const detail::zip::Entry* id = nullptr;
    std::size_t storages = 0;
    for (const auto& e : a.entries) {
      if (e.name == "archive/.data/serialization_id") id = &e;
      storages += e.name.starts_with("archive/data/");
    }
    ASSERT_NE(id, nullptr) << n;
    EXPECT_EQ(storages, n);
    const auto got = detail::zip::entry_bytes(testing::bytes_of(file), *id, scratch, "t.pt", Limits{});
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.data()), got.size()), expected_id(a)) << n << " storages";
  }
}

}  // namespace
}  // namespace tensorseal
