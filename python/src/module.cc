// tensorseal._tensorseal — the nanobind binding. Thin: converts between Python
// objects and the value tree and calls the public C++ API. Tensor data is never
// copied here: loads hand out views of the file mapping, saves borrow the memory of
// torch tensors / numpy arrays (kept alive until the writer is done).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <tensorseal/tensorseal.h>
#include <unordered_map>

namespace nb = nanobind;
using namespace tensorseal;

namespace {

nb::object glue() { return nb::module_::import_("tensorseal._glue"); }

// Text the core hands out is UTF-8, except names taken from a damaged container (zip
// member names, facts quoting file bytes): one policy everywhere, surrogateescape,
// which never fails and keeps every byte (str.encode("utf-8", "surrogateescape")).
nb::str py_text(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (o == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

// ---- C++ -> Python --------------------------------------------------------------

struct ToPy {
  nb::object g = glue();
  std::string framework;  // "torch" or "numpy"
  std::unordered_map<const void*, nb::object> nodes;     // shared nodes stay shared
  std::unordered_map<const Storage*, nb::object> bufs;   // one buffer per storage
  int depth = 0;

  nb::object buffer(const std::shared_ptr<const Storage>& s) {
    auto it = bufs.find(s.get());
    if (it != bufs.end()) return it->second;
    auto* keep = new std::shared_ptr<const Storage>(s);
    nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<const Storage>*>(p); });
    // The memory is a private copy-on-write mapping or an owned buffer: writes from
    // Python never reach the file.
    auto* data = const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(s->bytes().data()));
    std::size_t shape[1] = {static_cast<std::size_t>(s->size())};
    nb::object arr = nb::cast(nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>(data, 1, shape, owner));
    // One framework storage object per Storage, so tensors sharing bytes in the file
    // share one storage after loading (tied weights stay tied).
    nb::object wrapped = g.attr("wrap_buffer")(framework, arr);
    bufs.emplace(s.get(), wrapped);
    return wrapped;
  }

  nb::object tensor(const Tensor& t) {
    nb::list shape, strides;
    for (auto d : t.shape) shape.append(d);
    for (auto d : t.strides) strides.append(d);
    return g.attr("make_tensor")(framework, buffer(t.storage), std::string(name(t.dtype)), nb::tuple(shape),
                                 nb::tuple(strides), t.storage_offset, t.requires_grad, t.is_parameter);
  }

  nb::object seq(const std::vector<Value>& items) {
    nb::list l;
    for (const auto& x : items) l.append(convert(x));
    return l;
  }

  nb::object convert(const Value& v) {
    using K = Value::Kind;
    const void* node = v.node();
    const bool shareable = node != nullptr && v.kind() != K::kStr && v.kind() != K::kBytes;
    if (shareable) {
      auto it = nodes.find(node);
      if (it != nodes.end()) return it->second;
    }
    nb::object out;
    switch (v.kind()) {
      case K::kNone: return nb::none();
      case K::kBool: return nb::bool_(v.as_bool());
      case K::kInt: return nb::int_(v.as_int());
      case K::kBigInt: {
        const auto& b = v.as_bigint().le_bytes;
        return nb::module_::import_("builtins").attr("int").attr("from_bytes")(nb::bytes(b.data(), b.size()),
                                                                              "little", nb::arg("signed") = true);
      }
      case K::kFloat: return nb::float_(v.as_float());
      case K::kComplex: return nb::steal(PyComplex_FromDoubles(v.as_complex().real, v.as_complex().imag));
      case K::kStr: return py_text(v.as_str());
      case K::kBytes: {
        nb::bytes b(v.as_bytes().data(), v.as_bytes().size());
        if (v.is_bytearray()) return nb::module_::import_("builtins").attr("bytearray")(b);
        return b;
      }
      case K::kList: {
        nb::list l;
        nodes.emplace(node, l);  // register first: a list may contain itself
        for (const auto& x : v.items()) l.append(convert(x));
        return l;
      }
      case K::kTuple: out = nb::tuple(seq(v.items())); break;
      case K::kSet: {
        nb::object items = seq(v.as_set().items);
        out = nb::module_::import_("builtins").attr(v.as_set().frozen ? "frozenset" : "set")(items);
        break;
      }
      case K::kDict: {
        const Dict& d = v.as_dict();
        nb::object obj = g.attr("new_dict")(static_cast<int>(d.kind));
        nodes.emplace(node, obj);
        for (const auto& [k, x] : d.items) obj[convert(k)] = convert(x);
        if (d.attrs)
          for (const auto& [k, x] : d.attrs->items)
            if (k.is(K::kStr)) nb::setattr(obj, nb::str(k.as_str().data(), k.as_str().size()), convert(x));
        return obj;
      }
      case K::kTensor: out = tensor(*v.as_tensor()); break;
      case K::kStorage: out = buffer(v.as_storage()); break;  // untyped: the element type is not kept
      case K::kGlobal: out = g.attr("make_global")(v.as_global().module, v.as_global().name); break;
      case K::kObject: {
        const Object& o = v.as_object();
        auto opt = [&](const std::shared_ptr<Value>& p) { return p ? convert(*p) : nb::none(); };
        nb::list litems;
        for (const auto& x : o.list_items) litems.append(convert(x));
        nb::list ditems;
        for (const auto& [k, x] : o.dict_items) ditems.append(nb::make_tuple(convert(k), convert(x)));
        out = g.attr("make_object")(opt(o.callable), opt(o.args), opt(o.kwargs), static_cast<int>(o.how),
                                    o.state ? convert(*o.state) : nb::none(), o.state != nullptr, litems, ditems);
        break;
      }
    }
    if (shareable) nodes.emplace(node, out);
    return out;
  }
};

// ---- Python -> C++ --------------------------------------------------------------

// Keeps a Python object alive from C++; releases it under the GIL.
std::shared_ptr<const void> hold(nb::object o) {
  auto* p = new nb::object(std::move(o));
  return std::shared_ptr<const void>(p, [](const void* q) {
    nb::gil_scoped_acquire gil;
    delete static_cast<const nb::object*>(q);
  });
}

struct FromPy {
  nb::object g = glue();
  std::unordered_map<std::uintptr_t, std::shared_ptr<const Storage>> storages;  // by storage identity
  std::unordered_map<PyObject*, Value> nodes;  // the same Python object -> the same node
  std::vector<nb::object> pinned;              // keeps keys of `nodes` alive
  bool split_storages = false;                 // one storage per tensor (safetensors drop-in)
  int depth = 0;

  Value convert(nb::handle h) {
    if (++depth > 1000) throw Error(rules::kInvalidArgument, "object nesting deeper than 1000");
    struct Guard { int& d; ~Guard() { --d; } } guard{depth};
    if (h.is_none()) return Value();
    if (PyBool_Check(h.ptr())) return Value(h.ptr() == Py_True);
    if (PyLong_CheckExact(h.ptr())) {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
      if (!overflow) return Value(static_cast<std::int64_t>(x));
      nb::bytes b = nb::borrow<nb::bytes>(g.attr("int_to_le")(h));
      return Value(BigInt{std::string(b.c_str(), b.size())});
    }
    if (PyFloat_CheckExact(h.ptr())) return Value(PyFloat_AsDouble(h.ptr()));
    if (PyComplex_CheckExact(h.ptr()))
      return Value(Complex{PyComplex_RealAsDouble(h.ptr()), PyComplex_ImagAsDouble(h.ptr())});
    if (PyUnicode_CheckExact(h.ptr())) return Value::str(nb::cast<std::string>(h));
    if (PyBytes_CheckExact(h.ptr())) {
      nb::bytes b = nb::borrow<nb::bytes>(h);
      return Value::bytes(std::string(b.c_str(), b.size()));
    }
    if (PyByteArray_CheckExact(h.ptr()))
      return Value::bytes(std::string(PyByteArray_AsString(h.ptr()), PyByteArray_Size(h.ptr())), true);
    auto it = nodes.find(h.ptr());
    if (it != nodes.end()) return it->second;
    Value out = convert_node(h);
    nodes.emplace(h.ptr(), out);
    pinned.push_back(nb::borrow(h));
    return out;
  }

  Value convert_node(nb::handle h) {
    if (PyList_CheckExact(h.ptr())) {
      Value l = Value::list();
      nodes.emplace(h.ptr(), l);
      pinned.push_back(nb::borrow(h));
      for (nb::handle x : nb::borrow<nb::list>(h)) l.as_list().items.push_back(convert(x));
      return l;
    }
    if (PyTuple_CheckExact(h.ptr())) {
      std::vector<Value> items;
      for (nb::handle x : nb::borrow<nb::tuple>(h)) items.push_back(convert(x));
      return Value::tuple(std::move(items));
    }
    // Everything else is described by the glue (python/tensorseal/_glue.py classify: one
    // typed record per kind) so torch and numpy stay optional imports.
    nb::object desc = g.attr("classify")(h);
    nb::handle type = desc.type();
    if (type.is(g.attr("DictDesc"))) {
      Value d = Value::dict(static_cast<DictKind>(nb::cast<int>(desc.attr("kind"))));
      nodes.emplace(h.ptr(), d);
      pinned.push_back(nb::borrow(h));
      for (nb::handle item : nb::borrow<nb::list>(desc.attr("items"))) {
        nb::tuple kv = nb::borrow<nb::tuple>(item);
        d.as_dict().set(convert(kv[0]), convert(kv[1]));
      }
      nb::object attrs = desc.attr("attrs");
      if (!attrs.is_none()) {
        auto a = std::make_shared<Dict>();
        for (nb::handle item : nb::borrow<nb::list>(attrs)) {
          nb::tuple kv = nb::borrow<nb::tuple>(item);
          a->set(convert(kv[0]), convert(kv[1]));
        }
        d.as_dict().attrs = a;
      }
      return d;
    }
    if (type.is(g.attr("SetDesc"))) {
      auto s = std::make_shared<Set>();
      s->frozen = nb::cast<bool>(desc.attr("frozen"));
      for (nb::handle x : nb::borrow<nb::list>(desc.attr("items"))) s->items.push_back(convert(x));
      return Value(s);
    }
    if (type.is(g.attr("TensorDesc"))) return tensor(desc);
    if (type.is(g.attr("BufferDesc"))) return Value(storage(desc));
    if (type.is(g.attr("GlobalDesc")))
      return Value::global(nb::cast<std::string>(desc.attr("module")), nb::cast<std::string>(desc.attr("name")));
    if (type.is(g.attr("ObjectDesc"))) {
      auto o = std::make_shared<Object>();
      o->callable = std::make_shared<Value>(convert(desc.attr("callable")));
      o->args = std::make_shared<Value>(convert(desc.attr("args")));
      return Value(o);
    }
    throw Error(rules::kInvalidArgument, "cannot save an object of type " + nb::cast<std::string>(desc.attr("type_name")) +
                                             " (tensorseal saves tensors, arrays and plain Python data)");
  }

  static DType dtype_of(nb::handle name) {
    const auto n = nb::cast<std::string>(name);
    auto dtype = dtype_from_name(n);
    if (!dtype) throw Error(rules::kInvalidArgument, "unknown dtype " + n);
    return *dtype;
  }

  // A bare storage (typed: its dtype; untyped: uint8) or the memory under a tensor: one
  // Storage per (ptr, nbytes), so tensors sharing memory share a storage. Empty buffers
  // share nothing (allocators give every empty tensor the same address, or none).
  std::shared_ptr<const Storage> storage(nb::handle buf) {
    const auto ptr = nb::cast<std::uintptr_t>(buf.attr("ptr"));
    const auto nbytes = nb::cast<std::uint64_t>(buf.attr("nbytes"));
    const DType dtype = dtype_of(buf.attr("dtype"));
    if (nbytes == 0) return Storage::external(nullptr, 0, hold(buf.attr("owner")), dtype);
    auto it = storages.find(ptr);
    if (it != storages.end() && it->second->size() == nbytes && it->second->dtype == dtype) return it->second;
    auto s = Storage::external(reinterpret_cast<const std::byte*>(ptr), nbytes, hold(buf.attr("owner")), dtype);
    storages[ptr] = s;
    return s;
  }

  Value tensor(nb::handle desc) {
    auto t = std::make_shared<Tensor>();
    t->dtype = dtype_of(desc.attr("dtype"));
    for (nb::handle d : nb::borrow<nb::tuple>(desc.attr("shape"))) t->shape.push_back(nb::cast<std::int64_t>(d));
    for (nb::handle d : nb::borrow<nb::tuple>(desc.attr("strides"))) t->strides.push_back(nb::cast<std::int64_t>(d));
    t->storage_offset = nb::cast<std::int64_t>(desc.attr("offset"));
    t->requires_grad = nb::cast<bool>(desc.attr("requires_grad"));
    t->is_parameter = nb::cast<bool>(desc.attr("is_parameter"));
    nb::object buf = desc.attr("buffer");
    if (split_storages) {
      // Each tensor gets a storage of just the bytes it can reach (safetensors holds
      // unshared tensors; views that do not overlap are separate tensors there).
      for (auto s : t->strides)
        if (s < 0) throw Error(rules::kInvalidArgument, "negative strides are not supported");
      const auto ptr = nb::cast<std::uintptr_t>(buf.attr("ptr"));
      const auto nbytes = nb::cast<std::uint64_t>(buf.attr("nbytes"));
      // The whole buffer first, to measure the view's extent against it.
      t->storage = Storage::external(reinterpret_cast<const std::byte*>(ptr), nbytes, nullptr, t->dtype);
      t->validate();
      const auto [first, last] = t->storage_extent();
      t->storage = Storage::external(reinterpret_cast<const std::byte*>(ptr + first), last - first,
                                     hold(buf.attr("owner")), t->dtype);
      t->storage_offset = 0;
    } else {
      t->storage = storage(buf);
    }
    t->validate();
    return Value(std::shared_ptr<const Tensor>(t));
  }
};

// ---- helpers --------------------------------------------------------------------

Format parse_format(const std::string& f) {
  auto fmt = format_from_name(f);
  if (!fmt) throw Error(rules::kInvalidArgument, "unknown format '" + f + "'");
  return *fmt;
}

nb::dict checkpoint_to_py(const Checkpoint& c, const std::string& framework, bool with_root) {
  nb::dict d;
  d["format"] = std::string(format_name(c.format));
  d["file"] = c.file;
  if (with_root) {
    ToPy conv;
    conv.framework = framework;
    d["root"] = conv.convert(c.root);
  }
  nb::list meta, facts, globals;
  auto text = py_text;
  for (const auto& [k, v] : c.metadata) meta.append(nb::make_tuple(text(k), text(v)));
  for (const auto& f : c.facts) facts.append(nb::make_tuple(text(f.topic), text(f.where), text(f.value)));
  for (const auto& g : c.globals) globals.append(nb::make_tuple(text(g.module), text(g.name), text(g.where)));
  d["metadata"] = meta;
  d["facts"] = facts;
  d["globals"] = globals;
  return d;
}

WriteOptions write_options(const std::vector<std::pair<std::string, std::string>>& metadata, unsigned threads,
                           bool empty_metadata = false) {
  WriteOptions o;
  o.metadata = metadata;
  o.empty_metadata = empty_metadata;
  o.threads = threads;
  return o;
}

// Python's limits= as (name, value) pairs over the defaults (tensorseal.limits).
using LimitPairs = std::vector<std::pair<std::string, std::uint64_t>>;

Limits limits_of(const LimitPairs& pairs) {
  Limits l;
  for (const auto& [k, v] : pairs) set_limit(l, k, v);
  return l;
}

ReadOptions read_options(const LimitPairs& limits, bool verify = true) {
  ReadOptions o;
  o.limits = limits_of(limits);
  o.verify_checksums = verify;
  return o;
}

// The rules Python code raises (tensorseal.errors.error): the C++ side defines every
// rule id, Python only picks one.
constexpr Rule kPythonRules[] = {rules::kInvalidArgument};


nb::dict tensors_to_py(const Checkpoint& c, const std::string& framework) {
  nb::dict d = checkpoint_to_py(c, framework, false);
  ToPy conv;
  conv.framework = framework;
  nb::list tensors;
  for (const auto& ref : collect_tensors(c.root)) {
    const Tensor& t = *ref.tensor;
    const std::uint64_t at = t.storage->file_offset() + static_cast<std::uint64_t>(t.storage_offset) * itemsize(t.dtype);
    tensors.append(nb::make_tuple(ref.path, conv.tensor(t), std::string(name(t.dtype)), at));
  }
  d["tensors"] = tensors;
  return d;
}

// A path (str / os.PathLike, already fspath'd by the caller into a str) is read from
// disk; anything else is an in-memory object converted like save() does.
Checkpoint checkpoint_of(nb::handle obj, const std::string& name, const ReadOptions& options) {
  if (PyUnicode_Check(obj.ptr())) {
    std::string path = nb::cast<std::string>(obj);
    nb::gil_scoped_release nogil;
    return read_file(path, options);
  }
  FromPy conv;
  Checkpoint c;
  c.file = name;
  c.root = conv.convert(obj);
  return c;
}

// A list of str built in one pass (10,000 tensor names: no per-item append).
nb::list names_to_py(const SafetensorsIndex& idx, const std::vector<std::uint32_t>& order) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(order.size()));
  if (list == nullptr) throw nb::python_error();
  nb::list out = nb::steal<nb::list>(list);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::string& n = idx.entries[order[i]].name;
    PyObject* s = PyUnicode_DecodeUTF8(n.data(), static_cast<Py_ssize_t>(n.size()), "surrogateescape");
    if (s == nullptr) throw nb::python_error();
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), s);
  }
  return out;
}

// ---- tensorseal.dcp: plain tuples <-> the DCP records (tensorseal/dcp/_core glue) ----

using Ints = std::vector<std::int64_t>;

DType dtype_arg(const std::string& n) {
  auto t = dtype_from_name(n);
  if (!t) throw Error(rules::kInvalidArgument, "unknown dtype '" + n + "'", "");
  return *t;
}

nb::object opt_ints(const std::optional<Ints>& v) { return v ? nb::cast(*v) : nb::none(); }
std::optional<Ints> ints_arg(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return nb::cast<Ints>(h);
}

// (fqn, offsets | None, sizes, dtype, file, offset, length, checksum, digest)
nb::tuple record_to_py(const DcpRecord& r) {
  return nb::make_tuple(r.fqn, opt_ints(r.offsets), r.sizes, std::string(name(r.dtype)), r.storage.relative_path,
                        r.storage.offset, r.storage.length, r.checksum, r.digest);
}
DcpRecord record_from_py(nb::handle h) {
  nb::tuple t = nb::cast<nb::tuple>(h);
  DcpRecord r;
  r.fqn = nb::cast<std::string>(t[0]);
  r.offsets = ints_arg(t[1]);
  r.sizes = nb::cast<Ints>(t[2]);
  r.dtype = dtype_arg(nb::cast<std::string>(t[3]));
  r.storage = {nb::cast<std::string>(t[4]), nb::cast<std::uint64_t>(t[5]), nb::cast<std::uint64_t>(t[6])};
  r.checksum = nb::cast<std::string>(t[7]);
  r.digest = nb::cast<std::string>(t[8]);
  return r;
}

// (fqn, is_tensor, dtype, requires_grad, pin_memory, memory_format, size,
//  [(offsets, sizes)], path tuple | None)
nb::tuple entry_to_py(const DcpEntry& e) {
  nb::list chunks;
  for (const auto& c : e.chunks) chunks.append(nb::make_tuple(c.offsets, c.sizes));
  nb::object path = nb::none();
  if (!e.path.empty()) {
    nb::list p;
    for (const auto& x : e.path)
      p.append(x.is(Value::Kind::kStr) ? nb::object(py_text(x.as_str())) : nb::object(nb::int_(x.as_int())));
    path = nb::tuple(p);
  }
  return nb::make_tuple(e.fqn, e.is_tensor, std::string(name(e.dtype)), e.requires_grad, e.pin_memory, e.memory_format,
                        e.size, chunks, path);
}
DcpEntry entry_from_py(nb::handle h) {
  nb::tuple t = nb::cast<nb::tuple>(h);
  DcpEntry e;
  e.fqn = nb::cast<std::string>(t[0]);
  e.is_tensor = nb::cast<bool>(t[1]);
  if (e.is_tensor) e.dtype = dtype_arg(nb::cast<std::string>(t[2]));
  e.requires_grad = nb::cast<bool>(t[3]);
  e.pin_memory = nb::cast<bool>(t[4]);
  e.memory_format = nb::cast<std::int64_t>(t[5]);
  e.size = nb::cast<Ints>(t[6]);
  for (nb::handle c : nb::cast<nb::list>(t[7])) {
    nb::tuple ct = nb::cast<nb::tuple>(c);
    e.chunks.push_back({nb::cast<Ints>(ct[0]), nb::cast<Ints>(ct[1])});
  }
  if (!t[8].is_none())
    for (nb::handle x : t[8]) {
      if (nb::isinstance<nb::str>(x)) e.path.push_back(Value::str(nb::cast<std::string>(x)));
      else if (nb::isinstance<nb::int_>(x)) e.path.push_back(Value(nb::cast<std::int64_t>(x)));
      else throw Error(rules::kInvalidArgument, "planner_data path of '" + e.fqn + "' holds a " +
                                                        nb::cast<std::string>(nb::str(x.type())), "");
    }
  return e;
}

}  // namespace

NB_MODULE(_tensorseal, m) {
  m.doc() = "tensorseal C++ core (use the tensorseal package, not this module)";
  m.attr("__version__") = kVersion;

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      nb::object errors = nb::module_::import_("tensorseal.errors");
      nb::object cls = errors.attr("class_for_kind")(std::string(kind_name(e.kind())));
      nb::object offset = e.offset() == kNoOffset ? nb::none() : nb::cast(e.offset());
      nb::object exc = cls(std::string(e.what()), e.rule(), e.file(), offset, e.detail());
      PyErr_SetObject(cls.ptr(), exc.ptr());
    }
  });

  // weights_only: raise (require_safe) when the file references a global outside the
  // known-safe set, before any object is made.
  m.def("read_file", [](const std::string& path, const std::string& framework, bool verify, bool with_root,
                        bool weights_only, const LimitPairs& limits) {
        Checkpoint c;
        {
          nb::gil_scoped_release nogil;
          c = read_file(path, read_options(limits, verify));
          if (weights_only) require_safe(scan(c));
        }
        return checkpoint_to_py(c, framework, with_root);
      }, nb::arg("path"), nb::arg("framework") = "torch", nb::arg("verify") = true, nb::arg("with_root") = true,
      nb::arg("weights_only") = false, nb::arg("limits") = LimitPairs{});

  // The tensors of a file as a flat list of (path, tensor, dtype, file offset), paths as
  // in collect_tensors (for safetensors files: the tensor names). Zero-copy like read_file.
  m.def("read_tensors", [](const std::string& path, const std::string& framework, const LimitPairs& limits) {
        Checkpoint c;
        {
          nb::gil_scoped_release nogil;
          c = read_file(path, read_options(limits));
        }
        return tensors_to_py(c, framework);
      }, nb::arg("path"), nb::arg("framework") = "torch", nb::arg("limits") = LimitPairs{});

  // Lazy access to a safetensors file (tensorseal.safetensors.safe_open): the header
  // parsed and validated, the file mapped, a tensor made on request.
  nb::class_<SafetensorsIndex>(m, "SafetensorsIndex")
      .def("__len__", [](const SafetensorsIndex& idx) { return idx.entries.size(); })
      .def("keys", [](const SafetensorsIndex& idx) { return names_to_py(idx, idx.by_name); },
           "Tensor names, sorted (bytewise = code point order).")
      .def("offset_keys", [](const SafetensorsIndex& idx) {
             std::vector<std::uint32_t> order = idx.by_name;  // by (data offset, name)
             std::stable_sort(order.begin(), order.end(),
                              [&](std::uint32_t a, std::uint32_t b) { return idx.entries[a].begin < idx.entries[b].begin; });
             return names_to_py(idx, order);
           }, "Tensor names in the order of their data in the file.")
      .def("metadata", [](const SafetensorsIndex& idx) {
             nb::list out;
             for (const auto& [k, v] : idx.metadata)
               out.append(nb::make_tuple(py_text(k), py_text(v)));
             return out;
           }, "__metadata__ as (key, value) pairs in file order.")
      .def("has_metadata", [](const SafetensorsIndex& idx) {
             return idx.metadata_position != SafetensorsIndex::kAbsent && !idx.metadata_null;
           }, "True when the header holds a __metadata__ object (possibly empty); false when absent or null.")
      .def("structured", &SafetensorsIndex::structured,
           "A whole checkpoint written by tensorseal (read it with read_tensors to get its tree).")
      .def("tensor", [](const SafetensorsIndex& idx, const std::string& key, const std::string& framework) -> nb::object {
             const SafetensorsEntry* e = idx.find(key);
             if (e == nullptr) return nb::none();
             auto t = idx.tensor(*e);
             ToPy conv;
             conv.framework = framework;
             return nb::make_tuple(conv.tensor(*t), std::string(name(e->dtype)));
           }, nb::arg("name"), nb::arg("framework") = "torch",
           "(tensor, dtype name) of one entry, a zero-copy view of the mapping; None when absent.");

  // The index of a safetensors file, or None when the file is another format.
  m.def("safetensors_index", [](const std::string& path) -> std::optional<SafetensorsIndex> {
        nb::gil_scoped_release nogil;
        auto file = MappedFile::open(path);
        if (detect_format(file->bytes()) != Format::kSafetensors) return std::nullopt;
        return read_safetensors_index(std::move(file));
      }, nb::arg("path"));

  m.def("read_bytes_tensors", [](nb::bytes data, const std::string& name, const std::string& framework,
                                 const LimitPairs& limits) {
        std::span<const std::byte> b(reinterpret_cast<const std::byte*>(data.c_str()), data.size());
        Checkpoint c;
        {
          nb::gil_scoped_release nogil;
          c = read_bytes(b, name, read_options(limits));
        }
        return tensors_to_py(c, framework);
      }, nb::arg("data"), nb::arg("name") = "<bytes>", nb::arg("framework") = "torch", nb::arg("limits") = LimitPairs{});

  m.def("read_bytes", [](nb::bytes data, const std::string& name, const std::string& framework, bool weights_only,
                         const LimitPairs& limits) {
        std::span<const std::byte> b(reinterpret_cast<const std::byte*>(data.c_str()), data.size());
        Checkpoint c;
        {
          nb::gil_scoped_release nogil;  // `data` is immutable and held by the caller
          c = read_bytes(b, name, read_options(limits));
          if (weights_only) require_safe(scan(c));
        }
        return checkpoint_to_py(c, framework, true);
      }, nb::arg("data"), nb::arg("name") = "<bytes>", nb::arg("framework") = "torch", nb::arg("weights_only") = false,
      nb::arg("limits") = LimitPairs{});

  m.def("write_file", [](nb::handle obj, const std::string& path, const std::string& format,
                         const std::vector<std::pair<std::string, std::string>>& metadata, unsigned threads,
                         bool split_storages, bool empty_metadata, std::uint64_t max_shard_size,
                         std::uint32_t world_size) {
        FromPy conv;
        conv.split_storages = split_storages;
        Value root = conv.convert(obj);
        Format f = parse_format(format);
        WriteOptions o = write_options(metadata, threads, empty_metadata);
        o.max_shard_size = max_shard_size;
        o.world_size = world_size;
        nb::gil_scoped_release nogil;
        write_file(root, path, f, o);
      }, nb::arg("obj"), nb::arg("path"), nb::arg("format"), nb::arg("metadata") = std::vector<std::pair<std::string, std::string>>{},
      nb::arg("threads") = 0, nb::arg("split_storages") = false, nb::arg("empty_metadata") = false,
      nb::arg("max_shard_size") = 0, nb::arg("world_size") = 0);

  m.def("parse_shard_size", [](const std::string& text) { return parse_shard_size(text); });

  m.def("write_bytes", [](nb::handle obj, const std::string& format,
                          const std::vector<std::pair<std::string, std::string>>& metadata, unsigned threads,
                          bool split_storages, bool empty_metadata) {
        FromPy conv;
        conv.split_storages = split_storages;
        Value root = conv.convert(obj);
        Format f = parse_format(format);
        std::string out;
        {
          nb::gil_scoped_release nogil;
          out = write_bytes(root, f, write_options(metadata, threads, empty_metadata));
        }
        return nb::bytes(out.data(), out.size());
      }, nb::arg("obj"), nb::arg("format"), nb::arg("metadata") = std::vector<std::pair<std::string, std::string>>{},
      nb::arg("threads") = 0, nb::arg("split_storages") = false, nb::arg("empty_metadata") = false);

  m.def("hash_file", [](const std::string& path, bool fast, unsigned threads, const LimitPairs& limits) {
        HashOptions o;
        o.algo = fast ? HashAlgo::kXxh3 : HashAlgo::kSha256;
        o.threads = threads;
        o.limits = limits_of(limits);
        nb::gil_scoped_release nogil;
        return hash_file(path, o);  // = content_hash(read_file(path).root), zip CRCs fused into the pass
      }, nb::arg("path"), nb::arg("fast") = false, nb::arg("threads") = 0, nb::arg("limits") = LimitPairs{});

  m.def("hash_object", [](nb::handle obj, bool fast, unsigned threads) {
        FromPy conv;
        Value root = conv.convert(obj);
        nb::gil_scoped_release nogil;
        HashOptions o;
        o.algo = fast ? HashAlgo::kXxh3 : HashAlgo::kSha256;
        o.threads = threads;
        return content_hash(root, o);
      }, nb::arg("obj"), nb::arg("fast") = false, nb::arg("threads") = 0);

  // Tools: each returns exactly what the CLI prints with --json (the library's own
  // renderers), so Python and CLI results agree by construction.
  m.def("inspect_json", [](const std::string& path, unsigned threads, const LimitPairs& limits) {
        InspectOptions o;
        o.threads = threads;
        o.limits = limits_of(limits);
        nb::gil_scoped_release nogil;
        return to_json(inspect_file(path, o));
      }, nb::arg("path"), nb::arg("threads") = 0, nb::arg("limits") = LimitPairs{});

  m.def("is_canonical", [](const std::string& path, unsigned threads, const LimitPairs& limits) {
        CanonCheckOptions o;
        o.threads = threads;
        o.limits = limits_of(limits);
        nb::gil_scoped_release nogil;
        return check_canonical_file(path, o).canonical;  // == tseal canon --check
      }, nb::arg("path"), nb::arg("threads") = 0, nb::arg("limits") = LimitPairs{});

  m.def("diff_json", [](nb::handle a, nb::handle b, const std::string& name_a, const std::string& name_b,
                        double atol, double rtol, std::uint64_t ulp, unsigned threads, const std::string& report,
                        const LimitPairs& limits) {
        const ReadOptions ro = read_options(limits);
        Checkpoint ca = checkpoint_of(a, name_a, ro);
        Checkpoint cb = checkpoint_of(b, name_b, ro);
        nb::gil_scoped_release nogil;
        DiffOptions o;
        o.atol = atol;
        o.rtol = rtol;
        o.ulp = ulp;
        o.threads = threads;
        o.histogram = !report.empty();
        const DiffReport r = diff(ca, cb, o);
        if (!report.empty()) write_html_report(r, report);
        return to_json(r);
      }, nb::arg("a"), nb::arg("b"), nb::arg("name_a"), nb::arg("name_b"), nb::arg("atol") = 0.0,
      nb::arg("rtol") = 0.0, nb::arg("ulp") = 0, nb::arg("threads") = 0, nb::arg("report") = "",
      nb::arg("limits") = LimitPairs{});

  m.def("explain_json", [](nb::handle a, nb::handle b, const std::string& name_a, const std::string& name_b,
                           const LimitPairs& limits) {
        const ReadOptions ro = read_options(limits);
        Checkpoint ca = checkpoint_of(a, name_a, ro);
        Checkpoint cb = checkpoint_of(b, name_b, ro);
        nb::gil_scoped_release nogil;
        return to_json(explain(ca, cb));
      }, nb::arg("a"), nb::arg("b"), nb::arg("name_a"), nb::arg("name_b"), nb::arg("limits") = LimitPairs{});

  m.def("verify_json", [](const std::vector<std::string>& paths, unsigned threads, const LimitPairs& limits) {
        VerifyOptions o;
        o.threads = threads;
        o.limits = limits_of(limits);
        nb::gil_scoped_release nogil;
        std::vector<VerifyResult> results;
        for (const auto& p : paths) results.push_back(verify_file(p, o));
        return to_json(results);
      }, nb::arg("paths"), nb::arg("threads") = 0, nb::arg("limits") = LimitPairs{});

  m.def("scan_json", [](const std::string& path, const LimitPairs& limits) {
        const ReadOptions ro = read_options(limits);
        nb::gil_scoped_release nogil;
        return to_json(scan_file(path, ro));
      }, nb::arg("path"), nb::arg("limits") = LimitPairs{});

  // The Limits fields with their defaults, in declaration order: (name, value).
  // tensorseal.dcp (python/tensorseal/dcp.py): the storage plugin's core.
  m.def("dcp_staging_dir", [](const std::string& target) { return dcp_staging_dir(target).string(); });
  m.def("dcp_prepare", [](const std::string& target, bool overwrite) {
        nb::gil_scoped_release nogil;
        dcp_prepare(target, overwrite);
      }, nb::arg("target"), nb::arg("overwrite"));
  // items: [(fqn, offsets | None, tensor | bytes)]; returns record tuples.
  m.def("dcp_write_items", [](const std::string& target, std::uint32_t rank, nb::list items, bool one_file, bool fsync,
                              unsigned threads) {
        std::vector<DcpWriteItem> in;
        FromPy conv;
        for (nb::handle h : items) {
          nb::tuple t = nb::cast<nb::tuple>(h);
          DcpWriteItem it;
          it.fqn = nb::cast<std::string>(t[0]);
          it.offsets = ints_arg(t[1]);
          if (nb::isinstance<nb::bytes>(t[2])) {
            nb::bytes b = nb::cast<nb::bytes>(t[2]);
            it.value = Value::bytes(std::string(b.c_str(), b.size()));
          } else {
            it.value = conv.convert(t[2]);
          }
          in.push_back(std::move(it));
        }
        WriteOptions o;
        o.fsync = fsync;
        o.threads = threads;
        std::vector<DcpRecord> out;
        {
          nb::gil_scoped_release nogil;
          out = dcp_write_items(target, rank, std::move(in), one_file, o);
        }
        nb::list l;
        for (const auto& r : out) l.append(record_to_py(r));
        return l;
      }, nb::arg("target"), nb::arg("rank"), nb::arg("items"), nb::arg("one_file"), nb::arg("fsync"),
      nb::arg("threads") = 1);
  m.def("dcp_commit", [](const std::string& target, nb::list planned, nb::list records, bool fsync) {
        DcpMetadata md;
        for (nb::handle h : planned) md.entries.push_back(entry_from_py(h));
        std::vector<DcpRecord> rs;
        for (nb::handle h : records) rs.push_back(record_from_py(h));
        nb::gil_scoped_release nogil;
        dcp_commit(target, md, std::move(rs), fsync);
      }, nb::arg("target"), nb::arg("planned"), nb::arg("records"), nb::arg("fsync"));

  nb::class_<DcpReader>(m, "DcpReader")
      .def("__init__", [](DcpReader* self, const std::string& dir, const LimitPairs& limits) {
             ReadOptions o = read_options(limits);
             nb::gil_scoped_release nogil;
             new (self) DcpReader(dir, o);
           }, nb::arg("dir"), nb::arg("limits") = LimitPairs{})
      .def("has_manifest", &DcpReader::has_manifest)
      // (entries, storage [(fqn, offset | None, index | None, file, file offset, length)],
      //  save_id, checkpoint_id, version)
      .def("metadata", [](const DcpReader& r) {
             const DcpMetadata& md = r.metadata();
             nb::list entries, storage;
             for (const auto& e : md.entries) entries.append(entry_to_py(e));
             for (const auto& s : md.storage_order)
               storage.append(nb::make_tuple(s.fqn, opt_ints(s.offset), s.index ? nb::cast(*s.index) : nb::none(),
                                             s.storage.relative_path, s.storage.offset, s.storage.length));
             auto opt = [](const std::optional<std::string>& v) { return v ? nb::cast(*v) : nb::none(); };
             return nb::make_tuple(entries, storage, opt(md.save_id), opt(md.checkpoint_id), opt(md.version));
           })
      .def("chunk", [](DcpReader& r, const std::string& fqn, const Ints& offsets, const std::string& framework) {
             std::shared_ptr<const Tensor> t;
             {
               nb::gil_scoped_release nogil;
               t = r.chunk(fqn, offsets);
             }
             ToPy conv;
             conv.framework = framework;
             return conv.tensor(*t);
           }, nb::arg("fqn"), nb::arg("offsets"), nb::arg("framework") = "torch")
      .def("bytes_item", [](DcpReader& r, const std::string& fqn, bool weights_only) {
             std::string b;
             {
               nb::gil_scoped_release nogil;
               b = r.bytes_item(fqn, weights_only);
             }
             return nb::bytes(b.data(), b.size());
           }, nb::arg("fqn"), nb::arg("weights_only") = true);

  m.def("limit_defaults", []() {
        std::vector<std::pair<std::string, std::uint64_t>> out;
        const Limits defaults;
        for (const auto name : limit_names()) out.emplace_back(std::string(name), get_limit(defaults, name));
        return out;
      });

  // (kind name, one-line message) of an error raised by Python code, rendered by
  // Error::what() so that it reads exactly like the errors raised here.
  m.def("error_parts", [](const std::string& rule, const std::string& detail, const std::string& file,
                          std::optional<std::uint64_t> offset) {
        for (const Rule& r : kPythonRules) {
          if (r.id != rule) continue;
          const Error e(r, detail, file, offset.value_or(kNoOffset));
          return nb::make_tuple(std::string(kind_name(e.kind())), std::string(e.what()));
        }
        throw Error(rules::kInternal, "Python raised an error with an undeclared rule '" + rule + "'");
      }, nb::arg("rule"), nb::arg("detail"), nb::arg("file") = "", nb::arg("offset") = nb::none());

  m.def("classify_global", [](const std::string& module, const std::string& name) {
        std::string reason;
        Verdict v = classify_global(module, name, &reason);
        return nb::make_tuple(std::string(verdict_name(v)), reason);
      }, nb::arg("module"), nb::arg("name"));

  m.def("detect_format", [](nb::bytes head) {
        return std::string(format_name(detect_format({reinterpret_cast<const std::byte*>(head.c_str()), head.size()})));
      });
  m.def("format_for_extension", [](const std::string& path) { return std::string(format_name(format_for_extension(path))); });
  m.def("formats", []() {
        nb::list out;
        for (const auto& f : formats()) {
          nb::list aliases, extensions;
          for (auto a : f.aliases) aliases.append(std::string(a));
          for (auto e : f.extensions) extensions.append(std::string(e));
          nb::dict d;
          d["name"] = std::string(f.name);
          d["aliases"] = aliases;
          d["extensions"] = extensions;
          d["description"] = std::string(f.description);
          d["writable"] = f.writable;
          d["canonical"] = std::string(format_name(f.canonical));
          d["directory"] = f.directory;
          out.append(d);
        }
        return out;
      });
  m.def("dtypes", []() {
        nb::list out;
        for (const auto& d : all_dtypes())
          out.append(nb::make_tuple(std::string(d.name), d.bits, std::string(d.safetensors), std::string(d.numpy)));
        return out;
      });
}
