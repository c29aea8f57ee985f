// torch's first format: torch.save of torch 0.1.x, a tar archive that torch.load still
// reads (torch/serialization.py, _legacy_load's legacy_load). Grammar
// (docs/formats/tar.md; the archive itself: src/tar/reader.cc):
//
//   archive  = tar of members, any order:  sys_info? pickle tensors storages  (+ others,
//              which torch never reads)
//   sys_info = pickle {'protocol_version': 1000, 'little_endian': bool, 'type_sizes': {...}}
//   storages = pickle(count)  { pickle((key, location, <class>)) u64le numel  numel * itemsize
//              bytes } * count  pickle([(view_key, root_key, offset, numel), ...])
//   tensors  = pickle(count)  { pickle((key, storage_key, <tensor class>)) i32le ndim
//              4 bytes (0)  i64le size[ndim]  i64le stride[ndim]  i64le storage_offset } * count
//   pickle   = the object; persistent ids: str(key) of a tensor or storage (int(pid)
//              looks it up), or (<nn.Module class>, source_file, source) for a class
//
//   key      = int (the object's address when saved), unique over storages, views and
//              tensors; <class> a legacy storage class (torch FloatStorage, ...), whose
//              dtype the tensors over it take; offsets and numel count elements.
//
// torch reads storages, then tensors, then the pickle; so does this reader, each
// member read to its last byte.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "core/expansion.h"
#include "pickle/vm.h"
#include "tar/constants.h"
#include "tar/reader.h"
#include "torch/constants.h"
#include "torch/format.h"
#include "torch/rebuild.h"
#include "util/checked.h"
#include "util/endian.h"

namespace tensorseal::detail::torch {
using core::fact;

namespace {

using u64 = std::uint64_t;
using Bytes = std::span<const std::byte>;

// One member of the archive being read, and a cursor over it.
struct Cursor {
  const io::Input& in;
  Checkpoint& out;
  std::string_view member;  // its name, for messages
  u64 base;                 // its first byte in the file
  Bytes data;
  u64 pos = 0;

  u64 at() const { return base + pos; }
  [[noreturn]] void fail(Rule rule, const std::string& detail, u64 offset) const {
    throw Error(rule, fmt::format("{}: {}", member, detail), in.name, offset);
  }
  // The next pickle of the member (pickle.load(f) on the extracted member file).
  Value pickle() {
    pickle::Hooks hooks;
    hooks.py2_strings = in.options->py2_strings;
    pickle::Parsed p = pickle::parse(data.subspan(pos), in.name, at(), in.options->limits, hooks);
    for (auto& g : p.globals) out.globals.push_back(std::move(g));
    pos += p.end;
    return std::move(p.value);
  }
  Bytes take(u64 n, Rule rule, const char* what) {
    if (n > data.size() - pos)
      fail(rule, fmt::format("{} needs {} bytes, {} are left", what, n, data.size() - pos), at());
    const Bytes b = data.subspan(pos, n);
    pos += n;
    return b;
  }
  // A count pickle: an int that `min_record` bytes per record leave room for.
  u64 count(u64 min_record) {
    const u64 count_at = at();
    const Value v = pickle();
    const u64 left = data.size() - pos;
    if (!v.is(Value::Kind::kInt) || v.as_int() < 0)
      fail(rules::kTarBadCount, fmt::format("the record count is {}, not a non-negative int", repr(v, 40)), count_at);
    const auto n = static_cast<u64>(v.as_int());
    if (n > left / min_record || n > in.options->limits.max_entries)
      fail(rules::kTarBadCount,
           fmt::format("{} records declared: more than the {} bytes left can hold, or than max_entries ({})", n, left,
                       in.options->limits.max_entries),
           count_at);
    return n;
  }
  void end() const {
    if (pos != data.size())
      fail(rules::kTarTrailing, fmt::format("{} bytes follow the last record", data.size() - pos), at());
  }
};

// What a key names: torch's deserialized_objects, one dict for storages and tensors.
struct Object {
  std::shared_ptr<const Storage> storage;  // a storage or storage view
  std::shared_ptr<const Tensor> tensor;    // a tensor
};

class TarReader {
 public:
  explicit TarReader(const io::Input& in) : in_(in) { c_.format = Format::kTorchTar; }

  Checkpoint read() {
    const tar::Archive a = tar::read(in_.bytes(), in_.name, in_.options->limits);
    c_.facts.push_back(fact(tar::topics::kDialect, "tar", a.dialect.text()));
    // Members beyond the four torch 0.1 wrote, other than the data hard links among them name.
    auto read_by_torch = [](const tar::Member& m) {
      return m.name == kTarStorages || m.name == kTarTensors || m.name == kTarPickle || m.name == kTarSysInfo;
    };
    std::vector<bool> used(a.members.size());
    for (std::size_t i = 0; i < a.members.size(); ++i)
      if (read_by_torch(a.members[i])) used[a.members[i].hard_link ? a.members[i].target : i] = true;
    std::string others;
    for (std::size_t i = 0; i < a.members.size(); ++i)
      if (!used[i] && !read_by_torch(a.members[i])) others += (others.empty() ? "" : ", ") + a.members[i].name;
    if (!others.empty()) c_.facts.push_back(fact(topics::kUnexpectedRecords, "tar", others));
    if (const auto* s = find(a, kTarSysInfo)) sys_info(*s);
    storages(need(a, kTarStorages));
    tensors(need(a, kTarTensors));
    object(need(a, kTarPickle));
    return std::move(c_);
  }

 private:
  static const tar::Member* find(const tar::Archive& a, std::string_view name) {
    for (const auto& m : a.members)
      if (m.name == name) return &m;
    return nullptr;
  }
  const tar::Member& need(const tar::Archive& a, std::string_view name) const {
    if (const auto* m = find(a, name)) return *m;
    throw Error(rules::kTarMissingMember, fmt::format("the archive has no member '{}' (torch.load needs it)", name),
                in_.name, a.end);
  }
  Cursor cursor(const tar::Member& m) {
    return Cursor{in_, c_, m.name, m.data_offset, in_.bytes().subspan(m.data_offset, m.size)};
  }

  // A key: an int (an address when saved), defined once over storages, views and tensors.
  std::int64_t new_key(const Cursor& cur, const Value& v, Rule rule, u64 offset) {
    if (!v.is(Value::Kind::kInt)) cur.fail(rule, fmt::format("key {} is not an int", repr(v, 40)), offset);
    const std::int64_t k = v.as_int();
    if (objects_.count(k)) cur.fail(rules::kTarDuplicateKey, fmt::format("key {} is defined twice", k), offset);
    return k;
  }
  std::shared_ptr<const Storage> storage_of(const Cursor& cur, const Value& v, Rule rule, u64 offset) const {
    const auto it = v.is(Value::Kind::kInt) ? objects_.find(v.as_int()) : objects_.end();
    if (it == objects_.end() || !it->second.storage)
      cur.fail(rule, fmt::format("{} names no storage defined before it", repr(v, 40)), offset);
    return it->second.storage;
  }

  // sys_info: never read by torch.load, but it says the byte order the data has.
  void sys_info(const tar::Member& m) {
    Cursor cur = cursor(m);
    const u64 start = cur.at();
    const Value v = cur.pickle();
    cur.end();
    const Value* le = v.is(Value::Kind::kDict) ? v.as_dict().find(std::string_view("little_endian")) : nullptr;
    if (le == nullptr || !le->is(Value::Kind::kBool))
      cur.fail(rules::kTarBadSysInfo, "not a dict with a bool little_endian", start);
    if (!le->as_bool())
      cur.fail(rules::kTarBigEndian,
               "written on a big-endian machine: torch.load reads the data in the host's byte order", start);
    c_.facts.push_back(fact(topics::kSysInfo, std::string(kTarSysInfo), repr(v, 200)));
  }

  // storages: count, records (key, location, class) + u64 numel + data, then the views.
  void storages(const tar::Member& m) {
    Cursor cur = cursor(m);
    const u64 n = cur.count(kTarMinStorageRecord);
    for (u64 i = 0; i < n; ++i) {
      const u64 args_at = cur.at();
      const Value args = cur.pickle();
      const auto* f = args.is(Value::Kind::kTuple) ? &args.items() : nullptr;
      if (f == nullptr || f->size() != 3 || !(*f)[1].is(Value::Kind::kStr) || !(*f)[2].is(Value::Kind::kGlobal))
        cur.fail(rules::kTarBadStorage, fmt::format("storage record {} is not (key, location, storage class)", i),
                 args_at);
      const std::int64_t key = new_key(cur, (*f)[0], rules::kTarBadStorage, args_at);
      const Global& cls = (*f)[2].as_global();
      const auto dtype = cls.module == "torch" ? dtype_from_legacy_storage(cls.name) : std::nullopt;
      if (!dtype)
        cur.fail(rules::kTarBadStorage, fmt::format("{}.{} is not a typed storage class", cls.module, cls.name),
                 args_at);
      const u64 numel_at = cur.at();
      const u64 numel = util::load_le<u64>(cur.take(8, rules::kTarBadStorage, "the element count").data());
      const auto nbytes = util::mul(numel, itemsize(*dtype));
      if (!nbytes || *nbytes > cur.data.size() - cur.pos)
        cur.fail(rules::kTarBadStorage,
                 fmt::format("storage {} claims {} elements, more than the {} bytes left", key, numel,
                             cur.data.size() - cur.pos),
                 numel_at);
      std::shared_ptr<Storage> s = in_.window(cur.at(), *nbytes);
      s->dtype = *dtype;
      cur.pos += *nbytes;
      c_.facts.push_back(fact(topics::kStorageKey, fmt::format("storage #{}", i), std::to_string(key)));
      objects_[key].storage = std::move(s);
    }
    // Views: a window of elements of an earlier storage, under a key of its own.
    const u64 views_at = cur.at();
    const Value views = cur.pickle();
    if (!views.is(Value::Kind::kList) && !views.is(Value::Kind::kTuple))
      cur.fail(rules::kTarBadView, "the storage views are not a list", views_at);
    for (const Value& v : views.items()) {
      const auto* f = v.is(Value::Kind::kTuple) || v.is(Value::Kind::kList) ? &v.items() : nullptr;
      if (f == nullptr || f->size() != 4 || !(*f)[2].is(Value::Kind::kInt) || !(*f)[3].is(Value::Kind::kInt))
        cur.fail(rules::kTarBadView, "a storage view is not (key, root key, offset, numel)", views_at);
      const std::int64_t key = new_key(cur, (*f)[0], rules::kTarBadView, views_at);
      auto root = storage_of(cur, (*f)[1], rules::kTarBadView, views_at);
      // A view and its root share one buffer in every consumer, also those that need
      // element-aligned data (the Python binding copies a misaligned storage, which
      // would part the root from its views): a misaligned root with views is read into
      // an aligned copy first (once: a view of it is then aligned too, its offset counting
      // whole elements). Views come only from torch 0.1's storage slicing.
      const auto align = std::clamp<std::uintptr_t>(itemsize(root->dtype), 1, 16);
      if (reinterpret_cast<std::uintptr_t>(root->bytes().data()) % align != 0) {
        root = Storage::owned(std::vector<std::byte>(root->bytes().begin(), root->bytes().end()), root->dtype);
        objects_[(*f)[1].as_int()].storage = root;
      }
      const std::int64_t offset = (*f)[2].as_int(), numel = (*f)[3].as_int();
      const u64 item = itemsize(root->dtype);
      const auto first = util::mul(static_cast<u64>(offset), item), len = util::mul(static_cast<u64>(numel), item);
      if (offset < 0 || numel < 0 || !first || !len || *first > root->size() || *len > root->size() - *first)
        cur.fail(rules::kTarBadView,
                 fmt::format("view {} of {} elements at {} lies outside its storage of {} bytes", key, numel, offset,
                             root->size()),
                 views_at);
      auto s = Storage::slice(root, *first, *len);
      s->dtype = root->dtype;
      objects_[key].storage = std::move(s);
    }
    cur.end();
  }

  // tensors: count, records (key, storage key, class) + i32 ndim, 4 zero bytes, sizes,
  // strides, offset: torch's Tensor.set_(storage, offset, size, stride).
  void tensors(const tar::Member& m) {
    Cursor cur = cursor(m);
    const u64 n = cur.count(kTarMinTensorRecord);
    const Limits& limits = in_.options->limits;
    for (u64 i = 0; i < n; ++i) {
      const u64 args_at = cur.at();
      const Value args = cur.pickle();
      const auto* f = args.is(Value::Kind::kTuple) ? &args.items() : nullptr;
      if (f == nullptr || f->size() != 3 || !(*f)[2].is(Value::Kind::kGlobal))
        cur.fail(rules::kTarBadTensor, fmt::format("tensor record {} is not (key, storage key, tensor class)", i),
                 args_at);
      const std::int64_t key = new_key(cur, (*f)[0], rules::kTarBadTensor, args_at);
      auto t = std::make_shared<Tensor>();
      t->storage = storage_of(cur, (*f)[1], rules::kTarBadTensor, args_at);
      t->dtype = t->storage->dtype;
      const u64 ndim_at = cur.at();
      const auto head = cur.take(8, rules::kTarBadTensor, "ndim");
      const auto ndim = util::load_le<std::int32_t>(head.data());
      // torch 0.1 wrote ndim as a C long (8 bytes); torch.load reads 4 and skips 4.
      if (ndim < 0 || static_cast<u64>(ndim) > limits.max_ndim || util::load_le<std::uint32_t>(head.data() + 4) != 0)
        cur.fail(rules::kTarBadTensor,
                 fmt::format("tensor {} has {} dimensions (at most max_ndim, {})", key, ndim, limits.max_ndim),
                 ndim_at);
      const auto dims = cur.take(16 * static_cast<u64>(ndim) + 8, rules::kTarBadTensor, "sizes, strides and offset");
      for (std::int32_t d = 0; d < ndim; ++d) {
        t->shape.push_back(util::load_le<std::int64_t>(dims.data() + 8 * d));
        t->strides.push_back(util::load_le<std::int64_t>(dims.data() + 8 * (ndim + d)));
      }
      t->storage_offset = util::load_le<std::int64_t>(dims.data() + 16 * ndim);
      try {
        t->validate();
        core::check_expansion(*t, limits);
      } catch (const Error& e) {  // tensor/view-out-of-bounds, ...: at the record
        throw Error(Rule{e.rule(), e.kind()}, fmt::format("{}: tensor {}: {}", m.name, key, e.detail()), in_.name,
                    ndim_at);
      }
      objects_[key].tensor = std::move(t);
    }
    cur.end();
  }

  // The object: persistent ids resolved against the storages and tensors read.
  void object(const tar::Member& m) {
    Cursor cur = cursor(m);
    std::map<std::int64_t, Value> resolved;  // one Value per key: shared objects stay shared
    auto persistent_load = [&](const Value& pid, u64 offset) -> Value {
      if (pid.is(Value::Kind::kTuple)) {
        // (class, source_file, source) of a pickled nn.Module: torch returns the class.
        if (pid.items().size() != 3 || !pid.items()[0].is(Value::Kind::kGlobal))
          cur.fail(rules::kTarBadPersistentId, "a tuple persistent id is not (class, source file, source)", offset);
        return pid.items()[0];
      }
      const auto key = key_of(pid);
      const auto it = key ? objects_.find(*key) : objects_.end();
      if (it == objects_.end())
        cur.fail(rules::kTarBadPersistentId,
                 fmt::format("persistent id {} is not the key of a storage or tensor", repr(pid, 40)), offset);
      auto [slot, fresh] = resolved.try_emplace(*key);
      if (fresh) slot->second = it->second.tensor ? Value(it->second.tensor) : Value(it->second.storage);
      return slot->second;
    };
    u64 end = 0;
    c_.root = unpickle(in_, cur.data, cur.base, std::string(kTarPickle), persistent_load, c_, &end);
    cur.pos = end;
    cur.end();
  }

  // int(pid) for the ids old torch wrote: str(key), or an int; only canonical decimal
  // text (what str() gives), so no spelling is read two ways.
  static std::optional<std::int64_t> key_of(const Value& pid) {
    if (pid.is(Value::Kind::kInt)) return pid.as_int();
    std::string_view s;
    if (pid.is(Value::Kind::kStr))
      s = pid.as_str();
    else if (pid.is(Value::Kind::kBytes) && !pid.is_bytearray())
      s = pid.as_bytes();
    else
      return std::nullopt;
    const bool negative = !s.empty() && s.front() == '-';
    const std::string_view digits = s.substr(negative ? 1 : 0);
    if (digits.empty() || digits.size() > 18 || (digits.size() > 1 && digits.front() == '0') ||
        digits.find_first_not_of("0123456789") != std::string_view::npos)
      return std::nullopt;
    std::int64_t v = 0;
    for (char c : digits) v = v * 10 + (c - '0');
    return negative ? -v : v;
  }

  const io::Input& in_;
  Checkpoint c_;
  std::map<std::int64_t, Object> objects_;
};

}  // namespace

bool detect_torch_tar(std::span<const std::byte> head) noexcept { return tar::looks_like_tar(head); }

Checkpoint read_torch_tar(const io::Input& in) { return TarReader(in).read(); }

}  // namespace tensorseal::detail::torch
