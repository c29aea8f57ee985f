// explain: safetensors pairs made by real safetensors, hand-built Checkpoints whose
// facts differ, and the seed's two pickles (once the pickle reader lands).
#include "tensorseal/explain.h"

#include <sys/wait.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "pickle/vm.h"
#include "test_util.h"
#include "tools/explain_topics.h"
#include "zip/describe.h"

namespace tensorseal {
namespace {

using nlohmann::json;

ExplainReport explain_files(const std::string& a, const std::string& b) {
  return explain(read_file(testing::tools_fixture(a)), read_file(testing::tools_fixture(b)));
}

std::vector<std::string> topics(const ExplainReport& r) {
  std::vector<std::string> t;
  for (const auto& d : r.differences) t.push_back(d.topic);
  return t;
}

TEST(Explain, ByteIdenticalFilesStopEarly) {
  ExplainReport r = explain_files("base.safetensors", "base_copy.safetensors");
  EXPECT_TRUE(r.bytes_compared);
  EXPECT_TRUE(r.bytes_identical);
  EXPECT_TRUE(r.same_content);
  EXPECT_EQ(r.differing_bytes, 0u);
  EXPECT_FALSE(r.first_differing_byte);
  EXPECT_TRUE(r.differences.empty());
  EXPECT_TRUE(r.content_hash_a.empty());  // not needed, not computed
}

TEST(Explain, MetadataOrderIsTheOnlyDifference) {
  ExplainReport r = explain_files("metaorder_a.safetensors", "metaorder_b.safetensors");
  EXPECT_FALSE(r.bytes_identical);
  EXPECT_TRUE(r.same_content);
  EXPECT_EQ(r.content_hash_a, r.content_hash_b);
  EXPECT_GT(r.differing_bytes, 0u);
  ASSERT_TRUE(r.first_differing_byte);
  EXPECT_GT(*r.first_differing_byte, 8u);  // inside the header, past the length prefix
  EXPECT_EQ(r.size_a, r.size_b);
  ASSERT_EQ(topics(r), (std::vector<std::string>{"safetensors.metadata_order"})) << to_json(r);
  EXPECT_NE(*r.differences[0].a, *r.differences[0].b);
  EXPECT_NE(r.differences[0].explanation.find("hash map"), std::string::npos);
}

TEST(Explain, HeaderPaddingAndMetadataValue) {
  ExplainReport r = explain_files("padding_a.safetensors", "padding_b.safetensors");
  EXPECT_TRUE(r.same_content);
  const auto t = topics(r);
  EXPECT_NE(std::find(t.begin(), t.end(), "safetensors.header_length"), t.end()) << to_json(r);
  EXPECT_NE(std::find(t.begin(), t.end(), "safetensors.header_padding"), t.end()) << to_json(r);
  for (const auto& d : r.differences) {
    EXPECT_TRUE(d.topic == "safetensors.header_length" || d.topic == "safetensors.header_padding" ||
                d.topic == "metadata")
        << d.topic;
    if (d.topic == "metadata") {
      EXPECT_EQ(d.where, "note");
      EXPECT_EQ(d.a, "a");
      EXPECT_EQ(d.b, "abcd");
    }
  }
  EXPECT_EQ(std::count(t.begin(), t.end(), "metadata"), 1);
}

TEST(Explain, HeaderKeyOrder) {
  ExplainReport r = explain_files("keyorder_a.safetensors", "keyorder_b.safetensors");
  EXPECT_TRUE(r.same_content);
  EXPECT_EQ(topics(r), (std::vector<std::string>{"safetensors.key_order"})) << to_json(r);
}

TEST(Explain, DifferentContentPointsToDiff) {
  ExplainReport r = explain_files("ulp_a.safetensors", "ulp_b.safetensors");
  EXPECT_FALSE(r.same_content);
  EXPECT_NE(r.content_hash_a, r.content_hash_b);
  EXPECT_EQ(r.differing_tensors, 1u);
  EXPECT_EQ(r.differing_bytes, 1u);  // one ULP up: the low byte of one float32
  ASSERT_EQ(topics(r), (std::vector<std::string>{"data"}));
  EXPECT_NE(r.differences[0].explanation.find("tseal diff"), std::string::npos);
  EXPECT_NE(r.differences[0].explanation.find("1 of 6 tensors differ"), std::string::npos);
}

// Unit level: facts compared by topic + where; values, one-sided facts, format, order.
TEST(Explain, FactsComparedByTopicAndWhere) {
  auto w = make_contiguous(DType::kUInt8, {1}, Storage::owned({std::byte{1}}));
  auto v = make_contiguous(DType::kUInt8, {1}, Storage::owned({std::byte{2}}));
  Checkpoint a, b;
  a.format = Format::kTorchZip;
  b.format = Format::kTorchLegacy;
  a.root = Value::dict();
  a.root.as_dict().set(Value::str("w"), Value(w));
  a.root.as_dict().set(Value::str("v"), Value(v));
  b.root = Value::dict();
  b.root.as_dict().set(Value::str("v"), Value(v));
  b.root.as_dict().set(Value::str("w"), Value(w));
  a.facts = {{"zip.prefix", "archive", "a"},
             {"pickle.protocol", "data.pkl", "2"},
             {"storage.key", "w", "0"},
             {"custom.thing", "x", "1"},
             {"zip.timestamps", "data.pkl", "0"}};
  b.facts = {{"pickle.protocol", "data.pkl", "2"},
             {"storage.key", "w", "140365944682560"},
             {"custom.thing", "x", "2"},
             {"zip.prefix", "archive", "b"},
             {"pickle.memo", "data.pkl", "3 puts"}};
  ExplainReport r = explain(a, b);
  EXPECT_FALSE(r.bytes_compared);  // read from memory: no mapping
  EXPECT_TRUE(r.same_content);
  std::map<std::string, const ExplainItem*> by;
  for (const auto& d : r.differences) by[d.topic] = &d;
  EXPECT_EQ(by.size(), 7u) << to_json(r);
  EXPECT_EQ(by.count("pickle.protocol"), 0u);  // equal on both sides
  ASSERT_TRUE(by.count("format"));
  EXPECT_EQ(by["format"]->a, "torch-zip");
  EXPECT_EQ(by["format"]->b, "torch-legacy");
  ASSERT_TRUE(by.count("storage.key"));
  EXPECT_EQ(by["storage.key"]->where, "w");
  EXPECT_EQ(by["storage.key"]->b, "140365944682560");
  EXPECT_NE(by["storage.key"]->explanation.find("memory address"), std::string::npos);
  EXPECT_EQ(by["zip.prefix"]->a, "a");
  EXPECT_EQ(by["zip.timestamps"]->b, std::nullopt);  // only in a
  EXPECT_NE(by["zip.timestamps"]->explanation.find("only the torch-zip file"), std::string::npos);
  EXPECT_EQ(by["pickle.memo"]->a, std::nullopt);                               // only in b
  EXPECT_EQ(by["custom.thing"]->explanation, explain_topic("no.such.topic"));  // generic
  ASSERT_TRUE(by.count("order.tensors"));
  EXPECT_EQ(by["order.tensors"]->a, "w, v");
  EXPECT_EQ(by["order.tensors"]->b, "v, w");
  EXPECT_EQ(by.count("data"), 0u);
}

// Every declared topic has a sentence of its own.
TEST(ExplainTopics, DeclaredTopicsHaveDistinctSentences) {
  std::set<std::string_view> ids;
  for (const auto& t : detail::tools::known_topics()) {
    EXPECT_FALSE(t.id.empty());
    EXPECT_TRUE(ids.insert(t.id).second) << "declared twice: " << t.id;
    EXPECT_EQ(explain_topic(t.id), t.sentence) << t.id;
    EXPECT_NE(explain_topic(t.id), explain_topic("unknown.topic")) << t.id;
  }
  EXPECT_GT(ids.size(), 30u);
}

// Topics of the facts the readers emit for every fixture (real producers' files, the
// seed vectors), for a tensorseal-written structured safetensors file, for a pickle
// that leaves values behind at STOP, and for an archive with unaccounted bytes.
std::set<std::string> emitted_topics() {
  std::set<std::string> out;
  auto add = [&](const std::vector<Fact>& facts) {
    for (const auto& f : facts) out.insert(f.topic);
  };
  std::vector<std::filesystem::path> files;
  for (const auto& root :
       {testing::fixture_dir("gen_tools").parent_path(), std::filesystem::path(testing::vectors_dir())})
    for (const auto& e : std::filesystem::recursive_directory_iterator(root))
      if (e.is_regular_file()) files.push_back(e.path());
  EXPECT_GT(files.size(), 50u);
  for (const auto& f : files) {
    try {
      add(read_file(f).facts);
    } catch (const Error&) {  // hostile fixtures, scripts, JSON
    }
  }
  Value nested = Value::dict();
  nested.as_dict().set(Value::str("layers"), Value::list({Value(std::int64_t{3})}));
  const std::string st = write_bytes(nested, Format::kSafetensors);
  add(read_bytes(testing::bytes_of(st), "structured.safetensors").facts);
  const std::string leftover = "\x80\x02K\x01K\x02.";
  add(detail::pickle::parse(testing::bytes_of(leftover), "leftover.pkl", 0, Limits{}).facts);
  const auto shard_dir = std::filesystem::temp_directory_path() / "tseal_explain_topics_shards";
  std::filesystem::remove_all(shard_dir);
  Value flat = Value::dict();
  flat.as_dict().set(Value::str("w"), Value(std::shared_ptr<const Tensor>(make_contiguous(
                                          DType::kUInt8, {2}, Storage::owned(std::vector<std::byte>(2))))));
  write_file(flat, shard_dir, Format::kHfShards);
  add(read_file(shard_dir).facts);
  std::filesystem::remove_all(shard_dir);
  detail::zip::Archive gaps;
  gaps.unaccounted_bytes = 6;
  add(detail::zip::describe(gaps, ""));
  return out;
}

// Facts have one dialect: no reader emits a topic explain has no sentence for, and
// every declared topic is emitted by some reader (explain's own four by explain).
TEST(ExplainTopics, DeclaredEqualsEmitted) {
  const std::set<std::string> emitted = emitted_topics();
  std::set<std::string> declared, own;
  for (const auto& t : detail::tools::known_topics()) declared.insert(std::string(t.id));
  for (const auto& t : detail::tools::own_topics()) own.insert(std::string(t.id));
  EXPECT_EQ(own.size(), 4u);
  for (const auto& t : emitted) {
    EXPECT_TRUE(declared.count(t)) << "emitted without a declaration: " << t;
    EXPECT_FALSE(own.count(t)) << "a reader emits explain's own topic " << t;
  }
  for (const auto& t : declared)
    if (!own.count(t)) EXPECT_TRUE(emitted.count(t)) << "declared but emitted by no reader: " << t;
}

TEST(Explain, JsonSchema) {
  json j = json::parse(to_json(explain_files("padding_a.safetensors", "padding_b.safetensors")));
  for (const char* k : {"file_a", "file_b", "content_hash_a", "content_hash_b"}) EXPECT_TRUE(j[k].is_string()) << k;
  for (const char* k : {"bytes_compared", "bytes_identical", "same_content"}) EXPECT_TRUE(j[k].is_boolean()) << k;
  for (const char* k : {"size_a", "size_b", "differing_bytes", "first_differing_byte", "differing_tensors"})
    EXPECT_TRUE(j[k].is_number_unsigned()) << k;
  ASSERT_TRUE(j["differences"].is_array());
  ASSERT_FALSE(j["differences"].empty());
  for (const auto& d : j["differences"]) {
    for (const char* k : {"topic", "where", "explanation"}) EXPECT_TRUE(d[k].is_string()) << k;
    for (const char* k : {"a", "b"}) EXPECT_TRUE(d[k].is_string() || d[k].is_null()) << k;
  }
  json same = json::parse(to_json(explain_files("base.safetensors", "base_copy.safetensors")));
  EXPECT_TRUE(same["bytes_identical"].get<bool>());
  EXPECT_TRUE(same["first_differing_byte"].is_null());
  EXPECT_TRUE(same["content_hash_a"].is_null());
}

// Reads a file; skips the test while the reader for its format has not landed.
#define READ_OR_SKIP(var, path)                                                    \
  Checkpoint var;                                                                  \
  try {                                                                            \
    var = read_file(path);                                                         \
  } catch (const Error& e) {                                                       \
    if (e.rule() == "value/unsupported") FAIL() << "reader missing: " << e.what(); \
    throw;                                                                         \
  }

// The seed: the same torch.IntTensor([1]) pickled by torch 1.5 in two runs. The only
// difference is the storage key, a memory address.
TEST(Explain, SeedPicklesDifferOnlyInTheStorageKey) {
  const std::string vectors = testing::vectors_dir();
  READ_OR_SKIP(a, vectors + "/seed_pickle_torch15_run1.bin");
  READ_OR_SKIP(b, vectors + "/seed_pickle_torch15_run2.bin");
  ExplainReport r = explain(a, b);
  EXPECT_FALSE(r.bytes_identical);
  EXPECT_EQ(r.differing_bytes, 18u);
  EXPECT_TRUE(r.same_content);
  ASSERT_EQ(r.differences.size(), 1u) << to_json(r);
  EXPECT_EQ(r.differences[0].topic, "storage.key");
  EXPECT_EQ(r.differences[0].a, "140655645110640");
  EXPECT_EQ(r.differences[0].b, "140365944682560");
}

TEST(ExplainTorch, SameContentInTwoFormats) {
  READ_OR_SKIP(b, testing::tools_fixture("formats_b.pt"));
  ExplainReport r = explain(read_file(testing::tools_fixture("formats_a.safetensors")), b);
  EXPECT_TRUE(r.same_content) << to_json(r);
  ASSERT_FALSE(r.differences.empty());
  for (const auto& d : r.differences) EXPECT_NE(d.topic, "data");
  EXPECT_EQ(r.differences[0].topic, "format");
}

TEST(ExplainTorch, FileNameChangesOnlyTheZipPrefix) {
  READ_OR_SKIP(a, testing::tools_fixture("base.pt"));
  READ_OR_SKIP(b, testing::tools_fixture("base_copy.pt"));
  ExplainReport r = explain(a, b);
  EXPECT_TRUE(r.same_content);
  const auto t = topics(r);
  EXPECT_NE(std::find(t.begin(), t.end(), "zip.prefix"), t.end()) << to_json(r);
  for (const auto& d : r.differences) EXPECT_TRUE(d.topic.starts_with("zip.")) << d.topic;
}

using testing::run_cli;

TEST(ExplainCli, ExitStatusAndJson) {
  if (!std::filesystem::exists(std::string(TENSORSEAL_BINARY_DIR) + "/tseal")) FAIL() << "tseal not built";
  std::string out;
  EXPECT_EQ(run_cli("explain " + testing::tools_fixture("metaorder_a.safetensors").string() + " " +
                        testing::tools_fixture("metaorder_b.safetensors").string(),
                    &out),
            0);
  EXPECT_NE(out.find("content:  identical"), std::string::npos) << out;
  EXPECT_NE(out.find("safetensors.metadata_order"), std::string::npos) << out;
  EXPECT_EQ(run_cli("explain " + testing::tools_fixture("base.safetensors").string() + " " +
                        testing::tools_fixture("base_copy.safetensors").string(),
                    &out),
            0);
  EXPECT_EQ(out.rfind("bytes identical", 0), 0u) << out;
  EXPECT_EQ(run_cli("explain --json " + testing::tools_fixture("ulp_a.safetensors").string() + " " +
                        testing::tools_fixture("ulp_b.safetensors").string(),
                    &out),
            1);
  EXPECT_FALSE(json::parse(out)["same_content"].get<bool>());
  EXPECT_EQ(run_cli("explain /nonexistent " + testing::tools_fixture("ulp_b.safetensors").string()), 2);
}

}  // namespace
}  // namespace tensorseal
