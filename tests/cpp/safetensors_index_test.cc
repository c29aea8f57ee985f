// The safetensors header index (include/tensorseal/safetensors.h) used for lazy access:
// on real files from safetensors 0.8 it lists what read_file reads; its errors are the
// full reader's (safetensors_rules_test checks every rule through both); and its two
// parsers, the fast scanner and nlohmann's SAX parser (src/safetensors/header.cc),
// give the same result for every header, valid or hostile.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>

#include "../../fuzz/fuzz_util.h"
#include "safetensors/format.h"
#include "safetensors/header.h"
#include "test_util.h"
#include "util/endian.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

using testing::make_safetensors_file;
std::string make_file(std::string_view header, std::string_view buffer = {}) {
  return make_safetensors_file(header, buffer);
}

// Everything an index holds, as text (two indexes are equal when their texts are).
std::string render(const SafetensorsIndex& idx) { return fuzz::render_index(idx); }

detail::io::Input input_of(const std::string& bytes, const ReadOptions& opt) {
  detail::io::Input in;
  in.whole = Storage::owned(std::vector<std::byte>(testing::bytes_of(bytes).begin(), testing::bytes_of(bytes).end()));
  in.name = "x.safetensors";
  in.options = &opt;
  return in;
}

// The index (or the error) one parser makes of `bytes`.
std::string outcome(const std::string& bytes, bool fast, const ReadOptions& opt = {}) {
  try {
    return render(detail::safetensors::index_safetensors(input_of(bytes, opt), fast));
  } catch (const Error& e) {
    return std::string("error ") + e.what();
  }
}

// The full reader's verdict: "" or the error.
std::string reader_error(const std::string& bytes, const ReadOptions& opt = {}) {
  try {
    (void)detail::safetensors::read_safetensors(input_of(bytes, opt));
  } catch (const Error& e) {
    return std::string("error ") + e.what();
  }
  return "";
}

// Both parsers agree, and the full reader fails exactly when the index does, with the
// same error. Returns the outcome.
std::string expect_same(const std::string& bytes, const ReadOptions& opt = {}) {
  const std::string fast = outcome(bytes, true, opt);
  const std::string slow = outcome(bytes, false, opt);
  EXPECT_EQ(fast, slow) << "header: " << bytes.substr(8, 300);
  const std::string full = reader_error(bytes, opt);
  if (fast.rfind("error ", 0) == 0) {
    EXPECT_EQ(full, fast);
  } else if (full.find("safetensors/bad-structure") == std::string::npos) {
    EXPECT_EQ(full, "");
  }
  return fast;
}

std::vector<fs::path> real_files() {
  std::vector<fs::path> out;
  for (const char* gen : {"gen_safetensors", "gen_safetensors_dtypes"})
    for (const auto& p : fs::directory_iterator(testing::fixture_dir(gen)))
      if (p.path().extension() == ".safetensors") out.push_back(p.path());
  std::sort(out.begin(), out.end());
  return out;
}

// ---- real files ------------------------------------------------------------------------

TEST(SafetensorsIndex, RealFilesListWhatReadFileReads) {
  const auto files = real_files();
  ASSERT_GE(files.size(), 10u) << "fixtures missing";
  for (const auto& path : files) {
    SCOPED_TRACE(path.filename().string());
    const SafetensorsIndex idx = read_safetensors_index(path);
    const Checkpoint c = read_file(path);
    ASSERT_TRUE(idx.mapping);
    EXPECT_EQ(idx.file, path.string());
    EXPECT_EQ(idx.whole->size(), fs::file_size(path));
    const std::string bytes = testing::read_all(path);
    EXPECT_EQ(outcome(bytes, true), outcome(bytes, false));
    if (idx.structured()) continue;
    EXPECT_EQ(idx.metadata, c.metadata);
    // read_file's dict is the index's entries in data order, tensor for tensor.
    const auto& items = c.root.as_dict().items;
    ASSERT_EQ(items.size(), idx.entries.size());
    ASSERT_EQ(idx.by_offset.size(), idx.entries.size());
    for (std::size_t k = 0; k < items.size(); ++k) {
      const SafetensorsEntry& e = idx.entries[idx.by_offset[k]];
      EXPECT_EQ(items[k].first.as_str(), e.name);
      const Tensor& want = *items[k].second.as_tensor();
      const auto got = idx.tensor(e);
      EXPECT_EQ(got->dtype, want.dtype);
      EXPECT_EQ(got->shape, want.shape);
      EXPECT_EQ(got->strides, want.strides);
      EXPECT_EQ(got->storage->dtype, want.storage->dtype);
      EXPECT_EQ(got->storage->file_offset(), want.storage->file_offset());
      ASSERT_EQ(got->storage->size(), want.storage->size());
      EXPECT_TRUE(got->storage->is_mapped());
      EXPECT_EQ(std::memcmp(got->storage->bytes().data(), want.storage->bytes().data(), want.storage->size()), 0);
      EXPECT_EQ(idx.find(e.name), &e);
    }
    // by_name: every entry once, names ascending.
    ASSERT_EQ(idx.by_name.size(), idx.entries.size());
    for (std::size_t k = 1; k < idx.by_name.size(); ++k)
      EXPECT_LT(idx.entries[idx.by_name[k - 1]].name, idx.entries[idx.by_name[k]].name);
    EXPECT_EQ(idx.find("no such tensor"), nullptr);
  }
}

TEST(SafetensorsIndex, FromBytesOwnsACopy) {
  const std::string f =
      make_file("{\"__metadata__\":{\"k\":\"v\"}," + testing::safetensors_entry("a", "I32", "[2]", "[0,8]") + "}",
                std::string("\1\0\0\0\2\0\0\0", 8));
  SafetensorsIndex idx = read_safetensors_index(testing::bytes_of(f), "mem");
  EXPECT_FALSE(idx.mapping);
  EXPECT_EQ(idx.file, "mem");
  EXPECT_EQ(idx.metadata_position, 0u);
  ASSERT_NE(idx.find("a"), nullptr);
  const auto t = idx.tensor(*idx.find("a"));
  EXPECT_EQ(t->numel(), 2u);
  std::int32_t v[2];
  std::memcpy(v, t->storage->bytes().data(), 8);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], 2);
  EXPECT_FALSE(idx.structured());
}

// ---- the two parsers agree -------------------------------------------------------------

TEST(SafetensorsIndex, ManyEntriesSortedByNameAndByData) {
  // Names sharing long prefixes, names that are prefixes of others, and '~' / DEL
  // (bytes above every letter), listed in neither order.
  std::vector<std::string> names;
  for (int i = 0; i < 1500; ++i) names.push_back("model.layers." + std::to_string(i * 7919 % 1500) + ".w");
  for (const char* n : {"model", "model.", "model.layers", "~", "\x7f", "", "Model", "model.layers.1.w.x"})
    names.push_back(n);
  // Data in the reverse order of the listing; some tensors empty.
  std::vector<std::uint64_t> len(names.size()), begin(names.size());
  std::uint64_t at = 0;
  for (std::size_t i = names.size(); i-- > 0;) {
    len[i] = 4 * (i % 3);
    begin[i] = at;
    at += len[i];
  }
  std::string header = "{";
  for (std::size_t i = 0; i < names.size(); ++i)
    header += (i ? "," : "") + testing::safetensors_entry(
                                   names[i], "F32", "[" + std::to_string(len[i] / 4) + "]",
                                   "[" + std::to_string(begin[i]) + "," + std::to_string(begin[i] + len[i]) + "]");
  header += "}";
  const std::string f = make_file(header, std::string(at, '\0'));
  const std::string got = expect_same(f);
  ASSERT_EQ(got.rfind("error", 0), std::string::npos) << got;
  const SafetensorsIndex idx = read_safetensors_index(testing::bytes_of(f), "many");
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(idx.by_name.size(), sorted.size());
  for (std::size_t k = 0; k < sorted.size(); ++k) EXPECT_EQ(idx.entries[idx.by_name[k]].name, sorted[k]);
  for (const auto& n : names) {
    ASSERT_NE(idx.find(n), nullptr) << n;
    EXPECT_EQ(idx.find(n)->name, n);
  }
  EXPECT_EQ(idx.find("model.layers.1"), nullptr);
  for (std::size_t k = 1; k < idx.by_offset.size(); ++k)
    EXPECT_LE(idx.entries[idx.by_offset[k - 1]].begin, idx.entries[idx.by_offset[k]].begin);
}

TEST(SafetensorsIndex, ParserOnlyFormsGiveTheSameIndex) {
  // Each is outside the fast scanner's subset, so nlohmann's parser reads it; the index
  // must be what the scanner would give for the plain spelling.
  const std::string plain =
      make_file("{\"__metadata__\":{\"k\":\"v\"}," + testing::safetensors_entry("a", "I32", "[2]", "[0,8]") + "}",
                std::string(8, '\0'));
  const std::string want = outcome(plain, true);
  ASSERT_EQ(want.rfind("error", 0), std::string::npos) << want;
  auto same_index = [&](const std::string& header) {
    const std::string f = make_file(header, std::string(8, '\0'));
    const std::string got = expect_same(f);
    // Header length and padding differ with the spelling; the rest must not.
    EXPECT_EQ(got.substr(got.find('\n')), want.substr(want.find('\n'))) << header;
  };
  same_index(
      "{\"__metadata__\":{\"k\":\"\\u0076\"},\"\\u0061\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}");
  same_index(
      "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":[{}]}}");
  same_index(
      "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"data_offsets\":[0,8],\"x\":null,\"shape\":[2],\"dtype\":\"I32\"}}");
  same_index(
      " \t\n{ \"__metadata__\" : { \"k\" : \"v\" } , \"a\" : { \"dtype\" : \"I32\" , \"shape\" : [ 2 ] , "
      "\"data_offsets\" : [ 0 , 8 ] } }\r\n   ");
  // Non-ASCII names go through the parser and keep their bytes.
  const std::string uni = make_file("{" + testing::safetensors_entry("w\xc3\xa9ight", "I32", "[2]", "[0,8]") + "," +
                                        testing::safetensors_entry("\\u00e9", "I32", "[0]", "[8,8]") + "}",
                                    std::string(8, '\0'));
  const std::string got = expect_same(uni);
  EXPECT_NE(got.find("\n  w\xc3\xa9ight int32"), std::string::npos) << got;
  EXPECT_NE(got.find("\n  \xc3\xa9 int32"), std::string::npos) << got;
}

TEST(SafetensorsIndex, HostileHeadersSameErrorOnBothParsers) {
  const std::string e8 = std::string(8, '\0');
  const std::string a = testing::safetensors_entry("a", "I32", "[2]", "[0,8]");
  struct Case {
    std::string header;
    std::string rule;  // expected, "" = valid
  };
  const std::vector<Case> cases = {
      {"{}", "safetensors/buffer-length"},
      {"{" + a + "}", ""},
      {"{\"__metadata__\":null," + a + "}", ""},
      {"{" + a + ",\"__metadata__\":{}}", ""},
      {"{" + a + "," + a + "}", "safetensors/duplicate-key"},
      {"{\"b\":1,\"a\":2,\"b\":3,\"a\":4}", "safetensors/duplicate-key"},
      {"{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}," + a + "}", "safetensors/duplicate-key"},
      {"{\"__metadata__\":{},\"__metadata__\":{}," + a + "}", "safetensors/duplicate-key"},
      {"{\"a\":{\"dtype\":\"I32\",\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
       "safetensors/duplicate-key"},
      {"{\"\\u0061\":{},\"a\":{}}", "safetensors/duplicate-key"},
      {"{" + a + ",\"a\":[}", "safetensors/duplicate-key"},  // before the syntax error after it
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}", "safetensors/header-json"},
      {"{" + a + "}x", "safetensors/header-json"},
      {"{" + a + ",}", "safetensors/header-json"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[02],\"data_offsets\":[0,8]}}", "safetensors/header-json"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,1e999]}}", "safetensors/header-json"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8.0]}}", "safetensors/bad-offsets"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[-0,8]}}", "safetensors/bad-offsets"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", "safetensors/bad-offsets"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0]}}", "safetensors/bad-offsets"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[8,0]}}", "safetensors/bad-offsets"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":{}}}", "safetensors/bad-offsets"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,8]}}", "safetensors/bad-shape"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,8]}}", "safetensors/bad-shape"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[[2]],\"data_offsets\":[0,8]}}", "safetensors/bad-shape"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", "safetensors/bad-shape"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}",
       "safetensors/size-overflow"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[0,8]}}", "safetensors/size-mismatch"},
      {"{\"a\":{\"dtype\":\"I33\",\"shape\":[2],\"data_offsets\":[0,8]}}", "safetensors/unknown-dtype"},
      {"{\"a\":{\"dtype\":\"I\\u0033\",\"shape\":[2],\"data_offsets\":[0,8]}}", "safetensors/unknown-dtype"},
      {"{\"a\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", "safetensors/entry-type"},
      {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", "safetensors/entry-type"},
      {"{\"a\":{\"dtype\":\"I32\",\"data_offsets\":[0,8]}}", "safetensors/entry-type"},
      {"{\"a\":[]}", "safetensors/entry-type"},
      {"{\"a\":{}}", "safetensors/entry-type"},
      {"{\"__metadata__\":{\"k\":1}," + a + "}", "safetensors/metadata-type"},
      {"{\"__metadata__\":[]," + a + "}", "safetensors/metadata-type"},
      // The first broken entry in file order names the rule.
      {"{\"__metadata__\":{\"k\":1},\"a\":{}}", "safetensors/metadata-type"},
      {"{\"a\":{},\"__metadata__\":{\"k\":1}}", "safetensors/entry-type"},
      {"[]", "safetensors/header-not-object"},
      {"{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,8]}}", "safetensors/misaligned-sub-byte"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "safetensors/buffer-length"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[4,8]}}", "safetensors/offsets-tiling"},
      {std::string(200, '[') + std::string(200, ']'), "safetensors/header-json"},
      {"{\"a\":" + std::string(130, '[') + std::string(130, ']') + "}", "safetensors/header-json"},
  };
  for (const auto& c : cases) {
    const std::string got = expect_same(make_file(c.header, e8));
    if (c.rule.empty())
      EXPECT_EQ(got.rfind("error", 0), std::string::npos) << c.header << "\n" << got;
    else
      EXPECT_NE(got.find("[" + c.rule + "]"), std::string::npos) << c.header << "\n" << got;
  }
  EXPECT_EQ(expect_same(make_file("{}")).rfind("error", 0), std::string::npos);
  EXPECT_EQ(expect_same(make_file("  {  }  ")).rfind("error", 0), std::string::npos);
  // The first duplicate in file order is named, as the parser meets it.
  EXPECT_NE(outcome(make_file("{\"b\":1,\"a\":2,\"b\":3,\"a\":4}", e8), true).find("key 'b'"), std::string::npos);
  // Limits: the scanner leaves long shapes to the parser, which names the count.
  ReadOptions opt;
  opt.limits.max_ndim = 2;
  const std::string deep =
      expect_same(make_file("{\"a\":{\"dtype\":\"I32\",\"shape\":[1,1,2],\"data_offsets\":[0,8]}}", e8), opt);
  EXPECT_NE(deep.find("3 dimensions exceed the limit"), std::string::npos) << deep;
  opt = {};
  opt.limits.max_entries = 1;
  EXPECT_NE(expect_same(make_file("{\"__metadata__\":{}," + a + "}", e8), opt).find("safetensors/too-many-tensors"),
            std::string::npos);
}

// Random edits of a real header: whatever they make (valid, broken JSON, broken rules),
// the fast scanner and the parser agree.
TEST(SafetensorsIndex, RandomEditsAgreeOnBothParsers) {
  const std::string base = testing::read_all(testing::fixture_dir("gen_safetensors") / "meta_one.safetensors");
  ASSERT_GT(base.size(), 8u);
  const std::uint64_t n = detail::util::load_le<std::uint64_t>(reinterpret_cast<const std::byte*>(base.data()));
  const std::string header = base.substr(8, n), data = base.substr(8 + n);
  const std::string alphabet = "{}[]:,\"\\ \t\n0123456789-.eE+aIFU_untrlsfx~\x7f\xc3\xa9";
  std::mt19937_64 rng(20261130);
  int valid = 0, parsed_differently = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string h = header;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits && !h.empty(); ++k) {
      const std::size_t at = rng() % h.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 4) {
        case 0:
          h[at] = c;
          break;
        case 1:
          h.insert(h.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        case 2:
          h.erase(at, 1 + rng() % 3);
          break;
        case 3: {  // repeat a span: duplicate keys and entries
          const std::size_t len = std::min<std::size_t>(1 + rng() % 40, h.size() - at);
          h.insert(rng() % h.size(), h.substr(at, len));
          break;
        }
      }
    }
    const std::string f = make_file(h, data);
    const std::string got = expect_same(f);
    if (got.rfind("error", 0) != 0) ++valid;
    if (outcome(f, true) != outcome(f, false)) ++parsed_differently;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_EQ(parsed_differently, 0);
  EXPECT_GT(valid, 40);  // the edits reach valid files too (whitespace, padding, renames)
}

// ---- laziness ------------------------------------------------------------------------

TEST(SafetensorsIndex, IndexingNeverTouchesTheData) {
  // A 1 GiB tensor in a sparse file: the index reads the header page only, and a tensor
  // made from it is a window of the mapping (nothing read until used).
  const fs::path path = fs::temp_directory_path() / ("tensorseal_index_" + std::to_string(::getpid()) + ".safetensors");
  const std::uint64_t size = 1ull << 30;
  const std::string head = make_file(
      "{" +
      testing::safetensors_entry("big", "U8", "[" + std::to_string(size) + "]", "[0," + std::to_string(size) + "]") +
      "}");
  {
    std::ofstream out(path, std::ios::binary);
    out << head;
  }
  fs::resize_file(path, head.size() + size);
  const SafetensorsIndex idx = read_safetensors_index(path);
  ASSERT_EQ(idx.entries.size(), 1u);
  const auto t = idx.tensor(idx.entries[0]);
  EXPECT_EQ(t->nbytes(), size);
  EXPECT_TRUE(t->storage->is_mapped());
  EXPECT_EQ(t->storage->file_offset(), head.size());
  // mincore: pages of the data buffer resident in this mapping (skip the first, which
  // holds the header).
  const long page = ::sysconf(_SC_PAGESIZE);
  auto* base = const_cast<std::byte*>(idx.mapping->bytes().data());
  const std::size_t pages = (idx.mapping->size() + page - 1) / page;
  std::vector<unsigned char> resident(pages);
  ASSERT_EQ(::mincore(base, idx.mapping->size(), resident.data()), 0);
  const auto touched = std::count_if(resident.begin() + 2, resident.end(), [](unsigned char r) { return r & 1; });
  EXPECT_EQ(touched, 0);
  fs::remove(path);
}

}  // namespace
}  // namespace tensorseal
