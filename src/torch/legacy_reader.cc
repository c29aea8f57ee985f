// torch legacy checkpoints (_use_new_zipfile_serialization=False; torch <= 1.5 default).
// Grammar (docs/formats/torch-legacy.md):
//
//   file     = pickle(magic) pickle(protocol) pickle(sys_info) pickle(object) pickle(keys)
//              { u64le numel, numel * itemsize bytes } for each key in `keys`
//   magic    = 0x1950a86a20f9469cfc6c          protocol = 1001
//   sys_info = {'protocol_version': 1001, 'little_endian': bool,
//               'type_sizes': {'short': 2, 'int': 4, 'long': 4|8}}
//   object   = protocol 2; storages are BINPERSID of
//              ('storage', <class>, <key>, <location>, <numel>, <view>) where view is
//              None or (view_key, offset, size); modules ('module', cls, file, source).
//   keys     = list of storage keys (str(address)), in the order their data follows.
//
// The object pickle is parsed twice: once to learn which storages it names (their data
// follows later in the file), once with those storages available.
#include <fmt/format.h>

#include <map>
#include <optional>

#include "pickle/vm.h"
#include "torch/constants.h"
#include "torch/format.h"
#include "torch/rebuild.h"
#include "util/checked.h"
#include "util/endian.h"

namespace tensorseal::detail::torch {
using core::fact;

namespace {

struct Declared {
  torch::StorageRef ref;
  std::uint64_t offset;  // where the persistent id was
};

bool is_big_magic(const Value& v) {
  return v.is(Value::Kind::kBigInt) && v.as_bigint().to_decimal() == torch::kLegacyMagic;
}

}  // namespace

Checkpoint read_torch_legacy(const io::Input& in) {
  const Limits& limits = in.options->limits;
  const auto file = in.bytes();
  Checkpoint c;
  c.format = Format::kTorchLegacy;

  std::uint64_t pos = 0;
  auto next = [&](const char* what) {
    pickle::Parsed p = pickle::parse(file.subspan(pos), in.name, pos, limits, {});
    for (auto& g : p.globals) c.globals.push_back(std::move(g));
    (void)what;
    const std::uint64_t start = pos;
    pos += p.end;
    return std::pair(std::move(p), start);
  };

  auto [magic, magic_at] = next("magic");
  if (!is_big_magic(magic.value))
    throw Error(rules::kLegacyMagic, "first pickle is " + repr(magic.value, 60) + ", not torch's magic number", in.name,
                magic_at);
  auto [proto, proto_at] = next("protocol");
  if (!proto.value.is(Value::Kind::kInt) || proto.value.as_int() != torch::kLegacyProtocolVersion)
    throw Error(rules::kLegacyProtocol, "protocol version " + repr(proto.value, 40) + " is not 1001", in.name,
                proto_at);
  auto [sys, sys_at] = next("sys_info");
  bool little = true;
  {
    if (!sys.value.is(Value::Kind::kDict))
      throw Error(rules::kLegacySysInfo, "sys_info is not a dict", in.name, sys_at);
    const Dict& d = sys.value.as_dict();
    const Value* le = d.find(std::string_view("little_endian"));
    if (!le || !le->is(Value::Kind::kBool))
      throw Error(rules::kLegacySysInfo, "sys_info has no little_endian flag", in.name, sys_at);
    little = le->as_bool();
    c.facts.push_back(fact(topics::kSysInfo, "sys_info", repr(sys.value, 200)));
  }

  // Pass 1 over the object pickle: which storages does it name?
  const std::uint64_t object_at = pos;
  std::vector<Declared> declared;
  std::map<std::string, std::size_t> by_key;
  pickle::Hooks scan;
  scan.persistent_load = [&](const Value& pid, std::uint64_t offset) -> Value {
    if (pid.is(Value::Kind::kTuple) && !pid.items().empty() && pid.items()[0].is(Value::Kind::kStr) &&
        pid.items()[0].as_str() == "module")
      return Value();
    torch::StorageRef ref = torch::parse_storage_pid(pid, true, in.name, offset);
    if (!by_key.count(ref.key)) {
      by_key[ref.key] = declared.size();
      declared.push_back({ref, offset});
    }
    return Value();
  };
  scan.py2_strings = in.options->py2_strings;
  pickle::Parsed first = pickle::parse(file.subspan(object_at), in.name, object_at, limits, scan);
  pos = object_at + first.end;

  auto [keys, keys_at] = next("keys");
  if (!keys.value.is(Value::Kind::kList))
    throw Error(rules::kLegacyKeys, "storage key list is not a list", in.name, keys_at);

  // Storage records follow in key-list order: u64le element count, then the bytes.
  std::map<std::string, std::shared_ptr<const Storage>> data;
  for (const auto& k : keys.value.items()) {
    if (!k.is(Value::Kind::kStr)) throw Error(rules::kLegacyKeys, "storage key is not a string", in.name, keys_at);
    const std::string key(k.as_str());
    auto it = by_key.find(key);
    if (it == by_key.end())
      throw Error(rules::kLegacyKeys, "key list names storage '" + key + "' that the object never uses", in.name,
                  keys_at);
    if (data.count(key)) throw Error(rules::kLegacyKeys, "storage '" + key + "' listed twice", in.name, keys_at);
    const torch::StorageRef& ref = declared[it->second].ref;
    if (file.size() - pos < 8)
      throw Error(tensorseal::rules::kTruncated, "file ends before the size of storage '" + key + "'", in.name, pos);
    const std::uint64_t numel = util::load_le<std::uint64_t>(file.data() + pos);
    const std::uint64_t item = ref.typed ? itemsize(ref.dtype) : 1;
    auto nbytes = util::mul(numel, item);
    if (!nbytes || *nbytes > file.size() - pos - 8)
      throw Error(rules::kLegacyStorageHeader,
                  fmt::format("storage '{}' claims {} elements, more than the {} bytes left in the file", key, numel,
                              file.size() - pos - 8),
                  in.name, pos);
    std::shared_ptr<Storage> s = in.window(pos + 8, *nbytes);
    s->dtype = ref.dtype;
    if (!little) {
      s = torch::swapped_copy(*s, ref.dtype);
    }
    data.emplace(key, s);
    pos += 8 + *nbytes;
  }
  if (pos != file.size())
    throw Error(rules::kLegacyTrailing, fmt::format("{} bytes after the last storage", file.size() - pos), in.name,
                pos);
  c.facts.push_back(fact(topics::kByteorder, "sys_info", little ? "little" : "big"));

  // Pass 2: resolve with the storages in hand.
  std::map<std::string, std::shared_ptr<const Storage>> views;
  std::size_t first_use = 0;
  std::map<std::string, bool> seen;
  auto persistent_load = [&](const Value& pid, std::uint64_t offset) -> Value {
    const auto& f = pid.items();
    if (!f.empty() && f[0].is(Value::Kind::kStr) && f[0].as_str() == "module") {
      // ('module', cls, source_file, source): torch returns the class itself.
      if (f.size() != 4) throw Error(rules::kBadPersistentId, "module persistent id needs 4 fields", in.name, offset);
      return f[1];
    }
    torch::StorageRef ref = torch::parse_storage_pid(pid, true, in.name, offset);
    auto it = data.find(ref.key);
    if (it == data.end())
      throw Error(rules::kMissingStorage, "storage '" + ref.key + "' has no data in the file", in.name, offset);
    if (!seen[ref.key]) {
      seen[ref.key] = true;
      c.facts.push_back(fact(topics::kStorageKey, fmt::format("storage #{}", first_use++), ref.key));
    }
    if (ref.view_metadata.is_none()) {
      if (ref.nbytes() > it->second->size())
        throw Error(rules::kStorageTooSmall,
                    fmt::format("storage '{}' needs {} bytes but has {}", ref.key, ref.nbytes(), it->second->size()),
                    in.name, offset);
      return Value(it->second);
    }
    // Legacy storage views: (view_key, offset, size) in elements of the root storage.
    const Value& vm = ref.view_metadata;
    if (!vm.is(Value::Kind::kTuple) || vm.items().size() != 3 || !vm.items()[0].is(Value::Kind::kStr) ||
        !vm.items()[1].is(Value::Kind::kInt) || !vm.items()[2].is(Value::Kind::kInt))
      throw Error(rules::kBadPersistentId, "storage view metadata is not (key, offset, size)", in.name, offset);
    const std::string vkey(vm.items()[0].as_str());
    if (auto v = views.find(vkey); v != views.end()) return Value(v->second);
    const std::uint64_t item = itemsize(ref.dtype);
    auto off = util::mul(static_cast<std::uint64_t>(vm.items()[1].as_int()), item);
    auto len = util::mul(static_cast<std::uint64_t>(vm.items()[2].as_int()), item);
    if (vm.items()[1].as_int() < 0 || vm.items()[2].as_int() < 0 || !off || !len || *off > it->second->size() ||
        *len > it->second->size() - *off)
      throw Error(tensorseal::rules::kViewOutOfBounds,
                  "storage view '" + vkey + "' lies outside storage '" + ref.key + "'", in.name, offset);
    auto view = Storage::slice(it->second, *off, *len);
    views.emplace(vkey, view);
    return Value(std::shared_ptr<const Storage>(view));
  };
  c.root = torch::unpickle(in, file.subspan(object_at, first.end), object_at, "object pickle", persistent_load, c);
  return c;
}

}  // namespace tensorseal::detail::torch
