// `explain`: the sources of byte difference between two checkpoints, from their facts.
#include "tensorseal/explain.h"

#include <fmt/format.h>

#include <cstring>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "api/formats.h"
#include "tensorseal/diff.h"
#include "tensorseal/hash.h"
#include "tools/explain_topics.h"
#include "tools/json.h"

namespace tensorseal {
namespace {

using detail::core::Topic;

// Topics of explain's own comparisons (the rest are facts from the readers).
constexpr Topic kFormat{"format",
                        "the container format differs (the same content can be stored as torch zip, "
                        "legacy torch, pickle, safetensors or numpy files)"};
constexpr Topic kMetadata{
    "metadata", "user metadata stored beside the content (safetensors __metadata__) differs; it is not content"};
constexpr Topic kOrderTensors{"order.tensors", "the tensors are stored in a different order; order is not content"};
constexpr Topic kData{"data", "the content differs: some tensors or values are not the same (see `tseal diff`)"};
constexpr Topic kOwnTopics[] = {kFormat, kMetadata, kOrderTensors, kData};

constexpr std::string_view kGeneric = "the files differ in this container property";

std::string join_paths(const std::vector<std::string>& v, std::size_t max = 8) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < max; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max) s += fmt::format(", ... ({} in all)", v.size());
  return s;
}

void compare_bytes(const Checkpoint& a, const Checkpoint& b, ExplainReport& r) {
  if (!a.mapping || !b.mapping) return;
  const auto x = a.mapping->bytes(), y = b.mapping->bytes();
  r.bytes_compared = true;
  r.size_a = x.size();
  r.size_b = y.size();
  const std::size_t n = std::min(x.size(), y.size());
  constexpr std::size_t kBlock = 1 << 16;
  std::uint64_t diffs = 0;
  for (std::size_t off = 0; off < n; off += kBlock) {
    const std::size_t len = std::min(kBlock, n - off);
    if (std::memcmp(x.data() + off, y.data() + off, len) == 0) continue;
    for (std::size_t i = off; i < off + len; ++i)
      if (x[i] != y[i]) {
        if (!r.first_differing_byte) r.first_differing_byte = i;
        ++diffs;
      }
  }
  if (x.size() != y.size()) {
    if (!r.first_differing_byte) r.first_differing_byte = n;
    diffs += std::max(x.size(), y.size()) - n;
  }
  r.differing_bytes = diffs;
  r.bytes_identical = diffs == 0;
}

// The sentence for a fact only `has` records; across formats, say that this is why.
std::string one_sided(const std::string& topic, const Checkpoint& has, const Checkpoint& lacks) {
  std::string s = explain_topic(topic);
  if (has.format != lacks.format)
    s += " (only the " + std::string(format_name(has.format)) + " file has this property)";
  return s;
}

void compare_facts(const Checkpoint& a, const Checkpoint& b, ExplainReport& r) {
  auto key = [](const Fact& f) { return f.topic + '\0' + f.where; };
  std::unordered_map<std::string, std::deque<std::size_t>> in_b;
  for (std::size_t i = 0; i < b.facts.size(); ++i) in_b[key(b.facts[i])].push_back(i);
  std::vector<bool> used(b.facts.size(), false);
  for (const Fact& fa : a.facts) {
    auto it = in_b.find(key(fa));
    if (it == in_b.end() || it->second.empty()) {
      r.differences.push_back({fa.topic, fa.where, fa.value, std::nullopt, one_sided(fa.topic, a, b)});
      continue;
    }
    const Fact& fb = b.facts[it->second.front()];
    used[it->second.front()] = true;
    it->second.pop_front();
    if (fa.value != fb.value)
      r.differences.push_back({fa.topic, fa.where, fa.value, fb.value, explain_topic(fa.topic)});
  }
  for (std::size_t i = 0; i < b.facts.size(); ++i)
    if (!used[i]) {
      const Fact& fb = b.facts[i];
      r.differences.push_back({fb.topic, fb.where, std::nullopt, fb.value, one_sided(fb.topic, b, a)});
    }
}

void compare_metadata(const Checkpoint& a, const Checkpoint& b, ExplainReport& r) {
  std::map<std::string, std::string> ma(a.metadata.begin(), a.metadata.end());
  std::map<std::string, std::string> mb(b.metadata.begin(), b.metadata.end());
  auto differ = [&](const std::string& key, std::optional<std::string> x, std::optional<std::string> y) {
    r.differences.push_back(
        {std::string(kMetadata.id), key, std::move(x), std::move(y), std::string(kMetadata.sentence)});
  };
  for (const auto& [k, v] : ma) {
    auto it = mb.find(k);
    if (it == mb.end())
      differ(k, v, std::nullopt);
    else if (it->second != v)
      differ(k, v, it->second);
  }
  for (const auto& [k, v] : mb)
    if (!ma.count(k)) differ(k, std::nullopt, v);
}

// Order of the tensors both files hold (collect_tensors order), restricted to the
// common paths so that added/removed tensors do not count as reordering.
void compare_order(const Checkpoint& a, const Checkpoint& b, ExplainReport& r) {
  const auto ta = collect_tensors(a.root), tb = collect_tensors(b.root);
  std::unordered_set<std::string> pa, pb;
  for (const auto& t : ta) pa.insert(t.path);
  for (const auto& t : tb) pb.insert(t.path);
  std::vector<std::string> oa, ob;
  for (const auto& t : ta)
    if (pb.count(t.path)) oa.push_back(t.path);
  for (const auto& t : tb)
    if (pa.count(t.path)) ob.push_back(t.path);
  if (oa == ob) return;
  std::size_t i = 0;
  while (i < oa.size() && i < ob.size() && oa[i] == ob[i]) ++i;
  r.differences.push_back({std::string(kOrderTensors.id), fmt::format("tensor #{}", i), join_paths(oa), join_paths(ob),
                           std::string(kOrderTensors.sentence)});
}

}  // namespace

std::span<const Topic> detail::tools::own_topics() { return kOwnTopics; }

std::span<const Topic> detail::tools::known_topics() {
  static const std::vector<Topic> all = [] {
    std::vector<Topic> v(std::begin(kOwnTopics), std::end(kOwnTopics));
    std::unordered_set<std::string_view> seen;
    for (const Topic& t : v) seen.insert(t.id);
    for (const auto& row : detail::api::rows())
      for (const auto& table : row.topics)
        for (const Topic& t : table)
          if (seen.insert(t.id).second) v.push_back(t);
    return v;
  }();
  return all;
}

std::string explain_topic(std::string_view topic) {
  for (const auto& t : detail::tools::known_topics())
    if (t.id == topic) return std::string(t.sentence);
  return std::string(kGeneric);
}

ExplainReport explain(const Checkpoint& a, const Checkpoint& b) {
  ExplainReport r;
  r.file_a = a.file;
  r.file_b = b.file;
  compare_bytes(a, b, r);
  if (r.bytes_identical) {
    r.same_content = true;
    return r;
  }
  r.content_hash_a = content_hash(a.root);
  r.content_hash_b = content_hash(b.root);
  r.same_content = r.content_hash_a == r.content_hash_b;
  if (a.format != b.format)
    r.differences.push_back({std::string(kFormat.id), "file", std::string(format_name(a.format)),
                             std::string(format_name(b.format)), std::string(kFormat.sentence)});
  compare_facts(a, b, r);
  compare_metadata(a, b, r);
  compare_order(a, b, r);
  if (!r.same_content) {
    const DiffReport d = diff(a, b);
    r.differing_tensors = d.differing_tensors();
    std::string what = fmt::format("{} of {} tensors differ", d.differing_tensors(), d.total_tensors());
    if (!d.values.empty()) what += fmt::format(", {} other values differ", d.values.size());
    r.differences.push_back({std::string(kData.id), "content", r.content_hash_a, r.content_hash_b,
                             std::string(kData.sentence) + ": " + what});
  }
  return r;
}

std::string to_json(const ExplainReport& r) {
  using detail::tools::ojson;
  ojson j;
  j["file_a"] = r.file_a;
  j["file_b"] = r.file_b;
  j["bytes_compared"] = r.bytes_compared;
  j["bytes_identical"] = r.bytes_identical;
  j["size_a"] = r.size_a;
  j["size_b"] = r.size_b;
  j["differing_bytes"] = r.differing_bytes;
  j["first_differing_byte"] = r.first_differing_byte ? ojson(*r.first_differing_byte) : ojson(nullptr);
  j["same_content"] = r.same_content;
  j["content_hash_a"] = detail::tools::or_null_if_empty(r.content_hash_a);
  j["content_hash_b"] = detail::tools::or_null_if_empty(r.content_hash_b);
  j["differing_tensors"] = r.differing_tensors;
  ojson d = ojson::array();
  for (const auto& x : r.differences)
    d.push_back({{"topic", x.topic},
                 {"where", x.where},
                 {"a", detail::tools::or_null(x.a)},
                 {"b", detail::tools::or_null(x.b)},
                 {"explanation", x.explanation}});
  j["differences"] = std::move(d);
  return detail::tools::dump(j);
}

}  // namespace tensorseal
