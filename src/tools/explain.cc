// `explain`: the sources of byte difference between two checkpoints, from their facts.
#include "tensorseal/explain.h"

#include <cstring>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "tensorseal/diff.h"
#include "tensorseal/hash.h"
#include "tools/json.h"

namespace tensorseal {
namespace {

struct TopicText {
  std::string_view topic, sentence;
};

// Known fact topics (emitted by the readers) and what they mean for the bytes.
constexpr TopicText kTopics[] = {
    {"format", "the container format differs (the same content can be stored as torch zip, legacy torch, "
               "pickle, safetensors or numpy files)"},
    {"metadata", "user metadata stored beside the content (safetensors __metadata__) differs; it is not content"},
    {"order.tensors", "the tensors are stored in a different order; order is not content"},
    {"data", "the content differs: some tensors or values are not the same (see `tseal diff`)"},
    {"zip.prefix", "the folder name inside the zip archive differs; torch.save takes it from the file name, so "
                   "saving the same tensors as a.pt and b.pt gives different bytes"},
    {"zip.timestamps", "the zip entries carry different modification times"},
    {"zip.extra_fields", "the zip entries carry different extra fields (torch's alignment padding or tool-added "
                         "metadata)"},
    {"zip.create_system", "the zip directory records a different 'made by' operating system"},
    {"zip.serialization_id", "torch's .data/serialization_id differs; it hashes record names in hash-set order, "
                             "which varies between platforms and builds"},
    {"zip.crc_present", "the zip entries differ in whether they carry CRC32 checksums (data descriptors)"},
    {"zip.compression", "the zip entries are compressed differently"},
    {"zip.entry_order", "the zip entries are stored in a different order"},
    {"storage.key", "a storage's key differs; legacy torch files and pickles name storages by their memory "
                    "address, which changes on every run"},
    {"storage.slack", "a view was saved together with its whole storage: bytes outside the tensor's view are "
                      "stored too"},
    {"storage.sharing", "tensors share storages differently (tied weights, views)"},
    {"storage.location", "a storage was saved from a different device (cpu, cuda:0, ...)"},
    {"pickle.protocol", "the pickle protocol version differs"},
    {"pickle.memo", "the pickle memo is used differently (MEMOIZE/BINPUT numbering, repeated objects)"},
    {"pickle.opcodes", "the pickle uses different opcodes for the same values"},
    {"pickle.framing", "the pickle frames its data differently (protocol 4+ FRAME opcodes)"},
    {"safetensors.key_order", "the tensors are listed in a different order in the safetensors header"},
    {"safetensors.metadata_order", "the __metadata__ keys are in a different order; safetensors writes them "
                                   "from a hash map, so the order changes between runs"},
    {"safetensors.header_padding", "the safetensors header is padded with a different number of spaces"},
    {"safetensors.header_length", "the safetensors header has a different length"},
    {"pickle.frames", "the pickle is cut into a different number of FRAMEs (protocol 4+)"},
    {"pickle.nested_file", "a pickle embeds a whole torch file (torch.storage._load_from_bytes) of a different "
                           "size"},
    {"zip.records", "the archive holds different records, or the same records in a different order"},
    {"zip.member_order", "the archive lists its members in a different order"},
    {"zip.data_descriptors", "the zip entries differ in whether a data descriptor follows their data"},
    {"zip.zip64", "the archive differs in whether it has zip64 end records (torch always writes them)"},
    {"zip.zip64_end_records", "the archive differs in whether it has zip64 end records"},
    {"zip.unaccounted_bytes", "the archive holds bytes that belong to no entry (prepended data, gaps)"},
    {"torch.version", "the files were written by different torch versions or format versions"},
    {"torch.file_version", "the torch archive's format version record (version, .data/version) differs"},
    {"torch.record", "a torch archive metadata record (.format_version, .storage_alignment) differs"},
    {"torch.byteorder", "the files record a different byte order"},
    {"torch.sys_info", "the legacy torch header records different system info (type sizes, endianness)"},
    {"safetensors.structure", "the safetensors file stores the checkpoint's structure in its metadata differently"},
    {"npy.header", "the numpy header differs (version, padding or field order)"},
    {"npy.version", "the .npy format version differs (1.0, 2.0, 3.0)"},
    {"npy.header_padding", "the .npy header is padded differently"},
    {"npy.fortran_order", "the array is stored in a different memory order (C vs Fortran)"},
    {"npy.byte_order", "the array is stored in a different byte order"},
};

constexpr std::string_view kGeneric = "the files differ in this container property";

std::string join_paths(const std::vector<std::string>& v, std::size_t max = 8) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < max; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max) s += ", ... (" + std::to_string(v.size()) + " in all)";
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
    if (fa.value != fb.value) r.differences.push_back({fa.topic, fa.where, fa.value, fb.value, explain_topic(fa.topic)});
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
  for (const auto& [k, v] : ma) {
    auto it = mb.find(k);
    if (it == mb.end()) r.differences.push_back({"metadata", k, v, std::nullopt, explain_topic("metadata")});
    else if (it->second != v) r.differences.push_back({"metadata", k, v, it->second, explain_topic("metadata")});
  }
  for (const auto& [k, v] : mb)
    if (!ma.count(k)) r.differences.push_back({"metadata", k, std::nullopt, v, explain_topic("metadata")});
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
  r.differences.push_back({"order.tensors", "tensor #" + std::to_string(i), join_paths(oa), join_paths(ob),
                           explain_topic("order.tensors")});
}

}  // namespace

std::string explain_topic(std::string_view topic) {
  for (const auto& t : kTopics)
    if (t.topic == topic) return std::string(t.sentence);
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
    r.differences.push_back({"format", "file", std::string(format_name(a.format)), std::string(format_name(b.format)),
                             explain_topic("format")});
  compare_facts(a, b, r);
  compare_metadata(a, b, r);
  compare_order(a, b, r);
  if (!r.same_content) {
    const DiffReport d = diff(a, b);
    r.differing_tensors = d.differing_tensors();
    std::string what = std::to_string(d.differing_tensors()) + " of " + std::to_string(d.total_tensors()) +
                       " tensors differ";
    if (!d.values.empty()) what += ", " + std::to_string(d.values.size()) + " other values differ";
    r.differences.push_back({"data", "content", r.content_hash_a, r.content_hash_b,
                             explain_topic("data") + ": " + what});
  }
  return r;
}

std::string to_json(const ExplainReport& r) {
  using tools::ojson;
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
  j["content_hash_a"] = tools::or_null_if_empty(r.content_hash_a);
  j["content_hash_b"] = tools::or_null_if_empty(r.content_hash_b);
  j["differing_tensors"] = r.differing_tensors;
  ojson d = ojson::array();
  for (const auto& x : r.differences)
    d.push_back({{"topic", x.topic}, {"where", x.where}, {"a", tools::or_null(x.a)}, {"b", tools::or_null(x.b)}, {"explanation", x.explanation}});
  j["differences"] = std::move(d);
  return tools::dump(j);
}

}  // namespace tensorseal
