// inspect and scan reports and their JSON (one vocabulary: struct field = JSON key,
// every key always present), require_safe, and the Limits table behind the CLI flags
// and the Python keywords.
#include <nlohmann/json.hpp>

#include "tensorseal/tensorseal.h"
#include "test_util.h"

namespace tensorseal {
namespace {

using ojson = nlohmann::ordered_json;

std::vector<std::string> keys(const ojson& j) {
  std::vector<std::string> out;
  for (const auto& [k, v] : j.items()) out.push_back(k);
  return out;
}

TEST(Inspect, ReportHoldsEveryTensor) {
  const Checkpoint c = read_file(testing::tools_fixture("base.safetensors"));
  const InspectReport r = inspect(c);
  EXPECT_EQ(r.file, testing::tools_fixture("base.safetensors").string());
  EXPECT_EQ(r.format, Format::kSafetensors);
  EXPECT_EQ(r.content_hash, content_hash(c.root));
  const auto tensors = collect_tensors(c.root);
  ASSERT_EQ(r.tensors.size(), tensors.size());
  ASSERT_EQ(r.tensors.size(), 6u);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i].tensor;
    EXPECT_EQ(r.tensors[i].path, tensors[i].path);
    EXPECT_EQ(r.tensors[i].dtype, t.dtype);
    EXPECT_EQ(r.tensors[i].shape, t.shape);
    EXPECT_EQ(r.tensors[i].nbytes, t.nbytes());
    EXPECT_EQ(r.tensors[i].sha256, tensor_sha256(t));
  }
  EXPECT_EQ(r.metadata, c.metadata);
  InspectOptions one_thread;
  one_thread.threads = 1;
  EXPECT_EQ(to_json(inspect(c, one_thread)), to_json(r));
}

TEST(Inspect, JsonKeysAreTheStructFields) {
  const InspectReport r = inspect_file(testing::tools_fixture("base.safetensors"));
  const ojson j = ojson::parse(to_json(r));
  EXPECT_EQ(keys(j), (std::vector<std::string>{"file", "format", "content_hash", "tensors", "metadata"}));
  EXPECT_EQ(j["file"], r.file);
  EXPECT_EQ(j["format"], "safetensors");
  EXPECT_EQ(j["content_hash"], r.content_hash);
  ASSERT_EQ(j["tensors"].size(), r.tensors.size());
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {
    const auto& t = j["tensors"][i];
    EXPECT_EQ(keys(t), (std::vector<std::string>{"path", "dtype", "shape", "nbytes", "sha256", "alias_of", "type",
                                                 "quantization", "attributes", "layout", "parts"}));
    EXPECT_EQ(t["layout"], r.tensors[i].layout);
    EXPECT_TRUE(t["parts"].is_null());
    EXPECT_EQ(t["path"], r.tensors[i].path);
    EXPECT_EQ(t["dtype"], std::string(name(r.tensors[i].dtype)));
    EXPECT_EQ(t["shape"].get<std::vector<std::int64_t>>(), r.tensors[i].shape);
    EXPECT_EQ(t["nbytes"].get<std::uint64_t>(), r.tensors[i].nbytes);
    EXPECT_EQ(t["sha256"], r.tensors[i].sha256);
    EXPECT_EQ(t["alias_of"].is_null(), r.tensors[i].alias_of.empty());
  }
}

TEST(Inspect, MetadataIsAlwaysAnObject) {
  InspectReport r;
  r.file = "x.pt";
  r.format = Format::kTorchZip;
  ojson j = ojson::parse(to_json(r));
  EXPECT_TRUE(j["metadata"].is_object() && j["metadata"].empty()) << j.dump();
  EXPECT_TRUE(j["tensors"].is_array() && j["tensors"].empty());
  r.metadata = {{"format", "pt"}, {"b", "2"}};
  j = ojson::parse(to_json(r));
  EXPECT_EQ(keys(j["metadata"]), (std::vector<std::string>{"format", "b"}));
  EXPECT_EQ(j["metadata"]["format"], "pt");
}

TEST(Inspect, FileReadsWithTheGivenLimits) {
  InspectOptions o;
  o.read.limits.max_entries = 5;  // the fixture holds 6 tensors
  EXPECT_EQ(testing::rule_of([&] { (void)inspect_file(testing::tools_fixture("base.safetensors"), o); }),
            "safetensors/too-many-tensors");
  o.read.limits.max_entries = 6;
  EXPECT_EQ(inspect_file(testing::tools_fixture("base.safetensors"), o).tensors.size(), 6u);
}

ScanReport sample_scan() {
  ScanReport r;
  r.file = "f.pt";
  r.format = Format::kTorchZip;
  r.verdict = Verdict::kDangerous;
  r.findings.push_back({"torch._utils", "_rebuild_tensor_v2", Verdict::kSafe, 3, "data.pkl @ 10", "allowed"});
  r.findings.push_back({"__main__", "Net", Verdict::kUnknown, 1, "data.pkl @ 40", "not on the safe list"});
  r.findings.push_back({"posix", "system", Verdict::kDangerous, 2, "data.pkl @ 70", "runs commands"});
  return r;
}

TEST(Scan, JsonKeysAreTheStructFields) {
  const ScanReport r = sample_scan();
  const ojson j = ojson::parse(to_json(r));
  EXPECT_EQ(keys(j),
            (std::vector<std::string>{"file", "format", "verdict", "findings", "interpretations", "incomplete"}));
  EXPECT_EQ(j["file"], "f.pt");
  EXPECT_EQ(j["format"], "torch-zip");
  EXPECT_EQ(j["verdict"], "dangerous");
  ASSERT_EQ(j["findings"].size(), 3u);
  const auto& f = j["findings"][2];
  EXPECT_EQ(keys(f), (std::vector<std::string>{"module", "name", "verdict", "count", "where", "reason"}));
  EXPECT_EQ(f["module"], "posix");
  EXPECT_EQ(f["name"], "system");
  EXPECT_EQ(f["verdict"], "dangerous");
  EXPECT_EQ(f["count"], 2);
  EXPECT_EQ(f["where"], "data.pkl @ 70");
  EXPECT_EQ(f["reason"], "runs commands");
  EXPECT_EQ(j["findings"][1]["verdict"], "unknown");
}

TEST(Scan, RequireSafeNamesTheFirstFindingOutsideTheSafeSet) {
  ScanReport r = sample_scan();
  try {
    require_safe(r);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.rule(), "scan/unknown-global");
    EXPECT_EQ(e.kind(), ErrorKind::kUnsafe);
    EXPECT_EQ(std::string(e.what()),
              "f.pt: [scan/unknown-global] weights_only load refused 2 global(s) outside the safe set: "
              "__main__.Net (unknown), posix.system (dangerous); first at data.pkl @ 40");
  }
  std::swap(r.findings[1], r.findings[2]);
  EXPECT_EQ(testing::rule_of([&] { require_safe(r); }), "scan/dangerous-global");
  r.findings.resize(1);
  EXPECT_NO_THROW(require_safe(r));
}

TEST(Limits, EveryFieldByName) {
  const auto names = limit_names();
  ASSERT_EQ(names.size(), 15u);
  EXPECT_EQ(names.front(), "max_safetensors_header");
  EXPECT_EQ(names.back(), "max_expanded_bytes");
  const Limits defaults;
  EXPECT_EQ(get_limit(defaults, "max_alloc"), defaults.max_alloc);
  EXPECT_EQ(get_limit(defaults, "max_depth"), defaults.max_depth);
  for (const auto n : names) {
    Limits l;
    set_limit(l, n, 7);
    EXPECT_EQ(get_limit(l, n), 7u) << n;
    for (const auto other : names)
      if (other != n) EXPECT_EQ(get_limit(l, other), get_limit(defaults, other)) << n << " changed " << other;
  }
}

TEST(Limits, RefusesUnknownNamesAndValuesTooLarge) {
  Limits l;
  EXPECT_EQ(testing::rule_of([&] { set_limit(l, "max_bogus", 1); }), "api/invalid-argument");
  EXPECT_EQ(testing::rule_of([&] { (void)get_limit(l, "max-alloc"); }), "api/invalid-argument");
  EXPECT_EQ(testing::rule_of([&] { set_limit(l, "max_ndim", 1ull << 32); }), "api/invalid-argument");
  EXPECT_EQ(l.max_ndim, Limits{}.max_ndim);
  set_limit(l, "max_alloc", ~0ull);
  EXPECT_EQ(l.max_alloc, ~0ull);
}

TEST(Limits, HashFileReadsWithThem) {
  HashOptions o;
  o.read.limits.max_entries = 5;
  EXPECT_EQ(testing::rule_of([&] { (void)hash_file(testing::tools_fixture("base.safetensors"), o); }),
            "safetensors/too-many-tensors");
  EXPECT_EQ(hash_file(testing::tools_fixture("base.safetensors")),
            content_hash(read_file(testing::tools_fixture("base.safetensors")).root));
}

}  // namespace
}  // namespace tensorseal
