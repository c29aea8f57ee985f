// canon --check (check_canonical / check_canonical_file, tensorseal/canon.h), the
// canonical bytes `canon --stdout` writes, and the textconv form of inspect
// (to_textconv) that git's diff driver shows. Fixtures: gen_tools (real torch.save
// and safetensors files) and the seed's legacy vectors.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

std::shared_ptr<Tensor> f32(std::vector<float> v, std::vector<std::int64_t> shape) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return make_contiguous(DType::kFloat32, std::move(shape), Storage::owned(std::move(b), DType::kFloat32));
}

TEST(CanonCheck, CanonicalBytesAreCanonical) {
  for (const char* name : {"base.pt", "base.safetensors", "metaorder_a.safetensors"}) {
    SCOPED_TRACE(name);
    const Checkpoint c = read_file(testing::tools_fixture(name));
    const std::string bytes = canonical_bytes(c);
    const Checkpoint again = read_bytes(testing::bytes_of(bytes), "canonical");
    const CanonCheck r = check_canonical(again, testing::bytes_of(bytes));
    EXPECT_TRUE(r.canonical);
    EXPECT_EQ(r.first_difference, kNoOffset);
    EXPECT_EQ(r.reason, "");
    EXPECT_EQ(r.size, bytes.size());
    EXPECT_EQ(r.canonical_size, bytes.size());
    EXPECT_EQ(r.format, c.format);
    EXPECT_EQ(r.canonical_format, c.format);
    // What canon writes to a file is the same bytes, and checks canonical from disk.
    testing::TempDir d;
    const fs::path out = d.path() / name;
    write_file(c.root, out, canonical_format(c), canonical_write_options(c, canonical_format(c)));
    EXPECT_EQ(testing::read_all(out), bytes);
    EXPECT_TRUE(check_canonical_file(out).canonical);
    EXPECT_EQ(read_file(out).metadata.size(), c.metadata.size());  // user metadata kept
  }
}

TEST(CanonCheck, TorchSaveZipIsNotCanonical) {
  const CanonCheck r = check_canonical_file(testing::tools_fixture("base.pt"));
  EXPECT_FALSE(r.canonical);
  EXPECT_EQ(r.format, Format::kTorchZip);
  EXPECT_EQ(r.canonical_format, Format::kTorchZip);
  EXPECT_LT(r.first_difference, std::min(r.size, r.canonical_size));
  EXPECT_NE(r.reason.find("differs from its canonical torch-zip bytes at byte " + std::to_string(r.first_difference)),
            std::string::npos)
      << r.reason;
  EXPECT_EQ(r.size, fs::file_size(testing::tools_fixture("base.pt")));
}

TEST(CanonCheck, SafetensorsHeaderOrderIsNotCanonical) {
  const CanonCheck r = check_canonical_file(testing::tools_fixture("keyorder_b.safetensors"));
  EXPECT_FALSE(r.canonical);
  EXPECT_EQ(r.format, Format::kSafetensors);
  EXPECT_GE(r.first_difference, 8u);  // the length prefix agrees; the header does not
  EXPECT_EQ(r.size, r.canonical_size);
  // Both key orders have one canonical form.
  EXPECT_EQ(canonical_bytes(read_file(testing::tools_fixture("keyorder_a.safetensors"))),
            canonical_bytes(read_file(testing::tools_fixture("keyorder_b.safetensors"))));
}

TEST(CanonCheck, LegacyFileIsNotInItsCanonicalFormat) {
  const fs::path seed = fs::path(testing::vectors_dir()) / "seed_pickle_torch15_run1.bin";
  const CanonCheck r = check_canonical_file(seed);
  EXPECT_FALSE(r.canonical);
  EXPECT_NE(r.format, Format::kTorchZip);
  EXPECT_EQ(r.canonical_format, Format::kTorchZip);
  EXPECT_EQ(r.first_difference, 0u);  // a pickle opcode where the zip's "PK" is
  EXPECT_NE(r.reason.find("its canonical form is torch-zip"), std::string::npos) << r.reason;
}

// Canonical is a matter of form, not of content: a changed tensor value in a
// canonical safetensors file leaves it canonical.
TEST(CanonCheck, ChangedValuesKeepTheForm) {
  const std::string bytes = canonical_bytes(read_file(testing::tools_fixture("base.safetensors")));
  std::string changed = bytes;
  changed.back() = static_cast<char>(changed.back() ^ 0x01);
  const Checkpoint c = read_bytes(testing::bytes_of(changed), "changed");
  EXPECT_NE(content_hash(c.root), content_hash(read_bytes(testing::bytes_of(bytes), "b").root));
  EXPECT_TRUE(check_canonical(c, testing::bytes_of(changed)).canonical);
}

TEST(CanonCheck, LengthDifferencesAreFoundAtTheShorterLength) {
  const std::string bytes = canonical_bytes(read_file(testing::tools_fixture("base.pt")));
  const Checkpoint c = read_bytes(testing::bytes_of(bytes), "canonical");
  const std::string longer = bytes + "x";
  const CanonCheck l = check_canonical(c, testing::bytes_of(longer));
  EXPECT_FALSE(l.canonical);
  EXPECT_EQ(l.first_difference, bytes.size());
  EXPECT_EQ(l.size, bytes.size() + 1);
  EXPECT_EQ(l.canonical_size, bytes.size());
  const std::string shorter = bytes.substr(0, bytes.size() - 1);
  const CanonCheck s = check_canonical(c, testing::bytes_of(shorter));
  EXPECT_FALSE(s.canonical);
  EXPECT_EQ(s.first_difference, bytes.size() - 1);
  std::string flipped = bytes;
  flipped[100] = static_cast<char>(flipped[100] ^ 0x20);
  EXPECT_EQ(check_canonical(c, testing::bytes_of(flipped)).first_difference, 100u);
}

TEST(CanonCheck, UnreadableInputAndDirectoriesThrow) {
  testing::TempDir d;
  EXPECT_EQ(testing::rule_of([&] { (void)check_canonical_file(d.path()); }), "canon/check-directory");
  EXPECT_EQ(testing::rule_of([&] { (void)check_canonical_file(d.path() / "missing.pt"); }), "io/open");
  write_all(d.path() / "junk.pt", "this is not a checkpoint at all");
  EXPECT_EQ(testing::rule_of([&] { (void)check_canonical_file(d.path() / "junk.pt"); }), "detect/unknown-format");
}

TEST(CanonCheck, CliExitStatusNamesEachFileThatIsNot) {
  testing::TempDir d;
  const Checkpoint c = read_file(testing::tools_fixture("base.pt"));
  const fs::path good = d.path() / "good.pt";
  write_all(good, canonical_bytes(c));
  std::string out;
  EXPECT_EQ(testing::run_cli("canon --check " + good.string(), &out), 0);
  EXPECT_EQ(out, "");
  EXPECT_EQ(testing::run_cli("canon --check " + good.string() + " " + testing::tools_fixture("base.pt").string(), &out),
            1);
  EXPECT_EQ(out.find(good.string()), std::string::npos) << out;
  EXPECT_EQ(out.rfind(testing::tools_fixture("base.pt").string() +
                          ": not canonical: differs from its canonical torch-zip bytes",
                      0),
            0u)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  EXPECT_EQ(testing::run_cli("canon --check " + good.string() + " " + (d.path() / "missing.pt").string(), &out), 2);
  EXPECT_EQ(testing::run_cli("canon --check " + good.string() + " -o " + (d.path() / "x.pt").string(), &out), 2);
  EXPECT_FALSE(fs::exists(d.path() / "x.pt"));
  const auto before = fs::last_write_time(good);
  EXPECT_EQ(testing::run_cli("canon --check " + testing::tools_fixture("base.pt").string(), &out), 1);
  EXPECT_EQ(fs::last_write_time(good), before);
}

Value sample(bool reversed, float w0, std::int64_t epoch) {
  Value root = Value::dict();
  std::vector<std::pair<Value, Value>> items;
  items.emplace_back(Value::str("w"), Value(f32({w0, 2, 3, 4, 5, 6}, {2, 3})));
  items.emplace_back(Value::str("epoch"), Value(epoch));
  items.emplace_back(Value::str("name"), Value::str("run\nA"));
  items.emplace_back(Value::str("notes"), Value::str(std::string(100, 'n')));
  if (reversed) std::reverse(items.begin(), items.end());
  for (auto& [k, v] : items) root.as_dict().set(k, v);
  return root;
}

std::string textconv_of(const Value& root) {
  Checkpoint c;
  c.format = Format::kTorchZip;
  c.root = root;
  InspectOptions o;
  o.values = true;
  return to_textconv(inspect(c, o));
}

TEST(Textconv, OneSortedLinePerTensorAndValue) {
  const Value root = sample(false, 1, 3);
  const std::string text = textconv_of(root);
  const std::string w = tensor_sha256(*collect_tensors(root)[0].tensor);
  const std::string want =
      "format torch-zip\n"
      "content_hash " +
      content_hash(root) +
      "\n"
      "value epoch: 3\n"
      "value name: 'run\\x0aA'\n"
      "value notes: str[100] sha256:" +
      sha256_hex(testing::bytes_of(std::string(100, 'n'))) +
      "\n"
      "tensor w: float32 [2, 3] sha256:" +
      w + "\n";
  EXPECT_EQ(text, want);
}

TEST(Textconv, DependsOnContentNotOrderOrBytes) {
  EXPECT_EQ(textconv_of(sample(false, 1, 3)), textconv_of(sample(true, 1, 3)));
  const std::string a = textconv_of(sample(false, 1, 3));
  const std::string b = textconv_of(sample(false, 7, 3));
  EXPECT_NE(a, b);
  // Exactly the changed tensor's line and the content hash differ.
  std::istringstream sa(a), sb(b);
  std::vector<std::string> changed;
  for (std::string la, lb; std::getline(sa, la) && std::getline(sb, lb);)
    if (la != lb) changed.push_back(la.substr(0, la.find(':')));
  EXPECT_EQ(changed, (std::vector<std::string>{"content_hash sha256", "tensor w"}));
  // A file and its canonical copy read the same.
  const Checkpoint f = read_file(testing::tools_fixture("base.pt"));
  const std::string canon = canonical_bytes(f);
  InspectOptions o;
  o.values = true;
  EXPECT_EQ(to_textconv(inspect(f, o)), to_textconv(inspect(read_bytes(testing::bytes_of(canon), "c"), o)));
  EXPECT_TRUE(inspect(f).values.empty());  // only on request
}

TEST(GitSetup, AttributeLinesCoverCheckpointExtensions) {
  const auto lines = git_attribute_lines();
  for (const char* ext : {"pt", "pth", "bin", "ckpt", "safetensors"})
    EXPECT_NE(std::find(lines.begin(), lines.end(), std::string("*.") + ext + " diff=tseal filter=tseal"), lines.end())
        << ext;
  const auto cfg = git_config_entries();
  ASSERT_EQ(cfg.size(), 2u);
  EXPECT_EQ(cfg[0], (std::pair<std::string, std::string>{"diff.tseal.textconv", "tseal inspect --textconv"}));
  EXPECT_EQ(cfg[1], (std::pair<std::string, std::string>{"filter.tseal.clean", "tseal canon --stdin --stdout"}));
}

}  // namespace
}  // namespace tensorseal
