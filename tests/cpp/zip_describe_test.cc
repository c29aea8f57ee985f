// zip::describe: one set of zip facts for every format built on zip.
#include <set>

#include "test_util.h"
#include "zip/describe.h"

namespace tensorseal {
namespace {

detail::zip::Entry entry(std::string name, std::uint16_t method, std::uint16_t date, std::uint16_t system) {
  detail::zip::Entry e;
  e.name = std::move(name);
  e.method = method;
  e.dos_date = date;
  e.version_made_by = static_cast<std::uint16_t>(system << 8);
  return e;
}

std::vector<std::string> rows(const std::vector<Fact>& facts) {
  std::vector<std::string> out;
  for (const auto& f : facts) out.push_back(f.topic + " | " + f.where + " | " + f.value);
  return out;
}

TEST(ZipDescribe, FactsOfAnArchive) {
  detail::zip::Archive a;
  a.entries.push_back(entry("model/data.pkl", 0, (1 << 9) | (2 << 5) | 3, 3));
  a.entries.push_back(entry("model/data/0", 8, 0x21, 0));
  a.entries[1].has_data_descriptor = true;
  a.entries[1].central_extra = "xx";
  a.zip64 = true;
  EXPECT_EQ(rows(detail::zip::describe(a, "model/")),
            (std::vector<std::string>{
                "zip.prefix | archive folder | model",
                "zip.records | record order | data.pkl,data/0",
                "zip.timestamps | entries | 1980-01-01 00:00:00, 1981-02-03 00:00:00",
                "zip.data_descriptors | entries | not all",
                "zip.create_system | entries | 0 (msdos), 3 (unix)",
                "zip.extra_fields | central directory | central extra fields present",
                "zip.compression | entries | deflated, stored",
                "zip.zip64 | end records | present",
            }));
}

TEST(ZipDescribe, EmptyArchiveWithUnaccountedBytes) {
  detail::zip::Archive a;
  a.prefix_size = 4;
  a.unaccounted_bytes = 10;
  EXPECT_EQ(rows(detail::zip::describe(a, "")), (std::vector<std::string>{
                                                    "zip.records | record order | ",
                                                    "zip.timestamps | entries | none",
                                                    "zip.data_descriptors | entries | all",
                                                    "zip.create_system | entries | none",
                                                    "zip.extra_fields | central directory | none",
                                                    "zip.compression | entries | none",
                                                    "zip.zip64 | end records | absent",
                                                    "zip.unaccounted_bytes | byte 0 | 10 (prefix 4)",
                                                }));
}

// torch zip checkpoints and .npz files speak the same zip dialect.
TEST(ZipDescribe, TorchAndNumpyShareTheZipTopics) {
  auto zip_rows = [](const Checkpoint& c) {
    std::set<std::string> out;
    for (const auto& f : c.facts)
      if (f.topic.starts_with("zip.") && f.topic != "zip.prefix" && f.topic != "zip.serialization_id")
        out.insert(f.topic + " @ " + f.where);
    return out;
  };
  const Checkpoint pt = read_file(testing::fixture_dir("gen_torch") / "views.pt");
  const Checkpoint npz = read_file(testing::fixture_dir("gen_numpy") / "savez_compressed.npz");
  EXPECT_EQ(zip_rows(pt), zip_rows(npz));
  EXPECT_EQ(zip_rows(pt).size(), 7u);
}

}  // namespace
}  // namespace tensorseal
