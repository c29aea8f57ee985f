// SafetensorsStream (tensorseal/write.h): a .safetensors file written while its
// tensors are still being made. Its contract: a committed file is byte for byte what
// write_file writes for the same root; anything it cannot promise that for (a root that
// differs from the entries, a tensor put wrong or not at all, an unplannable entry, a
// failed write) leaves nothing and makes finish() return false.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path fixtures() { return testing::fixture_dir("gen_safetensors"); }

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("tseal-stream-" + std::to_string(::getpid()) + "-" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Scratch() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  // Nothing but `keep` in the directory (no temp file left behind).
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::vector<SafetensorsStream::Entry> entries_of(const Value& root) {
  std::vector<SafetensorsStream::Entry> out;
  for (const auto& [k, v] : root.as_dict().items) out.push_back({k.as_str(), v.as_tensor()->dtype, v.as_tensor()->shape});
  return out;
}

// Streams `root` (a dict of tensors) to `path`, putting the tensors in `order`
// (indices into the dict; all of them by default, last to first).
bool stream(const Value& root, const fs::path& path, const WriteOptions& o = {},
            std::optional<std::vector<std::size_t>> order = std::nullopt) {
  auto s = SafetensorsStream::begin(path, entries_of(root), o);
  EXPECT_TRUE(s);
  if (!s) return false;
  const auto& items = root.as_dict().items;
  if (!order) {
    order.emplace();
    for (std::size_t i = items.size(); i-- > 0;) order->push_back(i);
  }
  for (std::size_t i : *order) s->put(i, items[i].second.as_tensor());
  return s->finish(root);
}

std::shared_ptr<Tensor> counting(DType dtype, std::vector<std::int64_t> shape, std::uint8_t seed) {
  auto t = make_contiguous(dtype, shape, nullptr);
  std::vector<std::byte> b(t->nbytes());
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(seed + i * 7);
  return make_contiguous(dtype, std::move(shape), Storage::owned(std::move(b), dtype));
}

Value many(std::size_t n) {
  Value d = Value::dict();
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt64, DType::kBool, DType::kUInt8};
  for (std::size_t i = 0; i < n; ++i)
    d.as_dict().set(Value::str("layer." + std::to_string((i * 37) % n) + ".w"),
                    Value(counting(dtypes[i % 6], {static_cast<std::int64_t>(i % 5), 3}, static_cast<std::uint8_t>(i))));
  return d;
}

TEST(SafetensorsStream, EveryRealSafetensorsCaseIsByteIdenticalToWriteFile) {
  const auto all = json::parse(testing::read_all(fixtures() / "index.json")).get<std::vector<std::string>>();
  ASSERT_GE(all.size(), 35u);
  Scratch s;
  std::size_t streamed = 0;
  for (const auto& c : all) {
    SCOPED_TRACE(c);
    const json m = json::parse(testing::read_all(fixtures() / (c + ".json")));
    const Checkpoint read = read_file(fixtures() / m["file"].get<std::string>());
    if (!read.root.is(Value::Kind::kDict) || read.root.as_dict().items.empty()) continue;
    WriteOptions o;
    for (const auto& [k, v] : read.metadata) o.metadata.emplace_back(k, v);
    const fs::path out = s.dir / (c + ".safetensors");
    ASSERT_TRUE(stream(read.root, out, o));
    EXPECT_EQ(testing::read_all(out), write_bytes(read.root, Format::kSafetensors, o));
    ++streamed;
  }
  EXPECT_GE(streamed, 30u);
}

TEST(SafetensorsStream, ManyTensorsInAnyPutOrderGiveWriteFilesBytes) {
  Scratch s;
  const Value root = many(1000);
  const std::string want = write_bytes(root, Format::kSafetensors);
  ASSERT_TRUE(stream(root, s.dir / "a.safetensors"));
  EXPECT_EQ(testing::read_all(s.dir / "a.safetensors"), want);
  std::vector<std::size_t> forward(1000);
  for (std::size_t i = 0; i < forward.size(); ++i) forward[i] = i;
  ASSERT_TRUE(stream(root, s.dir / "b.safetensors", {}, forward));
  EXPECT_EQ(testing::read_all(s.dir / "b.safetensors"), want);
  WriteOptions o;
  o.metadata = {{"z", "1"}, {"a", "\"quoted\"\n"}};
  o.fsync = false;
  ASSERT_TRUE(stream(root, s.dir / "c.safetensors", o));
  EXPECT_EQ(testing::read_all(s.dir / "c.safetensors"), write_bytes(root, Format::kSafetensors, o));
  EXPECT_EQ(s.names(), (std::vector<std::string>{"a.safetensors", "b.safetensors", "c.safetensors"}));
}

TEST(SafetensorsStream, ViewsAreWrittenAsTheirElements) {
  // A transposed view (strided runs) and a slice at an offset into a larger storage.
  Scratch s;
  auto base = counting(DType::kFloat32, {4, 6}, 1);
  auto t = std::make_shared<Tensor>(*base);
  t->shape = {6, 4};
  t->strides = {1, 6};
  auto slice = std::make_shared<Tensor>(*counting(DType::kInt16, {10}, 9));
  slice->shape = {3};
  slice->storage_offset = 5;
  Value root = Value::dict();
  root.as_dict().set(Value::str("t"), Value(std::shared_ptr<const Tensor>(t)));
  root.as_dict().set(Value::str("s"), Value(std::shared_ptr<const Tensor>(slice)));
  root.as_dict().set(Value::str("empty"), Value(std::shared_ptr<const Tensor>(counting(DType::kFloat64, {0, 3}, 0))));
  ASSERT_TRUE(stream(root, s.dir / "v.safetensors"));
  EXPECT_EQ(testing::read_all(s.dir / "v.safetensors"), write_bytes(root, Format::kSafetensors));
}

TEST(SafetensorsStream, WhatItCannotPromiseLeavesNothing) {
  Scratch s;
  const fs::path out = s.dir / "x.safetensors";
  const Value root = many(10);
  const auto& items = root.as_dict().items;
  {  // a tensor missing
    auto st = SafetensorsStream::begin(out, entries_of(root));
    for (std::size_t i = 1; i < items.size(); ++i) st->put(i, items[i].second.as_tensor());
    EXPECT_FALSE(st->finish(root));
  }
  {  // a tensor whose shape is not the entry's
    auto st = SafetensorsStream::begin(out, entries_of(root));
    for (std::size_t i = 0; i < items.size(); ++i) st->put(i, items[(i + 1) % items.size()].second.as_tensor());
    EXPECT_FALSE(st->finish(root));
  }
  {  // the same index twice
    auto st = SafetensorsStream::begin(out, entries_of(root));
    for (std::size_t i = 0; i < items.size(); ++i) st->put(i, items[i].second.as_tensor());
    st->put(0, items[0].second.as_tensor());
    EXPECT_FALSE(st->finish(root));
  }
  {  // a root other than the one put: another key order
    auto st = SafetensorsStream::begin(out, entries_of(root));
    for (std::size_t i = 0; i < items.size(); ++i) st->put(i, items[i].second.as_tensor());
    Value other = Value::dict();
    for (std::size_t i = items.size(); i-- > 0;) other.as_dict().set(items[i].first, items[i].second);
    EXPECT_FALSE(st->finish(other));
  }
  {  // never finished
    auto st = SafetensorsStream::begin(out, entries_of(root));
    for (std::size_t i = 0; i < items.size(); ++i) st->put(i, items[i].second.as_tensor());
  }
  EXPECT_TRUE(s.names().empty());
}

TEST(SafetensorsStream, SharedMemoryAndFlagsGoToTheStructureForm) {
  // Two entries over one storage, or a requires_grad tensor: write_safetensors writes
  // the whole-checkpoint form for these, so the stream must not commit its flat file.
  Scratch s;
  auto a = counting(DType::kFloat32, {4}, 3);
  Value shared = Value::dict();
  shared.as_dict().set(Value::str("a"), Value(std::shared_ptr<const Tensor>(a)));
  shared.as_dict().set(Value::str("b"), Value(std::shared_ptr<const Tensor>(std::make_shared<Tensor>(*a))));
  EXPECT_FALSE(stream(shared, s.dir / "shared.safetensors"));
  auto g = std::make_shared<Tensor>(*counting(DType::kFloat32, {2}, 1));
  g->requires_grad = true;
  Value flags = Value::dict();
  flags.as_dict().set(Value::str("g"), Value(std::shared_ptr<const Tensor>(g)));
  EXPECT_FALSE(stream(flags, s.dir / "flags.safetensors"));
  EXPECT_TRUE(s.names().empty());
}

TEST(SafetensorsStream, UnplannableEntriesAndUnwritableDirectoriesFallBackToWriteFile) {
  Scratch s;
  Value reserved = Value::dict();
  reserved.as_dict().set(Value::str("__metadata__"), Value(std::shared_ptr<const Tensor>(counting(DType::kUInt8, {1}, 0))));
  EXPECT_FALSE(stream(reserved, s.dir / "r.safetensors"));
  EXPECT_EQ(testing::rule_of([&] { write_file(reserved, s.dir / "r.safetensors", Format::kSafetensors); }),
            "safetensors/reserved-name");
  Value bad = Value::dict();  // a dtype safetensors cannot hold
  bad.as_dict().set(Value::str("q"), Value(std::shared_ptr<const Tensor>(counting(DType::kQInt8, {2}, 0))));
  EXPECT_FALSE(stream(bad, s.dir / "q.safetensors"));
  const Value root = many(3);
  EXPECT_FALSE(stream(root, s.dir / "missing" / "m.safetensors"));  // no such directory
  EXPECT_TRUE(s.names().empty());
}

}  // namespace
}  // namespace tensorseal
