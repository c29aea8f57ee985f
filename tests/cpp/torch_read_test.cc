// Reads every checkpoint tests/fixtures/gen_torch.py (torch 2.x) and gen_torch_t113.py
// (torch 1.13) made with torch.save (zip and legacy) and pickle.dumps, and checks each
// against the manifest torch computed from what torch.load returned: every tensor's
// path, dtype, shape, strides, offset, flags and SHA-256 of its elements, every
// non-tensor leaf, which tensors share a storage, the root's kind, dict order and
// OrderedDict._metadata. Specs: docs/formats/torch-zip.md, docs/formats/torch-legacy.md.
#include <tensorseal/scan.h>

#include <bit>
#include <cinttypes>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "test_manifest.h"
#include "test_util.h"

namespace tensorseal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path dir(const std::string& gen) { return testing::fixture_dir(gen); }

const json* find_file(const json& m, const std::string& name) {
  for (const auto& f : m["files"])
    if (f["file"] == name) return &f;
  return nullptr;
}

const Value* at(const Dict& d, std::string_view key) {
  const Value* v = d.find(key);
  if (!v) ADD_FAILURE() << "no key " << key;
  static const Value none;
  return v ? v : &none;
}

std::string join(const std::string& base, const std::string& part) { return base.empty() ? part : base + "." + part; }

std::string key_text(const Value& k) {
  if (k.is(Value::Kind::kStr)) return std::string(k.as_str());
  if (k.is(Value::Kind::kInt)) return std::to_string(k.as_int());
  return repr(k, 80);
}

using testing::hex_of;

// The non-tensor leaves of plain containers, encoded as gen_torch.py's leaf() does.
void leaves(const Value& v, const std::string& path, json& out) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::kDict:
      for (const auto& [k, x] : v.as_dict().items) leaves(x, join(path, key_text(k)), out);
      return;
    case K::kList:
    case K::kTuple:
      for (std::size_t i = 0; i < v.items().size(); ++i) leaves(v.items()[i], join(path, std::to_string(i)), out);
      return;
    case K::kNone:
      out.push_back({{"path", path}, {"type", "none"}, {"value", nullptr}});
      return;
    case K::kBool:
      out.push_back({{"path", path}, {"type", "bool"}, {"value", v.as_bool()}});
      return;
    case K::kInt:
      out.push_back({{"path", path}, {"type", "int"}, {"value", std::to_string(v.as_int())}});
      return;
    case K::kBigInt:
      out.push_back({{"path", path}, {"type", "int"}, {"value", v.as_bigint().to_decimal()}});
      return;
    case K::kFloat: {
      char buf[17];
      std::snprintf(buf, sizeof buf, "%016" PRIx64, std::bit_cast<std::uint64_t>(v.as_float()));
      out.push_back({{"path", path}, {"type", "float"}, {"value", buf}});
      return;
    }
    case K::kStr:
      out.push_back({{"path", path}, {"type", "str"}, {"value", std::string(v.as_str())}});
      return;
    case K::kBytes:
      out.push_back({{"path", path}, {"type", "bytes"}, {"value", hex_of(v.as_bytes())}});
      return;
    case K::kSet: {
      std::vector<std::string> items;
      for (const auto& x : v.as_set().items) items.push_back(repr(x));
      std::sort(items.begin(), items.end());
      out.push_back({{"path", path}, {"type", "set"}, {"value", items}});
      return;
    }
    default:
      return;  // tensors, storages, globals, opaque objects
  }
}

// Checks one file against its manifest entry.
void check_file(const fs::path& base, const json& f) {
  const std::string file = f["file"];
  SCOPED_TRACE(base.filename().string() + "/" + file);
  Checkpoint c = read_file(base / file);
  EXPECT_EQ(format_name(c.format), f["format"].get<std::string>());

  // Tensors: paths in tree order, then every field torch reported.
  const auto refs = collect_tensors(c.root);
  const auto& want = f["tensors"];
  EXPECT_EQ(refs.size(), want.size());
  std::map<std::string, const Tensor*> by_path;
  for (std::size_t i = 0; i < std::min(refs.size(), want.size()); ++i) {
    const Tensor& t = *refs[i].tensor;
    const json& w = want[i];
    SCOPED_TRACE(w["path"].get<std::string>());
    by_path[refs[i].path] = &t;
    EXPECT_EQ(refs[i].path, w["path"].get<std::string>());
    EXPECT_EQ(name(t.dtype), w["dtype"].get<std::string>());
    EXPECT_EQ(t.shape, w["shape"].get<std::vector<std::int64_t>>());
    if (!w["stride"].is_null()) {  // numpy arrays: torch reports no strides
      EXPECT_EQ(t.strides, w["stride"].get<std::vector<std::int64_t>>());
      EXPECT_EQ(t.storage_offset, w["offset"].get<std::int64_t>());
    }
    EXPECT_EQ(t.requires_grad, w["requires_grad"].get<bool>());
    EXPECT_EQ(t.is_parameter, w["is_parameter"].get<bool>());
    EXPECT_EQ(tensor_sha256(t), w["sha256"].get<std::string>());
    EXPECT_NO_THROW(t.validate());
  }

  // Storage sharing: each group views one Storage object, different groups do not.
  std::set<const Storage*> group_storages;
  for (const auto& group : f["shared"]) {
    const Storage* first = nullptr;
    for (const auto& p : group) {
      auto it = by_path.find(p.get<std::string>());
      ASSERT_NE(it, by_path.end()) << p;
      if (!first) first = it->second->storage.get();
      EXPECT_EQ(it->second->storage.get(), first) << p << " does not view the storage of " << group[0];
    }
    EXPECT_TRUE(group_storages.insert(first).second) << "two groups share one storage";
  }
  std::set<std::string> grouped;
  for (const auto& group : f["shared"])
    for (const auto& p : group) grouped.insert(p.get<std::string>());
  std::map<const Storage*, std::string> loners;
  for (const auto& r : refs) {
    if (grouped.count(r.path) || r.tensor->numel() == 0) continue;
    EXPECT_FALSE(group_storages.count(r.tensor->storage.get())) << r.path << " shares a storage torch did not share";
    auto [it, fresh] = loners.emplace(r.tensor->storage.get(), r.path);
    EXPECT_TRUE(fresh) << r.path << " and " << it->second << " share a storage torch did not share";
  }

  // Non-tensor leaves, in tree order.
  json got = json::array();
  leaves(c.root, "", got);
  json expect = json::array();
  for (const auto& l : f["leaves"]) expect.push_back({{"path", l["path"]}, {"type", l["type"]}, {"value", l["value"]}});
  EXPECT_EQ(got, expect);

  // The root.
  const std::string root = f["root"];
  if (root == "tensor" || root == "parameter") {
    ASSERT_TRUE(c.root.is(Value::Kind::kTensor));
    EXPECT_EQ(c.root.as_tensor()->is_parameter, root == "parameter");
  } else if (root == "storage") {
    ASSERT_TRUE(c.root.is(Value::Kind::kStorage));
    const Storage& s = *c.root.as_storage();
    EXPECT_EQ(name(s.dtype), f["storage"]["dtype"].get<std::string>());
    EXPECT_EQ(s.size(), f["storage"]["nbytes"].get<std::uint64_t>());
    EXPECT_EQ(sha256_hex(s.bytes()), f["storage"]["sha256"].get<std::string>());
  } else if (root == "module") {
    ASSERT_TRUE(c.root.is(Value::Kind::kObject));
    const Object& o = c.root.as_object();
    ASSERT_TRUE(o.callable && o.callable->is(Value::Kind::kGlobal));
    EXPECT_TRUE(o.callable->is_global("__main__", "Net")) << repr(*o.callable);
  } else {
    ASSERT_TRUE(c.root.is(Value::Kind::kDict));
    const Dict& d = c.root.as_dict();
    EXPECT_EQ(d.kind == DictKind::kOrderedDict, f["root_dict"] == "OrderedDict");
    std::vector<std::string> keys;
    for (const auto& [k, v] : d.items) keys.push_back(key_text(k));
    EXPECT_EQ(keys, f["root_keys"].get<std::vector<std::string>>());
    if (f.contains("metadata")) {
      EXPECT_TRUE(d.attrs && d.attrs->find(std::string_view("_metadata")));
      if (d.attrs && d.attrs->find(std::string_view("_metadata"))) {
        const Value& meta = *d.attrs->find(std::string_view("_metadata"));
        ASSERT_TRUE(meta.is(Value::Kind::kDict));
        std::vector<std::string> mk;
        for (const auto& [k, v] : meta.as_dict().items) mk.push_back(key_text(k));
        std::vector<std::string> want_keys;
        for (const auto& [k, v] : f["metadata"].items()) want_keys.push_back(k);
        std::sort(mk.begin(), mk.end());
        EXPECT_EQ(mk, want_keys);  // json objects iterate sorted
        for (const auto& [k, v] : f["metadata"].items()) {
          const Value* entry = meta.as_dict().find(std::string_view(k));
          ASSERT_TRUE(entry && entry->is(Value::Kind::kDict)) << k;
          const Value* version = entry->as_dict().find(std::string_view("version"));
          ASSERT_TRUE(version) << k;
          EXPECT_EQ(version->as_int(), v["version"].get<std::int64_t>()) << k;
        }
      }
    } else {
      EXPECT_FALSE(d.attrs && d.attrs->find(std::string_view("_metadata")));
    }
  }
}

void check_all(const std::string& gen, std::size_t min_files) {
  const json m = testing::fixture_manifest(gen);
  ASSERT_TRUE(m.contains("files")) << "run tests/fixtures/" << gen << ".py (ctest does it)";
  EXPECT_GE(m["files"].size(), min_files);
  for (const auto& f : m["files"]) check_file(dir(gen), f);
}

TEST(TorchRead, Torch2FilesMatchTorch) { check_all("gen_torch", 37); }
TEST(TorchRead, Torch113FilesMatchTorch) { check_all("gen_torch_t113", 34); }

// Every case is written three ways; all three (and torch 1.13's files of the cases
// whose content does not depend on the torch version) hash alike.
TEST(TorchRead, ContentHashEqualAcrossContainersAndTorchVersions) {
  std::map<std::string, std::map<std::string, std::string>> by_group;  // group -> file -> hash
  for (const std::string gen : {"gen_torch", "gen_torch_t113"}) {
    const json m = testing::fixture_manifest(gen);
    ASSERT_TRUE(m.contains("files"));
    for (const auto& f : m["files"])
      by_group[f["group"]][gen + "/" + f["file"].get<std::string>()] =
          content_hash(read_file(dir(gen) / f["file"].get<std::string>()).root);
  }
  // Cases whose content differs between torch versions by design: the dtype set
  // (1.13 lacks uint16/32/64 and float8), nn.Module attributes (2.x added hooks
  // dicts) and Adam's param_groups (2.x added keys such as 'decoupled_weight_decay').
  const std::set<std::string> per_version = {"dtypes", "model", "optim"};
  std::size_t compared = 0;
  for (const auto& [group, files] : by_group) {
    std::map<std::string, std::string> first_by_version;
    for (const auto& [file, hash] : files) {
      const std::string version = file.substr(0, file.find('/'));
      const std::string key = per_version.count(group) ? version : "";
      auto [it, fresh] = first_by_version.emplace(key, hash);
      if (!fresh) {
        EXPECT_EQ(hash, it->second) << group << ": " << file;
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 40u);
  ASSERT_TRUE(by_group.count("state_dict"));
  EXPECT_EQ(by_group["state_dict"].size(), 6u);  // zip, legacy, pickle x two torch versions
}

// Tied weights: a state_dict of a model with tied parameters holds two tensors over
// one storage; torch writes it once; tensorseal reads it once and both tensors view
// that one Storage (in every torch version and both torch.save formats).
TEST(TorchRead, TiedWeightsViewOneStorage) {
  for (const std::string gen : {"gen_torch", "gen_torch_t113"})
    for (const std::string file : {"tied.pt", "tied.legacy.pt"}) {
      SCOPED_TRACE(gen + "/" + file);
      Checkpoint c = read_file(dir(gen) / file);
      const Dict& d = c.root.as_dict();
      const auto& a = at(d, "embed.weight")->as_tensor();
      const auto& b = at(d, "head.weight")->as_tensor();
      const auto& row = at(d, "row")->as_tensor();
      EXPECT_NE(a.get(), b.get());                    // two tensors...
      EXPECT_EQ(a->storage.get(), b->storage.get());  // ...one storage
      EXPECT_EQ(row->storage.get(), a->storage.get());
      EXPECT_EQ(row->storage_offset, 8);                                 // embed.weight[2] of a 5x4 matrix
      EXPECT_EQ(at(d, "again")->node(), at(d, "embed.weight")->node());  // same object twice
      std::size_t keys = 0;
      for (const auto& f : c.facts) keys += f.topic == "storage.key";
      EXPECT_EQ(keys, 2u);  // tied storage + "own"
    }
}

// Zip storages are zero-copy windows of the mapped file, 64-byte aligned as torch
// writes them; views keep torch's offsets and strides (stride 0 from expand included).
TEST(TorchRead, ZipViewsAreWindowsOfTheMappedFile) {
  Checkpoint c = read_file(dir("gen_torch") / "views.pt");
  const Dict& d = c.root.as_dict();
  const auto& big = *at(d, "big")->as_tensor();
  ASSERT_TRUE(big.storage->is_mapped());
  EXPECT_EQ(big.storage->file_offset() % 64, 0u);
  EXPECT_EQ(big.storage->size(), 400u);
  const auto& slice = *at(d, "slice")->as_tensor();
  EXPECT_EQ(slice.storage.get(), big.storage.get());
  EXPECT_EQ(slice.storage_offset, 10);
  const auto& t = *at(d, "t")->as_tensor();
  EXPECT_EQ(t.strides, (std::vector<std::int64_t>{1, 10}));
  EXPECT_FALSE(t.is_contiguous());
  const auto& e = *at(d, "expand")->as_tensor();
  EXPECT_EQ(e.strides, (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(e.storage->size(), 12u);  // 3 floats serve 12 elements
  // The slice's digest covers its 10 elements only, not the 100 of the storage.
  std::vector<std::byte> scratch;
  EXPECT_EQ(slice.contiguous_bytes(scratch).size(), 40u);
  EXPECT_NE(tensor_sha256(slice), sha256_hex(big.storage->bytes()));
  EXPECT_EQ(tensor_sha256(big), sha256_hex(big.storage->bytes()));
}

// A whole nn.Module saved with torch.save(model): the user's class stays an opaque
// object (never imported), its parameters are found at their state_dict paths, and
// scan calls the file unknown because of __main__.Net.
TEST(TorchRead, FullModelKeepsUserClassesOpaque) {
  for (const std::string gen : {"gen_torch", "gen_torch_t113"})
    for (const std::string file : {"model.pt", "model.legacy.pt", "model.pkl"}) {
      SCOPED_TRACE(gen + "/" + file);
      Checkpoint c = read_file(dir(gen) / file);
      std::set<std::string> paths;
      for (const auto& r : collect_tensors(c.root)) paths.insert(r.path);
      for (const char* p : {"embed.weight", "block.fc1.weight", "block.norm.running_var", "steps"})
        EXPECT_TRUE(paths.count(p)) << p;
      ScanReport r = scan(c);
      EXPECT_EQ(r.verdict, Verdict::kUnknown);
      bool net = false;
      for (const auto& g : r.findings)
        net |= g.module == "__main__" && g.name == "Net" && g.verdict == Verdict::kUnknown;
      EXPECT_TRUE(net);
    }
}

// Container facts `explain` compares: zip prefix (the file's stem), record order,
// storage keys ("0", "1"... in zip; addresses in legacy files), sys_info, nested files.
TEST(TorchRead, FactsForExplain) {
  auto fact = [](const Checkpoint& c, const std::string& topic) {
    for (const auto& f : c.facts)
      if (f.topic == topic) return f.value;
    return std::string("(none)");
  };
  Checkpoint z = read_file(dir("gen_torch") / "views.pt");
  EXPECT_EQ(fact(z, "zip.prefix"), "views");
  EXPECT_EQ(fact(z, "torch.file_version"), "3");
  EXPECT_EQ(fact(z, "torch.byteorder"), "little");
  EXPECT_EQ(fact(z, "storage.key"), "0");
  EXPECT_EQ(fact(z, "zip.zip64"), "present");
  EXPECT_EQ(fact(z, "pickle.protocol"), "2");
  EXPECT_NE(fact(z, "zip.records").find("data.pkl"), std::string::npos);
  Checkpoint z113 = read_file(dir("gen_torch_t113") / "views.pt");
  EXPECT_EQ(fact(z113, "torch.byteorder"), "(no record)");  // torch 1.13 writes none
  Checkpoint l = read_file(dir("gen_torch") / "views.legacy.pt");
  EXPECT_NE(fact(l, "torch.sys_info").find("little_endian"), std::string::npos);
  EXPECT_GT(fact(l, "storage.key").size(), 6u);  // a memory address
  Checkpoint p = read_file(dir("gen_torch") / "tensor.pkl");
  EXPECT_NE(fact(p, "pickle.nested_file"), "(none)");
}

// numpy arrays pickled inside a torch file (weights_only=False territory) become
// tensors: big-endian data is converted, Fortran order keeps column-major strides.
TEST(TorchRead, NumpyArraysInsidePickles) {
  for (const std::string gen : {"gen_torch", "gen_torch_t113"}) {
    SCOPED_TRACE(gen);
    Checkpoint c = read_file(dir(gen) / "numpy.pt");
    const Dict& d = c.root.as_dict();
    const auto& be = *at(d, "be_f8")->as_tensor();
    EXPECT_EQ(be.dtype, DType::kFloat64);
    std::vector<std::byte> scratch;
    auto b = be.contiguous_bytes(scratch);
    double first;
    std::memcpy(&first, b.data(), 8);
    EXPECT_EQ(first, 1.5);
    const auto& fo = *at(d, "fortran")->as_tensor();
    EXPECT_EQ(fo.strides, (std::vector<std::int64_t>{1, 2}));
    EXPECT_EQ(at(d, "scalar")->as_tensor()->shape.size(), 0u);
    bool numpy_global = false;
    for (const auto& g : c.globals) numpy_global |= g.name == "_reconstruct";
    EXPECT_TRUE(numpy_global);
  }
}

// A dtype table check: torch 2.x's dtypes fixture covers every dtype torch can save,
// including bfloat16, the float8 family, uint16/32/64, complex32 and bits*.
TEST(TorchRead, Torch2DtypesCoverEverySavableDtype) {
  const json m = testing::fixture_manifest("gen_torch");
  const json* f = find_file(m, "dtypes.pt");
  ASSERT_TRUE(f);
  std::set<std::string> names;
  for (const auto& t : (*f)["tensors"]) names.insert(t["dtype"]);
  for (const char* n : {"bool", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                        "float8_e8m0fnu", "uint16", "uint32", "uint64", "complex32", "complex64", "complex128"})
    EXPECT_TRUE(names.count(n)) << n;
}

}  // namespace
}  // namespace tensorseal
