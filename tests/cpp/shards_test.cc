// Hugging Face shard directories (docs/formats/hf-shards.md): the writer's split and
// bytes, the directory round trip, and the rules that need no real producer (those
// with one are in tests/py/test_hf_shards.py).
#include <fstream>

#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;

Value tensor_of(std::size_t n, int seed) {
  std::vector<std::byte> bytes(n * 4);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + seed);
  return Value(std::shared_ptr<const Tensor>(
      make_contiguous(DType::kFloat32, {static_cast<std::int64_t>(n)}, Storage::owned(std::move(bytes)))));
}

// Tensors t0..t4 of 400, 400, 4000, 400, 400 bytes, inserted in name order or reversed.
Value state_dict(bool reversed = false) {
  Value d = Value::dict();
  const std::size_t sizes[] = {100, 100, 1000, 100, 100};
  for (int j = 0; j < 5; ++j) {
    const int i = reversed ? 4 - j : j;
    d.as_dict().set(Value::str("t" + std::to_string(i)), tensor_of(sizes[i], i));
  }
  return d;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("tseal_shards_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

TEST(HfShards, ParseShardSizeLikeHuggingfaceHub) {
  EXPECT_EQ(parse_shard_size("5GB"), 5'000'000'000u);
  EXPECT_EQ(parse_shard_size(" 1.5 mb "), 1'500'000u);
  EXPECT_EQ(parse_shard_size("10KB"), 10'000u);
  EXPECT_EQ(parse_shard_size("2tb"), 2'000'000'000'000u);
  EXPECT_EQ(parse_shard_size("12345"), 12'345u);
  for (const char* bad : {"", "GB", "5XB", "-1MB", "0KB", "1e400GB", "five MB"})
    EXPECT_EQ(testing::rule_of([&] { (void)parse_shard_size(bad); }), "shards/bad-size") << bad;
}

TEST(HfShards, GreedySplitInNameOrderAndRoundTrip) {
  const fs::path dir = fresh_dir("split");
  const Value sd = state_dict();
  WriteOptions o;
  set_option(o.format_options, Format::kHfShards, "max_shard_size", "1000");
  write_file(sd, dir / "out", Format::kHfShards, o);
  // huggingface_hub's split: the 4000-byte t2 gets its own shard, appended when met
  // (before the open shard {t0, t1}); 800 + 400 > 1000 then closes {t0, t1}:
  // [t2], [t0, t1], [t3, t4].
  const Checkpoint c = read_file(dir / "out");
  EXPECT_EQ(c.format, Format::kHfShards);
  EXPECT_EQ(option_value(c.layout, "shard_counts"), "1,2,2");
  std::vector<std::string> order;
  for (const auto& [k, v] : c.root.as_dict().items) order.emplace_back(k.as_str());
  EXPECT_EQ(order, (std::vector<std::string>{"t2", "t0", "t1", "t3", "t4"}));
  EXPECT_EQ(content_hash(c.root), content_hash(sd));
  EXPECT_EQ(hash_file(dir / "out"), content_hash(sd));
  EXPECT_EQ(hash_file(dir / "out" / "model.safetensors.index.json"), content_hash(sd));
  const std::string index = testing::read_all(dir / "out" / "model.safetensors.index.json");
  EXPECT_EQ(index.substr(0, 46), "{\n  \"metadata\": {\n    \"total_size\": 5600\n  },\n");
  EXPECT_TRUE(index.ends_with("}\n"));
  // Same content, same bytes; canon's split (shard_counts) reproduces it.
  WriteOptions keep;
  keep.format_options = c.layout;
  write_file(c.root, dir / "again", Format::kHfShards, keep);
  for (const auto& e : fs::directory_iterator(dir / "out"))
    EXPECT_EQ(testing::read_all(e.path()), testing::read_all(dir / "again" / e.path().filename())) << e.path();
  // The split runs over the names sorted, not the root's order: reversed, the same bytes.
  write_file(state_dict(true), dir / "reversed", Format::kHfShards, o);
  for (const auto& e : fs::directory_iterator(dir / "out"))
    EXPECT_EQ(testing::read_all(e.path()), testing::read_all(dir / "reversed" / e.path().filename())) << e.path();
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "reversed"), fs::directory_iterator()), 4);
  set_option(keep.format_options, Format::kHfShards, "shard_counts", "1,2");
  EXPECT_EQ(testing::rule_of([&] { write_file(c.root, dir / "bad", Format::kHfShards, keep); }), "shards/bad-split");
  EXPECT_FALSE(fs::exists(dir / "bad"));
  EXPECT_EQ(testing::rule_of([&] { (void)write_bytes(sd, Format::kHfShards); }), rules::kInvalidArgument.id);
  fs::remove_all(dir);
}

TEST(HfShards, IndexRules) {
  const fs::path dir = fresh_dir("rules");
  write_file(state_dict(), dir / "ok", Format::kHfShards);
  const std::string index = testing::read_all(dir / "ok" / "model.safetensors.index.json");
  // An index read from memory has no shards beside it.
  EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(index), "<bytes>"); }), "shards/not-on-disk");
  // A shard whose root is not a dict of tensors (a torch file holding a list).
  fs::create_directories(dir / "list");
  write_file(Value::list({tensor_of(2, 1)}), dir / "list" / "a.bin", Format::kTorchZip);
  write_text(dir / "list" / "model.safetensors.index.json", R"({"weight_map": {"x": "a.bin"}})");
  EXPECT_EQ(testing::rule_of([&] { (void)read_file(dir / "list"); }), "shards/shard-not-flat");
  // An oversized index.
  fs::create_directories(dir / "big");
  {
    std::ofstream f(dir / "big" / "model.safetensors.index.json", std::ios::binary);
    f << "{\"weight_map\": {}, \"pad\": \"";
    f << std::string(100'000'001, 'x') << "\"}";
  }
  EXPECT_EQ(testing::rule_of([&] { (void)read_file(dir / "big"); }), "shards/index-too-large");
  // Two unrelated indexes: ambiguous.
  fs::create_directories(dir / "two");
  write_text(dir / "two" / "a.index.json", R"({"weight_map": {}})");
  write_text(dir / "two" / "b.index.json", R"({"weight_map": {}})");
  EXPECT_EQ(testing::rule_of([&] { (void)read_file(dir / "two"); }), "shards/ambiguous-index");
  // An empty weight_map is an empty checkpoint.
  fs::remove(dir / "two" / "b.index.json");
  EXPECT_TRUE(read_file(dir / "two").root.as_dict().items.empty());
  // The CLI: one line, the rule, exit status 2.
  std::string out;
  EXPECT_EQ(testing::run_cli("hash " + (dir / "list").string(), &out), 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tensorseal
