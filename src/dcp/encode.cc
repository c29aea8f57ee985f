// encode_metadata: the canonical .metadata pickle, built as the value tree DCP's own
// pickle.dump would produce for the dataclasses (grammar: dcp/constants.h) and written
// by the canonical pickle writer (protocol 2). Every dataclass is NEWOBJ + BUILD with
// its field dict in declaration order; TensorProperties BUILDs its __getstate__ tuple;
// BytesStorageMetadata (no fields) has no BUILD.
#include "dcp/constants.h"
#include "dcp/metadata.h"
#include "pickle/writer.h"

namespace tensorseal::detail::dcp {

namespace {

Value object(std::string_view module, std::string_view cls, Construct how, Value args, Value state) {
  auto o = std::make_shared<Object>();
  o->callable = std::make_shared<Value>(Value::global(std::string(module), std::string(cls)));
  o->args = std::make_shared<Value>(std::move(args));
  o->how = how;
  if (!state.is(Value::Kind::kNone)) o->state = std::make_shared<Value>(std::move(state));
  return Value(std::move(o));
}

Value dataclass(std::string_view module, std::string_view cls, std::vector<std::pair<std::string, Value>> fields) {
  Value state = Value::dict();
  for (auto& [k, v] : fields) state.as_dict().items.emplace_back(Value::str(k), std::move(v));
  return object(module, cls, Construct::kNewObj, Value::tuple(), std::move(state));
}

Value size_value(const std::vector<std::int64_t>& dims) {
  std::vector<Value> items;
  for (auto x : dims) items.emplace_back(x);
  return object("torch", "Size", Construct::kReduce, Value::tuple({Value::tuple(std::move(items))}), Value());
}

Value or_none(const std::optional<std::string>& s) { return s ? Value::str(*s) : Value(); }

Value properties(const Entry& e) {
  return object(dcp::kMetadataModule, "TensorProperties", Construct::kNewObj, Value::tuple(),
                Value::tuple({Value::global("torch", std::string(name(e.dtype))),
                              object("torch.serialization", "_get_layout", Construct::kReduce,
                                     Value::tuple({Value::str("torch.strided")}), Value()),
                              Value(e.requires_grad),
                              object(dcp::kMetadataModule, "_MEM_FORMAT_ENCODING", Construct::kReduce,
                                     Value::tuple({Value(e.memory_format)}), Value()),
                              Value(e.pin_memory)}));
}

}  // namespace

std::string save_id_of(const std::string& digest) {
  const std::string h = digest.substr(digest.find(':') + 1, 32);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20, 12);
}

std::string encode_metadata(const Metadata& md) {
  Value sdm = Value::dict(), planner = Value::dict(), sd = Value::dict();
  for (const Entry& e : md.entries) {
    Value meta;
    if (!e.is_tensor) {
      meta = object(dcp::kMetadataModule, "BytesStorageMetadata", Construct::kNewObj, Value::tuple(), Value());
    } else {
      std::vector<Value> chunks;
      for (const Chunk& c : e.chunks)
        chunks.push_back(dataclass(dcp::kMetadataModule, "ChunkStorageMetadata",
                                   {{"offsets", size_value(c.offsets)}, {"sizes", size_value(c.sizes)}}));
      meta = dataclass(dcp::kMetadataModule, "TensorStorageMetadata",
                       {{"properties", properties(e)}, {"size", size_value(e.size)}, {"chunks", Value::list(chunks)}});
    }
    sdm.as_dict().items.emplace_back(Value::str(e.fqn), std::move(meta));
    if (!e.path.empty()) planner.as_dict().items.emplace_back(Value::str(e.fqn), Value::tuple(e.path));
  }
  for (const Stored& s : md.storage_order) {
    Value key = dataclass(dcp::kMetadataModule, "MetadataIndex",
                          {{"fqn", Value::str(s.fqn)},
                           {"offset", s.offset ? size_value(*s.offset) : Value()},
                           {"index", s.index ? Value(*s.index) : Value()}});
    Value info = dataclass(dcp::kFilesystemModule, "_StorageInfo",
                           {{"relative_path", Value::str(s.storage.relative_path)},
                            {"offset", Value(static_cast<std::int64_t>(s.storage.offset))},
                            {"length", Value(static_cast<std::int64_t>(s.storage.length))}});
    sd.as_dict().items.emplace_back(std::move(key), std::move(info));
  }
  Value storage_meta = dataclass(dcp::kMetadataModule, "StorageMeta",
                                 {{"checkpoint_id", or_none(md.checkpoint_id)},
                                  {"save_id", or_none(md.save_id)},
                                  {"load_id", Value()},
                                  {"modules", Value::list()}});
  Value root = dataclass(dcp::kMetadataModule, "Metadata",
                         {{"state_dict_metadata", std::move(sdm)},
                          {"planner_data", std::move(planner)},
                          {"storage_data", std::move(sd)},
                          {"storage_meta", std::move(storage_meta)},
                          {"version", or_none(md.version)}});
  pickle::Writer w({});
  return w.finish(root);
}

}  // namespace tensorseal::detail::dcp
