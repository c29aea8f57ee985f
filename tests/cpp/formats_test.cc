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
  EXPECT_EQ(formats().size(), 9u);
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
      EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(root_for(f.format), f.format); }), rules::kInvalidArgument.id)
          << f.name;
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

// A safetensors file whose bytes are also a protocol-0/1 pickle that imports
// posix.system: the header length starts BINBYTES, which skips into a metadata string
// of SHORT_BINSTRING/POP skips that lands on the tensor data, where the payload waits
// (hostile input: no producer writes it; pickle.load and torch.load run it).
std::string safetensors_pickle_polyglot() {
  const std::string payload = "0cposix\nsystem\n(S'true'\ntR.";  // POP, then the call
  const std::string k = std::to_string(payload.size());
  const std::string prefix =
      R"({"w":{"dtype":"U8","shape":[)" + k + R"(],"data_offsets":[0,)" + k + R"(]},"__metadata__":{"p":")";
  const std::uint64_t skip = 3 + prefix.size();    // BINBYTES operand: up to the string
  const std::uint64_t header = 0x42 + 256 * skip;  // 'B' then the operand's bytes
  std::string body;
  std::uint64_t pos = 8 + prefix.size();
  const std::string tail = R"("}})";
  while (8 + header - pos > 130) {
    body += "U~" + std::string(126, '~') + "0";  // skip 126 bytes, POP
    pos += 129;
  }
  const std::uint64_t last = 8 + header - pos - 2;  // the final skip covers the tail
  body += "U" + std::string(1, static_cast<char>(last)) + std::string(last - tail.size(), '~');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header >> (8 * i)) & 0xff);
  out += prefix + body + tail + payload;
  return out;
}

TEST(Formats, SafetensorsThatIsAlsoAnImportingPickleIsAmbiguous) {
  const std::string poly = safetensors_pickle_polyglot();
  ASSERT_EQ(detect_format(testing::bytes_of(poly)), Format::kSafetensors);
  try {
    (void)read_bytes(testing::bytes_of(poly), "poly.pt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.rule(), rules::kAmbiguousFormat.id);
    EXPECT_EQ(e.kind(), ErrorKind::kUnsafe);
    EXPECT_EQ(e.file(), "poly.pt");
    EXPECT_NE(std::string(e.what()).find("posix.system"), std::string::npos) << e.what();
  }
  ReadOptions as_safetensors;
  as_safetensors.format = Format::kSafetensors;
  const Checkpoint c = read_bytes(testing::bytes_of(poly), "poly.pt", as_safetensors);
  EXPECT_EQ(c.format, Format::kSafetensors);
  EXPECT_EQ(c.root.as_dict().items.size(), 1u);
}

TEST(Formats, HeaderBytesThatFormAHarmlessPickleAreNotAmbiguous) {
  // Header length 0x2e88: NEWTRUE, STOP. pickle.load returns True and imports nothing.
  std::string json = R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  json.resize(0x2e88, ' ');
  std::string file(8, '\0');
  file[0] = '\x88';
  file[1] = '.';
  file += json + "x";
  EXPECT_EQ(read_bytes(testing::bytes_of(file), "benign.safetensors").format, Format::kSafetensors);
}

TEST(Formats, AnExplicitFormatReadsOnlyThatFormat) {
  const std::string st = write_bytes(root_for(Format::kSafetensors), Format::kSafetensors);
  ReadOptions o;
  o.format = Format::kTorchZip;
  EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(st), "x", o); }), rules::kFormatMismatch.id);
  o.format = Format::kSafetensors;
  EXPECT_EQ(read_bytes(testing::bytes_of(st), "x", o).format, Format::kSafetensors);
  // A directory format names its own entry file, or says the directory is not one.
  const fs::path dir = fs::temp_directory_path() / "tseal_formats_explicit";
  fs::remove_all(dir);
  fs::create_directories(dir);
  o.format = Format::kDcp;
  EXPECT_EQ(testing::rule_of([&] { (void)read_file(dir, o); }), rules::kFormatMismatch.id);
  fs::remove_all(dir);
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
