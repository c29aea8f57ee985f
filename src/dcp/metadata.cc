// .metadata: the restricted VM's value tree, then a typed decoding of the DCP
// dataclasses (grammar: dcp/constants.h). The VM builds each dataclass as an opaque
// Object (NEWOBJ + BUILD with the field dict, or TensorProperties' __getstate__ tuple);
// the reduce hook turns the few value-like constructions into plain values.
#include "dcp/metadata.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>

#include "dcp/constants.h"
#include "dcp/transform.h"
#include "pickle/stdlib.h"
#include "pickle/vm.h"
#include "tensorseal/error.h"
#include "util/checked.h"

namespace tensorseal::detail::dcp {

namespace {

[[noreturn]] void shape_error(const std::string& name, const std::string& what) {
  throw Error(rules::kMetadataShape, what, name);
}

bool allowed(const GlobalRef& g) {
  const std::string full = g.module + "." + g.name;
  if (std::find(dcp::kMetadataGlobals.begin(), dcp::kMetadataGlobals.end(), full) != dcp::kMetadataGlobals.end())
    return true;
  return g.module == "torch" && dtype_from_name(g.name).has_value();
}

// The offset in a GlobalRef's where ("<name> @ 123"), or kNoOffset.
std::uint64_t where_offset(const std::string& where) {
  const auto at = where.rfind("@ ");
  if (at == std::string::npos) return kNoOffset;
  std::uint64_t v = 0;
  for (std::size_t i = at + 2; i < where.size() && where[i] >= '0' && where[i] <= '9'; ++i)
    v = v * 10 + (where[i] - '0');
  return v;
}

bool is_int_tuple(const Value& v) {
  if (!v.is(Value::Kind::kTuple)) return false;
  for (const auto& x : v.items())
    if (!x.is(Value::Kind::kInt)) return false;
  return true;
}

std::optional<Value> reduce(const Object& o) {
  if (o.callable && o.args && o.args->is(Value::Kind::kTuple)) {
    const auto& args = o.args->items();
    const Value& c = *o.callable;
    if (c.is_global("torch", "Size") && args.size() == 1 && is_int_tuple(args[0])) return Value::tuple(args[0].items());
    if (c.is_global("torch.serialization", "_get_layout") && args.size() == 1 && args[0].is(Value::Kind::kStr))
      return Value::str(std::string(args[0].as_str()));
    if ((c.is_global(dcp::kMetadataModule, "_MEM_FORMAT_ENCODING") ||
         c.is_global(dcp::kLegacyPropertiesModule, "MEM_FORMAT_ENCODING")) &&
        args.size() == 1 && args[0].is(Value::Kind::kInt))
      return args[0];
    if ((c.is_global("pathlib", "PosixPath") || c.is_global("pathlib", "WindowsPath"))) {
      std::string s;
      for (const auto& a : args) {
        if (!a.is(Value::Kind::kStr)) return std::nullopt;
        s += (s.empty() || s.back() == '/' ? "" : "/") + std::string(a.as_str());
      }
      return Value::str(std::move(s));
    }
  }
  return pickle::stdlib_reduce(o);
}

// A dataclass instance of `cls`: its BUILD field dict (or, for `tuple_state`, the
// tuple __getstate__ returned).
const Object& instance(const Value& v, std::string_view module, std::string_view cls, const std::string& name) {
  if (!v.is(Value::Kind::kObject) || !v.as_object().callable || !v.as_object().callable->is_global(module, cls))
    shape_error(name, "expected a " + std::string(cls) + ", found " + repr(v, 80));
  return v.as_object();
}

const Value& field(const Object& o, std::string_view key, std::string_view cls, const std::string& name) {
  if (!o.state || !o.state->is(Value::Kind::kDict)) shape_error(name, std::string(cls) + " has no field dict");
  const Value* f = o.state->as_dict().find(key);
  if (f == nullptr) shape_error(name, std::string(cls) + " has no field '" + std::string(key) + "'");
  return *f;
}

const Value* optional_field(const Object& o, std::string_view key) {
  if (!o.state || !o.state->is(Value::Kind::kDict)) return nullptr;
  const Value* f = o.state->as_dict().find(key);
  return f != nullptr && !f->is(Value::Kind::kNone) ? f : nullptr;
}

std::vector<std::int64_t> ints(const Value& v, const char* what, const std::string& name) {
  if (!is_int_tuple(v) && !(v.is(Value::Kind::kList))) shape_error(name, std::string(what) + " is not a tuple of ints");
  std::vector<std::int64_t> out;
  for (const auto& x : v.items()) {
    if (!x.is(Value::Kind::kInt)) shape_error(name, std::string(what) + " is not a tuple of ints");
    out.push_back(x.as_int());
  }
  return out;
}

std::uint64_t non_negative(const Value& v, const char* what, const std::string& name) {
  if (!v.is(Value::Kind::kInt) || v.as_int() < 0) shape_error(name, std::string(what) + " is not a non-negative int");
  return static_cast<std::uint64_t>(v.as_int());
}

std::string text(const Value& v, const char* what, const std::string& name) {
  if (!v.is(Value::Kind::kStr)) shape_error(name, std::string(what) + " is not a str");
  return std::string(v.as_str());
}

// TensorProperties pickles its __getstate__ tuple (dtype, layout, requires_grad,
// memory_format, pin_memory); older writers pickled the dataclass field dict.
void properties_of(const Object& props, Entry& e, const std::string& name) {
  const bool tuple = props.state && props.state->is(Value::Kind::kTuple) && !props.state->items().empty();
  const Value* dt = tuple ? &props.state->items()[0] : &field(props, "dtype", "TensorProperties", name);
  if (!dt->is(Value::Kind::kGlobal) || dt->as_global().module != "torch")
    shape_error(name, "TensorProperties.dtype is " + repr(*dt, 60));
  const auto t = dtype_from_name(dt->as_global().name);
  if (!t) shape_error(name, "TensorProperties.dtype torch." + dt->as_global().name + " is not a dtype");
  e.dtype = *t;
  if (!tuple) return;
  const auto& st = props.state->items();
  if (st.size() > 1) {
    const Value& layout = st[1];
    if (!(layout.is(Value::Kind::kStr) && layout.as_str() == "torch.strided") && !layout.is_global("torch", "strided"))
      throw Error(rules::kMetadataShape, "tensor layout " + repr(layout, 60) + " is not strided (not supported)", name);
  }
  if (st.size() > 2 && st[2].is(Value::Kind::kBool)) e.requires_grad = st[2].as_bool();
  if (st.size() > 3 && st[3].is(Value::Kind::kInt)) e.memory_format = st[3].as_int();
  if (st.size() > 4 && st[4].is(Value::Kind::kBool)) e.pin_memory = st[4].as_bool();
}

}  // namespace

std::string item_key(const std::string& fqn, const std::optional<std::vector<std::int64_t>>& offsets) {
  std::string k = fqn;
  k.push_back('\0');
  if (!offsets) return k + "-";
  for (auto o : *offsets) fmt::format_to(std::back_inserter(k), "{},", o);
  return k;
}

bool looks_like_metadata(std::span<const std::byte> head) noexcept {
  if (head.size() < 2 || head[0] != std::byte{0x80} || static_cast<unsigned>(head[1]) < 2) return false;
  const std::string_view s(reinterpret_cast<const char*>(head.data()), std::min(head.size(), dcp::kDetectWindow));
  const auto m = s.find(dcp::kMetadataModule);
  if (m == std::string_view::npos) return false;
  const auto c = s.find(dcp::kMetadataClass, m + dcp::kMetadataModule.size());
  return c != std::string_view::npos && c <= m + dcp::kMetadataModule.size() + 4;
}

Metadata parse_metadata(std::span<const std::byte> bytes, const std::string& name, const Limits& limits) {
  pickle::Hooks hooks;
  hooks.reduce = [](const Object& o, std::uint64_t) { return reduce(o); };
  hooks.on_global = [&](const GlobalRef& g) {
    if (!allowed(g))
      throw Error(rules::kMetadataGlobal,
                  fmt::format("references {}.{}, which is not a torch.distributed.checkpoint metadata class "
                              "(pickle.load would import and run it)",
                              g.module, g.name),
                  name, where_offset(g.where));
  };
  pickle::Parsed p = pickle::parse(bytes, name, 0, limits, hooks);
  Metadata md;
  md.globals = std::move(p.globals);

  const Object& root = instance(p.value, dcp::kMetadataModule, "Metadata", name);
  const Value& sdm = field(root, "state_dict_metadata", "Metadata", name);
  if (!sdm.is(Value::Kind::kDict)) shape_error(name, "state_dict_metadata is not a dict");
  if (sdm.as_dict().items.size() > limits.max_entries)
    throw Error(rules::kTooMany, fmt::format("{} entries exceed max_entries", sdm.as_dict().items.size()), name);

  // storage_data: (fqn, chunk offsets | none) -> where the bytes are.
  std::map<std::string, StorageInfo> storage;
  const Value& sd = field(root, "storage_data", "Metadata", name);
  if (!sd.is(Value::Kind::kDict)) shape_error(name, "storage_data is not a dict");
  for (const auto& [k, v] : sd.as_dict().items) {
    const Object& idx = instance(k, dcp::kMetadataModule, "MetadataIndex", name);
    const std::string fqn = text(field(idx, "fqn", "MetadataIndex", name), "MetadataIndex.fqn", name);
    std::vector<std::int64_t> offsets;
    const Value* off = optional_field(idx, "offset");
    if (off) offsets = ints(*off, "MetadataIndex.offset", name);
    const Object& info = instance(v, dcp::kFilesystemModule, "_StorageInfo", name);
    StorageInfo s{text(field(info, "relative_path", "_StorageInfo", name), "_StorageInfo.relative_path", name),
                  non_negative(field(info, "offset", "_StorageInfo", name), "_StorageInfo.offset", name),
                  non_negative(field(info, "length", "_StorageInfo", name), "_StorageInfo.length", name),
                  {}};
    if (const Value* t = optional_field(info, "transform_descriptors")) {
      if (!t->is(Value::Kind::kList)) shape_error(name, "_StorageInfo.transform_descriptors is not a list");
      for (const auto& x : t->items()) {
        if (!x.is(Value::Kind::kStr) || !known_transform(x.as_str()))
          throw Error(rules::kTransform,
                      fmt::format("item '{}' is stored through the transform {} "
                                  "(of DCP's extensions only {}/1 is known)",
                                  fqn, repr(x, 80), dcp::kZstdTransform),
                      name);
        s.transforms.emplace_back(x.as_str());
      }
    }
    Stored st{fqn, std::nullopt, std::nullopt, s};
    if (off) st.offset = offsets;
    if (const Value* i = optional_field(idx, "index"); i && i->is(Value::Kind::kInt)) st.index = i->as_int();
    md.storage_order.push_back(std::move(st));
    if (!storage.emplace(item_key(fqn, off ? std::optional(offsets) : std::nullopt), s).second)
      shape_error(name, "storage_data lists item '" + fqn + "' twice");
  }

  const Value* planner = optional_field(root, "planner_data");
  if (planner && !planner->is(Value::Kind::kDict)) shape_error(name, "planner_data is not a dict");

  std::uint64_t chunks_total = 0;
  for (const auto& [k, v] : sdm.as_dict().items) {
    Entry e;
    e.fqn = text(k, "a state_dict_metadata key", name);
    if (v.is(Value::Kind::kObject) && v.as_object().callable &&
        v.as_object().callable->is_global(dcp::kMetadataModule, "BytesStorageMetadata")) {
      const auto it = storage.find(item_key(e.fqn, std::nullopt));
      if (it == storage.end())
        throw Error(rules::kStorageMissing, "bytes item '" + e.fqn + "' has no storage_data entry", name);
      e.storage.push_back(it->second);
    } else {
      const Object& tm = instance(v, dcp::kMetadataModule, "TensorStorageMetadata", name);
      e.is_tensor = true;
      const Value& props = field(tm, "properties", "TensorStorageMetadata", name);
      const bool legacy = props.is(Value::Kind::kObject) && props.as_object().callable &&
                          props.as_object().callable->is_global(dcp::kLegacyPropertiesModule, "TensorProperties");
      properties_of(
          instance(props, legacy ? dcp::kLegacyPropertiesModule : dcp::kMetadataModule, "TensorProperties", name), e,
          name);
      e.size = ints(field(tm, "size", "TensorStorageMetadata", name), "TensorStorageMetadata.size", name);
      for (auto s : e.size)
        if (s < 0) shape_error(name, "tensor '" + e.fqn + "' has a negative size");
      if (!util::stride_span(e.size))
        shape_error(name, "tensor '" + e.fqn + "' has a size whose strides overflow 64 bits");
      const Value& chunks = field(tm, "chunks", "TensorStorageMetadata", name);
      if (!chunks.is(Value::Kind::kList)) shape_error(name, "TensorStorageMetadata.chunks is not a list");
      chunks_total += chunks.items().size();
      if (chunks_total > limits.max_entries) throw Error(rules::kTooMany, "more than max_entries tensor chunks", name);
      for (const auto& c : chunks.items()) {
        const Object& co = instance(c, dcp::kMetadataModule, "ChunkStorageMetadata", name);
        Chunk ch{ints(field(co, "offsets", "ChunkStorageMetadata", name), "ChunkStorageMetadata.offsets", name),
                 ints(field(co, "sizes", "ChunkStorageMetadata", name), "ChunkStorageMetadata.sizes", name)};
        if (ch.offsets.size() != e.size.size() || ch.sizes.size() != e.size.size())
          throw Error(rules::kChunkMismatch,
                      fmt::format("a chunk of tensor '{}' has {} dimensions, the tensor {}", e.fqn, ch.offsets.size(),
                                  e.size.size()),
                      name);
        const auto it = storage.find(item_key(e.fqn, ch.offsets));
        if (it == storage.end())
          throw Error(
              rules::kStorageMissing,
              fmt::format("chunk at {} of tensor '{}' has no storage_data entry", shape_text(ch.offsets), e.fqn), name);
        e.storage.push_back(it->second);
        e.chunks.push_back(std::move(ch));
      }
    }
    if (planner) {
      if (const Value* path = planner->as_dict().find(e.fqn)) {
        if (!path->is(Value::Kind::kTuple) && !path->is(Value::Kind::kList))
          shape_error(name, "planner_data path is not a tuple");
        for (const auto& part : path->items())
          if (!part.is(Value::Kind::kStr) && !part.is(Value::Kind::kInt))
            shape_error(name, fmt::format("planner_data path of '{}' has a {}", e.fqn, kind_name(part.kind())));
        e.path = path->items();
        if (e.path.empty()) shape_error(name, "planner_data path of '" + e.fqn + "' is empty");
      }
    }
    md.entries.push_back(std::move(e));
  }

  if (const Value* sm = optional_field(root, "storage_meta")) {
    const Object& meta = instance(*sm, dcp::kMetadataModule, "StorageMeta", name);
    if (const Value* s = optional_field(meta, "save_id"); s && s->is(Value::Kind::kStr))
      md.save_id = std::string(s->as_str());
    if (const Value* s = optional_field(meta, "checkpoint_id"); s && s->is(Value::Kind::kStr))
      md.checkpoint_id = std::string(s->as_str());
  }
  if (const Value* v = optional_field(root, "version"); v && v->is(Value::Kind::kStr))
    md.version = std::string(v->as_str());
  return md;
}

}  // namespace tensorseal::detail::dcp
