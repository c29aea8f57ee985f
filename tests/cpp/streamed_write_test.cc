// StreamedWrite (tensorseal/write.h): a .safetensors or canonical .pt file written while
// its tensors are still being made. Its contract: a committed file is byte for byte what
// write_file writes for the same root; anything it cannot promise that for (a root that
// differs from the entries, a tensor put wrong or not at all, a root the writer would
// lay out otherwise, an unplannable entry, a failed write) leaves nothing and makes
// finish() return false.
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

std::vector<StreamedWrite::Entry> entries_of(const Value& root) {
  std::vector<StreamedWrite::Entry> out;
  for (const auto& [k, v] : root.as_dict().items)
    out.push_back({k.as_str(), v.as_tensor()->dtype, v.as_tensor()->shape});
  return out;
}

constexpr Format kFormats[] = {Format::kSafetensors, Format::kTorchZip};

// Streams `root` (a dict of tensors) to `path`, putting the tensors in `order`
// (indices into the dict; all of them by default, last to first).
bool stream(const Value& root, const fs::path& path, Format format, const WriteOptions& o = {},
            std::optional<std::vector<std::size_t>> order = std::nullopt) {
  auto s = StreamedWrite::begin(path, format, entries_of(root), o);
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
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                          DType::kInt64,   DType::kBool,    DType::kUInt8};
  for (std::size_t i = 0; i < n; ++i)
    d.as_dict().set(
        Value::str("layer." + std::to_string((i * 37) % n) + ".w"),
        Value(counting(dtypes[i % 6], {static_cast<std::int64_t>(i % 5), 3}, static_cast<std::uint8_t>(i))));
  return d;
}

Value dict_of(std::vector<std::pair<std::string, std::shared_ptr<const Tensor>>> items) {
  Value d = Value::dict();
  for (auto& [k, t] : items) d.as_dict().set(Value::str(k), Value(std::move(t)));
  return d;
}

// The same file as write_file, or (false) nothing at all.
void same_or_nothing(const Value& root, const fs::path& out, Format f, bool expect_streamed) {
  const bool streamed = stream(root, out, f);
  EXPECT_EQ(streamed, expect_streamed);
  if (streamed)
    EXPECT_EQ(testing::read_all(out), write_bytes(root, f));
  else
    EXPECT_FALSE(fs::exists(out));
}

TEST(StreamedWrite, EveryRealSafetensorsCaseIsByteIdenticalToWriteFile) {
  const auto all = json::parse(testing::read_all(fixtures() / "index.json")).get<std::vector<std::string>>();
  ASSERT_GE(all.size(), 35u);
  Scratch s;
  std::size_t streamed = 0;
  for (const auto& c : all) {
    SCOPED_TRACE(c);
    const json m = json::parse(testing::read_all(fixtures() / (c + ".json")));
    const Checkpoint read = read_file(fixtures() / m["file"].get<std::string>());
    if (!read.root.is(Value::Kind::kDict)) continue;
    WriteOptions o;
    for (const auto& [k, v] : read.metadata) o.metadata.emplace_back(k, v);
    for (Format f : kFormats) {
      const fs::path out = s.dir / (c + std::string(format_name(f)));
      ASSERT_TRUE(stream(read.root, out, f, o));
      EXPECT_EQ(testing::read_all(out), write_bytes(read.root, f, o));
      ++streamed;
    }
  }
  EXPECT_GE(streamed, 60u);
}

TEST(StreamedWrite, RealTorchFilesAreByteIdenticalOrLeftToWriteFile) {
  // Every dict of tensors torch.save wrote in the fixtures, as its reader gives it.
  const fs::path dir = testing::fixture_dir("gen_torch");
  Scratch s;
  std::size_t streamed = 0, tried = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".pt") continue;
    Checkpoint read;
    try {
      read = read_file(e.path());
    } catch (const Error&) {
      continue;  // the hostile and unsupported ones
    }
    if (!read.root.is(Value::Kind::kDict) || read.root.as_dict().items.empty()) continue;
    const auto& items = read.root.as_dict().items;
    if (!std::all_of(items.begin(), items.end(), [](const auto& kv) {
          return kv.first.is(Value::Kind::kStr) && kv.second.is(Value::Kind::kTensor);
        }))
      continue;
    SCOPED_TRACE(e.path().filename().string());
    ++tried;
    const fs::path out = s.dir / e.path().filename();
    if (stream(read.root, out, Format::kTorchZip)) {
      EXPECT_EQ(testing::read_all(out), write_bytes(read.root, Format::kTorchZip));
      ++streamed;
    } else {
      EXPECT_FALSE(fs::exists(out));
    }
  }
  EXPECT_GE(tried, 5u);
  EXPECT_GE(streamed, 2u);  // the plain dicts (dtypes); the state dicts are OrderedDicts
}

TEST(StreamedWrite, ManyTensorsInAnyPutOrderGiveWriteFilesBytes) {
  Scratch s;
  const Value root = many(1000);
  std::vector<std::size_t> forward(1000);
  for (std::size_t i = 0; i < forward.size(); ++i) forward[i] = i;
  for (Format f : kFormats) {
    const std::string want = write_bytes(root, f);
    ASSERT_TRUE(stream(root, s.dir / "a", f));
    EXPECT_EQ(testing::read_all(s.dir / "a"), want);
    ASSERT_TRUE(stream(root, s.dir / "b", f, {}, forward));
    EXPECT_EQ(testing::read_all(s.dir / "b"), want);
    WriteOptions o;
    o.metadata = {{"z", "1"}, {"a", "\"quoted\"\n"}};
    o.fsync = false;
    ASSERT_TRUE(stream(root, s.dir / "c", f, o));
    EXPECT_EQ(testing::read_all(s.dir / "c"), write_bytes(root, f, o));
    EXPECT_EQ(s.names(), (std::vector<std::string>{"a", "b", "c"}));
  }
}

// A .pt stream of the same names, dtypes and shapes as the last one reuses its pickle;
// these differ from `base` in one name, dtype, shape, rank or order only (the same
// number of entries and bytes), and each right after each must be its own file.
TEST(StreamedWrite, APtOfAnotherStructureNeverReusesTheLastPickle) {
  Scratch s;
  const auto base = [](std::vector<std::pair<std::string, std::shared_ptr<const Tensor>>> head) {
    if (head.empty()) head = {{"a", counting(DType::kFloat32, {2, 3}, 1)}, {"b", counting(DType::kFloat32, {4}, 2)}};
    for (int i = 0; i < 8; ++i) head.emplace_back("p" + std::to_string(i), counting(DType::kFloat32, {2, 3}, 3));
    return dict_of(std::move(head));
  };
  std::vector<Value> cases = {
      base({}),
      base({{"a", counting(DType::kFloat32, {2, 3}, 1)}, {"c", counting(DType::kFloat32, {4}, 2)}}),
      base({{"a", counting(DType::kInt32, {2, 3}, 1)}, {"b", counting(DType::kFloat32, {4}, 2)}}),
      base({{"a", counting(DType::kFloat32, {3, 2}, 1)}, {"b", counting(DType::kFloat32, {4}, 2)}}),
      // dims in a row 2 3 | 4 | 2 3 ... read as 2 | 4 2 | 3 ...
      base({{"a", counting(DType::kFloat32, {2}, 1)}, {"b", counting(DType::kFloat32, {4, 2}, 2)}}),
      base({{"b", counting(DType::kFloat32, {4}, 2)}, {"a", counting(DType::kFloat32, {2, 3}, 1)}}),
  };
  for (const Value& first : cases)
    for (const Value& then : cases) {
      ASSERT_TRUE(stream(first, s.dir / "first", Format::kTorchZip));
      ASSERT_TRUE(stream(then, s.dir / "then", Format::kTorchZip));
      EXPECT_EQ(testing::read_all(s.dir / "then"), write_bytes(then, Format::kTorchZip));
    }
}

TEST(StreamedWrite, EmptyDictsAndEmptyTensors) {
  Scratch s;
  for (Format f : kFormats) {
    same_or_nothing(Value::dict(), s.dir / "none", f, true);
    same_or_nothing(dict_of({{"a", counting(DType::kFloat32, {0}, 0)}, {"b", counting(DType::kInt8, {2, 0}, 0)}}),
                    s.dir / "empties", f, true);
    same_or_nothing(dict_of({{"e", counting(DType::kFloat32, {0}, 0)},
                             {"x", counting(DType::kInt8, {3}, 1)},
                             {"f", counting(DType::kFloat64, {0, 2}, 0)}}),
                    s.dir / "between", f, true);
    fs::remove_all(s.dir);
    fs::create_directories(s.dir);
  }
}

TEST(StreamedWrite, ViewsAreWrittenAsTheirElements) {
  // A transposed view (strided runs) and a slice at an offset into a larger storage:
  // both formats write their elements. An expanded view (stride 0): .pt writes the span
  // it reaches instead, so it is left to write_file.
  Scratch s;
  auto base = counting(DType::kFloat32, {4, 6}, 1);
  auto t = std::make_shared<Tensor>(*base);
  t->shape = {6, 4};
  t->strides = {1, 6};
  auto slice = std::make_shared<Tensor>(*counting(DType::kInt16, {10}, 9));
  slice->shape = {3};
  slice->storage_offset = 5;
  auto expanded = std::make_shared<Tensor>(*counting(DType::kInt32, {3}, 4));
  expanded->shape = {2, 3};
  expanded->strides = {0, 1};
  const Value views = dict_of({{"t", t}, {"s", slice}, {"empty", counting(DType::kFloat64, {0, 3}, 0)}});
  const Value with_expanded = dict_of({{"t", t}, {"x", expanded}});
  for (Format f : kFormats) {
    same_or_nothing(views, s.dir / ("v." + std::string(format_name(f))), f, true);
    same_or_nothing(with_expanded, s.dir / ("x." + std::string(format_name(f))), f, f == Format::kSafetensors);
  }
}

TEST(StreamedWrite, WhatItCannotPromiseLeavesNothing) {
  Scratch s;
  const fs::path out = s.dir / "x";
  const Value root = many(10);
  const auto& items = root.as_dict().items;
  for (Format f : kFormats) {
    {  // a tensor missing
      auto st = StreamedWrite::begin(out, f, entries_of(root));
      for (std::size_t i = 1; i < items.size(); ++i) st->put(i, items[i].second.as_tensor());
      EXPECT_FALSE(st->finish(root));
    }
    {  // a tensor whose shape is not the entry's
      auto st = StreamedWrite::begin(out, f, entries_of(root));
      for (std::size_t i = 0; i < items.size(); ++i) st->put(i, items[(i + 1) % items.size()].second.as_tensor());
      EXPECT_FALSE(st->finish(root));
    }
    {  // the same index twice
      auto st = StreamedWrite::begin(out, f, entries_of(root));
      for (std::size_t i = 0; i < items.size(); ++i) st->put(i, items[i].second.as_tensor());
      st->put(0, items[0].second.as_tensor());
      EXPECT_FALSE(st->finish(root));
    }
    {  // a root other than the one put: another key order
      auto st = StreamedWrite::begin(out, f, entries_of(root));
      for (std::size_t i = 0; i < items.size(); ++i) st->put(i, items[i].second.as_tensor());
      Value other = Value::dict();
      for (std::size_t i = items.size(); i-- > 0;) other.as_dict().set(items[i].first, items[i].second);
      EXPECT_FALSE(st->finish(other));
    }
    {  // never finished
      auto st = StreamedWrite::begin(out, f, entries_of(root));
      for (std::size_t i = 0; i < items.size(); ++i) st->put(i, items[i].second.as_tensor());
    }
    EXPECT_TRUE(s.names().empty());
  }
  EXPECT_FALSE(StreamedWrite::begin(out, Format::kNpz, entries_of(root)));
}

TEST(StreamedWrite, SharedMemoryFlagsAndFormsAreLeftToWriteFile) {
  // What the writers lay out otherwise than a dict of plain tensors each over its own
  // memory: safetensors' whole-checkpoint form, .pt's shared storages and other calls.
  Scratch s;
  auto a = counting(DType::kFloat32, {4}, 3);
  auto g = std::make_shared<Tensor>(*counting(DType::kFloat32, {2}, 1));
  g->requires_grad = true;
  auto p = std::make_shared<Tensor>(*counting(DType::kFloat32, {2}, 1));
  p->is_parameter = true;
  auto empty = counting(DType::kFloat32, {0}, 0);
  auto empty_too = std::make_shared<Tensor>(*empty);
  for (Format f : kFormats) {
    const std::string ext(format_name(f));
    same_or_nothing(dict_of({{"a", a}, {"b", std::make_shared<Tensor>(*a)}}), s.dir / ("shared." + ext), f, false);
    same_or_nothing(dict_of({{"g", g}}), s.dir / ("grad." + ext), f, false);
    same_or_nothing(dict_of({{"p", p}}), s.dir / ("param." + ext), f, false);
  }
  // Two empty tensors over one storage: one record in a .pt; nothing to share in safetensors.
  same_or_nothing(dict_of({{"e", empty}, {"f", empty_too}}), s.dir / "e.pt", Format::kTorchZip, false);
  same_or_nothing(dict_of({{"e", empty}, {"f", empty_too}}), s.dir / "e.safetensors", Format::kSafetensors, true);
}

TEST(StreamedWrite, UnplannableEntriesAndUnwritableDirectoriesFallBackToWriteFile) {
  Scratch s;
  const Value reserved = dict_of({{"__metadata__", counting(DType::kUInt8, {1}, 0)}});
  EXPECT_FALSE(stream(reserved, s.dir / "r.safetensors", Format::kSafetensors));
  EXPECT_EQ(testing::rule_of([&] { write_file(reserved, s.dir / "r.safetensors", Format::kSafetensors); }),
            "safetensors/reserved-name");
  same_or_nothing(reserved, s.dir / "r.pt", Format::kTorchZip, true);   // a fine name in a .pt
  const Value bad = dict_of({{"q", counting(DType::kQInt8, {2}, 0)}});  // a dtype safetensors cannot hold
  EXPECT_FALSE(stream(bad, s.dir / "q.safetensors", Format::kSafetensors));
  for (Format f : kFormats) EXPECT_FALSE(stream(many(3), s.dir / "missing" / "m", f));  // no such directory
  EXPECT_EQ(s.names(), (std::vector<std::string>{"r.pt"}));
}

}  // namespace
}  // namespace tensorseal
