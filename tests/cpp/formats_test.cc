// The format table (src/api/formats.cc, include/tensorseal/format.h): every lookup,
// detection and write goes through one row per format.
#include <set>

#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

Value one_tensor() {
  std::vector<std::byte> bytes(12);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 1);
  return Value(std::shared_ptr<const Tensor>(make_contiguous(DType::kFloat32, {3}, Storage::owned(std::move(bytes)))));
}

// A root each writable format can hold: .npy holds one tensor, the others a dict.
Value root_for(Format f) {
  if (f == Format::kNpy) return one_tensor();
  Value d = Value::dict();
  d.as_dict().set(Value::str("w"), one_tensor());
  return d;
}

TEST(Formats, NamesAliasesAndExtensionsAreUniqueAndResolve) {
  std::set<std::string_view> names, extensions;
  for (const FormatInfo& f : formats()) {
    EXPECT_NE(f.format, Format::kUnknown);
    EXPECT_EQ(format_info(f.format), &f);
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_EQ(format_name(f.format), f.name);
    EXPECT_EQ(format_from_name(f.name), f.format);
    for (auto a : f.aliases) {
      EXPECT_TRUE(names.insert(a).second) << "alias " << a << " names two formats";
      EXPECT_EQ(format_from_name(a), f.format) << a;
    }
    for (auto e : f.extensions) {
      EXPECT_TRUE(extensions.insert(e).second) << e;
      EXPECT_EQ(format_for_extension("dir.d/model" + std::string(e)), f.format) << e;
    }
    EXPECT_FALSE(f.description.empty()) << f.name;
    // canon's target is always writable and canonical itself.
    const FormatInfo* c = format_info(f.canonical);
    ASSERT_NE(c, nullptr) << f.name;
    EXPECT_TRUE(c->writable) << f.name;
    EXPECT_EQ(c->canonical, c->format) << f.name;
  }
  EXPECT_EQ(formats().size(), 8u);
  EXPECT_EQ(format_info(Format::kUnknown), nullptr);
  EXPECT_EQ(format_name(Format::kUnknown), "unknown");
  EXPECT_EQ(format_from_name("pt"), Format::kTorchZip);
  EXPECT_EQ(format_from_name("legacy"), Format::kTorchLegacy);
  EXPECT_EQ(format_from_name("nope"), std::nullopt);
  EXPECT_EQ(format_for_extension("MODEL.SafeTensors"), Format::kSafetensors);
  EXPECT_EQ(format_for_extension("model.ckpt"), Format::kTorchZip);
  EXPECT_EQ(format_for_extension("model"), Format::kUnknown);
  EXPECT_EQ(format_for_extension("model.txt"), Format::kUnknown);
}

TEST(Formats, EveryWriterProducesWhatItsRowDetectsAndReads) {
  int writable = 0;
  for (const FormatInfo& f : formats()) {
    if (!f.writable) {
      EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(root_for(f.format), f.format); }), rules::kInvalidArgument.id) << f.name;
      continue;
    }
    ++writable;
    const Value root = root_for(f.format);
    if (f.directory) {  // written and read as a directory (shards_test.cc), never as bytes
      EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(root, f.format); }), rules::kInvalidArgument.id) << f.name;
      continue;
    }
    const std::string bytes = write_bytes(root, f.format);
    EXPECT_EQ(detect_format(testing::bytes_of(bytes)), f.format) << f.name;
    const Checkpoint c = read_bytes(testing::bytes_of(bytes), "x");
    EXPECT_EQ(c.format, f.format) << f.name;
    EXPECT_EQ(content_hash(c.root), content_hash(root)) << f.name;
  }
  EXPECT_EQ(writable, 7);
}

TEST(Formats, UnknownBytesNameEveryFormatOfTheTable) {
  try {
    (void)read_bytes(testing::bytes_of("just some text"), "notes.txt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.rule(), rules::kUnknownFormat.id);
    EXPECT_EQ(e.offset(), 0u);
    for (const FormatInfo& f : formats()) EXPECT_NE(std::string(e.what()).find(f.name), std::string::npos) << f.name;
  }
}

TEST(Formats, CanonRefusesAnOutputNameOfAnotherFormat) {
  const fs::path dir = fs::temp_directory_path() / "tseal_formats_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path src = dir / "in.pt";
  write_file(root_for(Format::kTorchZip), src, Format::kTorchZip);
  std::string out;
  EXPECT_EQ(testing::run_cli("canon " + src.string() + " -o " + (dir / "out.safetensors").string()), 2);
  EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
  // An extension the table does not know, or the same family, is fine.
  EXPECT_EQ(testing::run_cli("canon " + src.string() + " -o " + (dir / "out.pth").string()), 0);
  EXPECT_EQ(testing::run_cli("canon " + src.string() + " -o " + (dir / "out.weights").string()), 0);
  EXPECT_EQ(testing::read_all(dir / "out.pth"), testing::read_all(dir / "out.weights"));
  // convert --to takes every writable name and alias of the table.
  EXPECT_EQ(testing::run_cli("convert " + src.string() + " " + (dir / "legacy.pt").string() + " --to legacy"), 0);
  EXPECT_EQ(read_file(dir / "legacy.pt").format, Format::kTorchLegacy);
  EXPECT_EQ(testing::run_cli("convert " + src.string() + " " + (dir / "x.out").string() + " --to pickle"), 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tensorseal
