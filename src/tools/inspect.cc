// `inspect`: the format, the tensors with their SHA-256 and the content hash of a
// checkpoint, and its JSON rendering.
#include "tensorseal/inspect.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/walk.h"
#include "hash/content_hash.h"
#include "tensorseal/error.h"
#include "tensorseal/hash.h"
#include "tools/json.h"
#include "tools/quantization.h"
#include "torch/composite.h"
#include "util/hex.h"
#include "util/parallel.h"
#include "util/progress.h"

namespace tensorseal {
namespace {

constexpr std::size_t kShortText = 64;  // longer str/bytes values are shown by digest

std::string short_text_digest(std::string_view bytes) {
  return "sha256:" + sha256_hex({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()});
}

// Collects InspectValue for every non-tensor value reached by the path walk: leaves at
// every path they are reached by, containers, objects and storages once (shared nodes
// and cycles are entered once).
class ValueCollector final : public detail::core::Visitor {
 public:
  explicit ValueCollector(std::vector<InspectValue>& out) : out_(out) {}

  bool enter(const Value& v, const std::string& path) override {
    using K = Value::Kind;
    const bool leaf = v.is(K::kStr) || v.is(K::kBytes) || v.is(K::kGlobal);  // listed at every path
    if (const void* n = v.node(); !leaf && n != nullptr && !seen_.insert(n).second) return false;
    switch (v.kind()) {
      case K::kTensor:
        return false;  // InspectReport::tensors
      case K::kList:
      case K::kTuple:
      case K::kDict:
      case K::kSet:
        return true;
      case K::kObject: {
        const Object& o = v.as_object();
        if (detail::torch::composite_of(o)) return false;  // a sparse/nested tensor: in tensors
        const bool named = o.callable && o.callable->is(K::kGlobal);
        out_.push_back({path, "object " + (named ? o.callable->as_global().module + "." + o.callable->as_global().name
                                                 : std::string("?"))});
        return true;
      }
      case K::kStorage: {
        const Storage& s = *v.as_storage();
        const auto b = s.bytes();
        out_.push_back({path, fmt::format("storage {} {} bytes {}", name(s.dtype), b.size(),
                                          short_text_digest({reinterpret_cast<const char*>(b.data()), b.size()}))});
        return false;
      }
      case K::kStr:
        if (v.as_str().size() > kShortText) {
          out_.push_back({path, fmt::format("str[{}] {}", v.as_str().size(), short_text_digest(v.as_str()))});
          return false;
        }
        break;
      case K::kBytes:
        if (v.as_bytes().size() > kShortText) {
          out_.push_back({path, fmt::format("{}[{}] {}", v.is_bytearray() ? "bytearray" : "bytes", v.as_bytes().size(),
                                            short_text_digest(v.as_bytes()))});
          return false;
        }
        break;
      default:
        break;
    }
    out_.push_back({path, repr(v, 4 * kShortText)});
    return false;
  }

 private:
  std::vector<InspectValue>& out_;
  std::unordered_set<const void*> seen_;
};

// Every path a tensor is reached at, in tree order: a tensor object seen before is an
// alias of its first path; containers and objects are entered once (as collect_tensors
// does, so the first paths are collect_tensors' paths). The rebuild call of a sparse or
// nested tensor (torch/composite.h) is listed as one tensor at its own path.
class TensorPaths final : public detail::core::Visitor {
 public:
  struct Entry {
    std::string path;
    std::shared_ptr<const Tensor> tensor;                       // a tensor, or
    std::shared_ptr<const detail::torch::Composite> composite;  // a composite
    std::size_t first;  // index of the entry that lists it first (itself when first)
  };

  bool enter(const Value& v, const std::string& path) override {
    const void* n = v.node();
    if (v.is(Value::Kind::kTensor)) {
      auto [it, fresh] = first_.emplace(n, out.size());
      out.push_back({path, v.as_tensor(), nullptr, it->second});
      return false;
    }
    if (v.is(Value::Kind::kObject)) {
      if (auto c = detail::torch::composite_of(v.as_object())) {
        auto [it, fresh] = first_.emplace(n, out.size());
        out.push_back({path, nullptr, std::make_shared<const detail::torch::Composite>(std::move(*c)), it->second});
        return false;
      }
    }
    if (n != nullptr && !v.is(Value::Kind::kStr) && !v.is(Value::Kind::kBytes) && !seen_.insert(n).second) return false;
    return true;
  }
  std::vector<Entry> out;
  // After the walk: the maps of what was seen are no longer needed.
  void forget_seen() {
    decltype(first_)().swap(first_);
    decltype(seen_)().swap(seen_);
  }

 private:
  std::unordered_map<const void*, std::size_t> first_;
  std::unordered_set<const void*> seen_;
};

// One line of text: control characters written as \xNN, as repr writes them in
// strings (so a value's repr passes through unchanged).
std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      detail::util::append_hex(out, c);
    } else {
      out += ch;
    }
  }
  return out;
}

std::string path_text(const std::string& path) { return path.empty() ? "(root)" : one_line(path); }

detail::tools::ojson quantization_json(const Quantization* q) {
  if (q == nullptr) return nullptr;
  detail::tools::ojson j{{"scheme", scheme_name(q->scheme)}};
  if (!q->per_channel()) {
    j["scale"] = q->scale;
    j["zero_point"] = q->zero_point;
  } else {
    j["axis"] = q->axis;
    j["scales_dtype"] = name(q->scales->dtype);
    j["scales_sha256"] = tensor_sha256(*q->scales);
    j["zero_points_dtype"] = name(q->zero_points->dtype);
    j["zero_points_sha256"] = tensor_sha256(*q->zero_points);
  }
  return j;
}

detail::tools::ojson parts_json(const std::vector<InspectTensor::Part>& parts) {
  if (parts.empty()) return nullptr;
  detail::tools::ojson j = detail::tools::ojson::array();
  for (const auto& p : parts)
    j.push_back(
        {{"role", p.role}, {"dtype", name(p.dtype)}, {"shape", p.shape}, {"nbytes", p.nbytes}, {"sha256", p.sha256}});
  return j;
}

}  // namespace

InspectReport inspect(const Checkpoint& c, const InspectOptions& options) {
  InspectReport r;
  r.file = c.file;
  r.format = c.format;
  r.metadata = c.metadata;
  // Memory: the content hash runs first, on the tree alone; the report is built after,
  // each path moved into it and each digest written in place (200,000 tensors: no second
  // list of paths or digests beside the report).
  // Progress: the content hash's bytes, then every tensor's bytes for its SHA-256.
  std::uint64_t total = 0;
  if (options.progress) {
    total = detail::hash::content_hash_bytes(c.root);
    TensorPaths count;
    detail::core::walk(c.root, count);
    for (std::size_t i = 0; i < count.out.size(); ++i) {
      const auto& e = count.out[i];
      if (e.first != i) continue;
      if (e.tensor)
        total += e.tensor->nbytes();
      else
        for (const auto& part : e.composite->parts) total += part.second->nbytes();
    }
  }
  detail::util::ProgressMeter meter(&options.progress, total);
  HashOptions h;
  h.threads = options.threads;
  // Tensors the hash reads as streams (inflated .npz members) get their SHA-256 in the
  // same pass: each member is inflated once.
  std::unordered_map<const Tensor*, std::string> streamed;
  r.content_hash = detail::hash::content_hash(c.root, h, meter, streamed);

  // Each tensor (a plain one, or a composite's part) digested once: at its first path.
  struct ToDigest {
    const Tensor* tensor;
    std::string* out;  // inside r.tensors (reserved: never moves)
  };
  std::vector<ToDigest> work;
  std::vector<std::size_t> first_of;  // r.tensors index -> the index listing it first
  {
    TensorPaths paths;
    detail::core::walk(c.root, paths);
    paths.forget_seen();
    r.tensors.reserve(paths.out.size());
    first_of.reserve(paths.out.size());
    for (std::size_t i = 0; i < paths.out.size(); ++i) {
      auto& e = paths.out[i];
      first_of.push_back(e.first);
      std::string alias = e.first == i ? "" : r.tensors[e.first].path;
      if (e.tensor) {
        const Tensor& t = *e.tensor;
        r.tensors.push_back({std::move(e.path), t.dtype, t.shape, t.nbytes(), "", std::move(alias),
                             std::string(python_type_name(t)), t.quantization, t.attributes});
        if (e.first == i) work.push_back({&t, &r.tensors.back().sha256});
        continue;
      }
      const auto& comp = *e.composite;
      InspectTensor it{std::move(e.path), comp.dtype,     comp.shape, 0,      "",
                       std::move(alias),  "torch.Tensor", nullptr,    nullptr};
      it.layout = comp.layout;
      for (const auto& [role, t] : comp.parts) {
        it.nbytes += t->nbytes();
        it.parts.push_back({role, t->dtype, t->shape, t->nbytes(), ""});
      }
      r.tensors.push_back(std::move(it));
      if (e.first == i)
        for (std::size_t k = 0; k < comp.parts.size(); ++k)
          work.push_back({comp.parts[k].second.get(), &r.tensors.back().parts[k].sha256});
    }
  }
  detail::util::parallel_for(work.size(), options.threads, [&](std::size_t i) {
    if (const auto it = streamed.find(work[i].tensor); it != streamed.end()) {
      *work[i].out = it->second;
      meter.add(work[i].tensor->nbytes());
      return;
    }
    *work[i].out = tensor_sha256(*work[i].tensor);
    meter.add(work[i].tensor->nbytes());
  });
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {  // aliases: their first path's digests
    if (first_of[i] == i) continue;
    const InspectTensor& first = r.tensors[first_of[i]];
    r.tensors[i].sha256 = first.sha256;
    for (std::size_t k = 0; k < r.tensors[i].parts.size() && k < first.parts.size(); ++k)
      r.tensors[i].parts[k].sha256 = first.parts[k].sha256;
  }
  meter.finish();
  if (options.values) {
    ValueCollector collect(r.values);
    detail::core::walk(c.root, collect);
  }
  return r;
}

InspectReport inspect_file(const std::filesystem::path& path, const InspectOptions& options) {
  return inspect(read_file(path, options.read), options);
}

std::string to_json(const InspectReport& r) {
  using detail::tools::ojson;
  ojson j;
  j["file"] = r.file;
  j["format"] = format_name(r.format);
  j["content_hash"] = r.content_hash;
  j["tensors"] = ojson::array();
  ojson metadata = ojson::object();
  for (const auto& [k, v] : r.metadata) metadata[k] = v;
  j["metadata"] = std::move(metadata);
  std::string doc = detail::tools::dump(j);
  if (r.tensors.empty()) return doc;
  // The tensors are rendered one at a time and spliced into the document at the depth
  // dump() gives them (elements of a top-level array: 4 more spaces on every line; JSON
  // strings hold no raw newline), so that 200,000 tensors never exist as a JSON tree.
  // Two passes (sizes, then text) let the document be allocated once.
  auto tensor = [&](const InspectTensor& t) {
    std::string one =
        detail::tools::dump(ojson{{"path", t.path},
                                  {"dtype", name(t.dtype)},
                                  {"shape", t.shape},
                                  {"nbytes", t.nbytes},
                                  {"sha256", detail::tools::or_null_if_empty(t.sha256)},
                                  {"alias_of", detail::tools::or_null_if_empty(t.alias_of)},
                                  {"type", t.type},
                                  {"quantization", quantization_json(t.quantization.get())},
                                  {"attributes", t.attributes ? ojson(repr(*t.attributes, 1000)) : ojson(nullptr)},
                                  {"layout", t.layout},
                                  {"parts", parts_json(t.parts)}});
    std::string out = "    ";
    out.reserve(one.size() + 4 * static_cast<std::size_t>(std::count(one.begin(), one.end(), '\n')) + 4);
    for (char ch : one) {
      out += ch;
      if (ch == '\n') out += "    ";
    }
    return out;
  };
  constexpr std::string_view kEmpty = "\n  \"tensors\": [],\n";
  const std::size_t at = doc.find(kEmpty);
  if (at == std::string::npos) throw Error(rules::kInternal, "inspect JSON without its tensors array");
  std::size_t size = doc.size();
  for (const auto& t : r.tensors) size += tensor(t).size() + 2;  // ",\n" or the array's own "\n"
  std::string out;
  out.reserve(size + 8);
  out.append(doc, 0, at);
  out += "\n  \"tensors\": [\n";
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {
    out += tensor(r.tensors[i]);
    out += i + 1 < r.tensors.size() ? ",\n" : "\n";
  }
  out += "  ],\n";
  out.append(doc, at + kEmpty.size());
  return out;
}

std::string to_textconv(const InspectReport& r) {
  std::string out = "format " + std::string(format_name(r.format)) + "\ncontent_hash " + r.content_hash + "\n";
  auto metadata = r.metadata;
  std::stable_sort(metadata.begin(), metadata.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [k, v] : metadata) out += "metadata " + one_line(k) + " = " + one_line(v) + "\n";
  std::vector<std::pair<std::string, std::string>> items;  // (path, line)
  items.reserve(r.tensors.size() + r.values.size());
  for (const auto& t : r.tensors) {
    // numpy objects and quantizers are named; plain tensors and Parameters keep the
    // line they always had (a git diff of an unchanged file stays empty).
    std::string extra;
    if (t.type == "numpy.ndarray" || t.type == "numpy.generic") extra += " " + t.type;
    if (t.quantization) extra += " quantized(" + detail::tools::quantization_line(*t.quantization) + ")";
    if (t.attributes) extra += " attributes" + one_line(repr(*t.attributes, 1000));
    std::string digest = " sha256:" + t.sha256;
    if (!t.parts.empty()) {  // a sparse or nested tensor: its parts' digests
      digest = " " + t.layout + "(";
      for (const auto& p : t.parts)
        digest += (&p == &t.parts.front() ? "" : ", ") + p.role + " " + std::string(name(p.dtype)) + " " +
                  shape_text(p.shape) + " sha256:" + p.sha256;
      digest += ")";
    }
    items.emplace_back(t.path, "tensor " + path_text(t.path) + ": " + std::string(name(t.dtype)) + " " +
                                   shape_text(t.shape) + extra + digest);
  }
  for (const auto& v : r.values) items.emplace_back(v.path, "value " + path_text(v.path) + ": " + one_line(v.text));
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [path, line] : items) out += line + "\n";
  return out;
}

}  // namespace tensorseal
