// Conversions between Python objects and the value tree, shared by the binding's
// translation units (module.cc, dcp.cc). Tensor data is never copied: C++ -> Python
// hands out views of the storages, Python -> C++ borrows the tensors' memory.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <tensorseal/tensorseal.h>

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

// Header-only internals (no library symbols: anything else would not link, the
// library's are hidden).
#include "util/ptr_map.h"

namespace tensorseal::py {
namespace nb = nanobind;
using detail::util::PtrMap;

inline nb::object glue() { return nb::module_::import_("tensorseal._glue"); }

// Text the core hands out is UTF-8, except names taken from a damaged container (zip
// member names, facts quoting file bytes): one policy everywhere, surrogateescape,
// which never fails and keeps every byte (str.encode("utf-8", "surrogateescape")).
inline nb::str py_text(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (o == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

// ---- C++ -> Python --------------------------------------------------------------

struct ToPy {
  nb::object g = glue();
  std::string framework;                                // "torch" or "numpy"
  std::unordered_map<const void*, nb::object> nodes;    // shared nodes stay shared
  std::unordered_map<const Storage*, nb::object> bufs;  // one buffer per storage
  std::unordered_set<const void*> in_progress;          // tuples, frozensets, objects' arguments
  int depth = 0;

  // The alignment the framework needs for `dtype`'s elements: torch's kernels assume the
  // item size (its complex types are alignas(2 * sizeof(part)): complex128 needs 16, and
  // a misaligned one crashed its copy kernel); numpy checks alignment itself and handles
  // misaligned arrays correctly, so numpy arrays stay zero-copy views.
  std::uintptr_t alignment(DType dtype) const {
    return framework == "torch" ? std::clamp<std::uintptr_t>(itemsize(dtype), 1, 16) : 1;
  }

  // A uint8 numpy array over the storage's bytes, keeping the storage alive. When the
  // bytes are not `align`-aligned (a record mapped at an odd file offset: the legacy
  // format, an np.savez member after its zip header), they are copied into an owned
  // buffer (new aligns it to 16). Aligned mappings stay zero-copy.
  static nb::object raw_array(std::shared_ptr<const Storage> s, std::uintptr_t align) {
    if (reinterpret_cast<std::uintptr_t>(s->bytes().data()) % align != 0)
      s = Storage::owned(std::vector<std::byte>(s->bytes().begin(), s->bytes().end()), s->dtype);
    auto* keep = new std::shared_ptr<const Storage>(s);
    nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<const Storage>*>(p); });
    // The memory is a private copy-on-write mapping or an owned buffer: writes from
    // Python never reach the file.
    auto* data = const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(s->bytes().data()));
    std::size_t shape[1] = {static_cast<std::size_t>(s->size())};
    return nb::cast(nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>(data, 1, shape, owner));
  }

  // `align`: what the first user of the storage needs (alignment() of its dtype).
  nb::object buffer(const std::shared_ptr<const Storage>& s, std::uintptr_t align) {
    auto it = bufs.find(s.get());
    if (it != bufs.end()) return it->second;
    // One framework storage object per Storage, so tensors sharing bytes in the file
    // share one storage after loading (tied weights stay tied).
    nb::object wrapped = g.attr("wrap_buffer")(framework, raw_array(s, align));
    bufs.emplace(s.get(), wrapped);
    return wrapped;
  }

  nb::object tensor(const Tensor& t) {
    nb::list shape, strides;
    for (auto d : t.shape) shape.append(d);
    for (auto d : t.strides) strides.append(d);
    if (t.quantization) {
      const Quantization& q = *t.quantization;
      return g.attr("make_qtensor")(framework, buffer(t.storage, alignment(t.dtype)), std::string(name(t.dtype)),
                                    nb::tuple(shape), nb::tuple(strides), t.storage_offset, t.requires_grad,
                                    t.is_parameter, std::string(scheme_name(q.scheme)), q.scale, q.zero_point,
                                    q.scales ? tensor(*q.scales) : nb::none(),
                                    q.zero_points ? tensor(*q.zero_points) : nb::none(), q.axis);
    }
    if (t.numpy != NumpyType::kNone)  // a numpy object stays one, whatever the framework
      return g.attr("make_numpy")(raw_array(t.storage, 1), std::string(name(t.dtype)), nb::tuple(shape),
                                  nb::tuple(strides), t.storage_offset, t.numpy == NumpyType::kScalar);
    // A conj/neg view becomes torch's lazy view over the raw storage, shared with its
    // base; numpy has no such views and gets the values.
    const bool lazy = t.lazy && framework == "torch";
    nb::object out =
        g.attr("make_tensor")(framework, buffer(lazy ? t.lazy->raw : t.storage, alignment(t.dtype)),
                              std::string(name(t.dtype)), nb::tuple(shape), nb::tuple(strides), t.storage_offset,
                              t.requires_grad, t.is_parameter, lazy && t.lazy->neg, lazy && t.lazy->conj);
    if (t.attributes) out = g.attr("set_attributes")(out, convert(*t.attributes));
    return out;
  }

  // A tensor torch rebuilds from other tensors (tensorseal/composite.h), from the
  // record the core decoded and the reader checked: the glue only calls torch's
  // constructors. None keeps the call an ordinary object (numpy has no such tensors).
  nb::object composite(const Composite& c) {
    nb::dict parts;
    for (const auto& [role, t] : c.parts) parts[nb::str(role.c_str())] = convert(Value(t));
    nb::list shape, stride;
    for (auto d : c.shape) shape.append(d);
    for (auto d : c.stride) stride.append(d);
    return g.attr("make_composite")(framework, c.layout, std::string(name(c.dtype)), nb::tuple(shape), parts,
                                    c.coalesced ? convert(*c.coalesced) : nb::none(), c.requires_grad, c.ragged_idx,
                                    convert(c.metadata_cache), convert(c.state),
                                    nb::make_tuple(c.type.module, c.type.name), nb::tuple(stride), c.storage_offset,
                                    convert(c.layout_arg), convert(c.device),
                                    c.parameter ? nb::cast(*c.parameter) : nb::none(), convert(c.attributes));
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
      case K::kNone:
        return nb::none();
      case K::kBool:
        return nb::bool_(v.as_bool());
      case K::kInt:
        return nb::int_(v.as_int());
      case K::kBigInt: {
        const auto& b = v.as_bigint().le_bytes;
        return nb::module_::import_("builtins")
            .attr("int")
            .attr("from_bytes")(nb::bytes(b.data(), b.size()), "little", nb::arg("signed") = true);
      }
      case K::kFloat:
        return nb::float_(v.as_float());
      case K::kComplex:
        return nb::steal(PyComplex_FromDoubles(v.as_complex().real, v.as_complex().imag));
      case K::kStr:
        return py_text(v.as_str());
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
      case K::kTuple: {
        // A Ref inside the items may build this tuple first (a recursive tuple, as
        // CPython's unpickler meets it): then that one is the tuple.
        const bool outer = in_progress.insert(node).second;
        nb::list items = nb::borrow<nb::list>(seq(v.items()));
        if (outer) in_progress.erase(node);
        if (auto it = nodes.find(node); it != nodes.end()) return it->second;
        out = nb::tuple(items);
        break;
      }
      case K::kSet: {
        if (v.as_set().frozen) {
          if (!in_progress.insert(node).second)
            throw Error(rules::kUnsupportedValue, "a frozenset that contains itself");
          nb::object items = seq(v.as_set().items);
          in_progress.erase(node);
          out = nb::module_::import_("builtins").attr("frozenset")(items);
          break;
        }
        nb::object set = nb::module_::import_("builtins").attr("set")();
        nodes.emplace(node, set);  // register first: an item may refer back to the set
        for (const auto& x : v.as_set().items) set.attr("add")(convert(x));
        return set;
      }
      case K::kRef: {
        // An edge back to an enclosing node, converted by now unless it is a tuple or
        // frozenset still collecting its items, or an object's constructor arguments.
        const Value target = v.ref_target();
        if (target.is_none()) throw Error(rules::kInternal, "a recursive reference whose target no longer exists");
        if (!target.is(K::kTuple) && in_progress.count(node))
          throw Error(rules::kUnsupportedValue, "a recursive reference into an object's constructor arguments");
        return convert(target);
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
      case K::kTensor:
        out = tensor(*v.as_tensor());
        break;
      case K::kStorage:
        out = buffer(v.as_storage(), alignment(v.as_storage()->dtype));
        break;  // untyped: the element type is not kept
      case K::kGlobal:
        out = g.attr("make_global")(v.as_global().module, v.as_global().name);
        break;
      case K::kObject: {
        const Object& o = v.as_object();
        if (auto c = framework == "torch" ? decode_composite(o) : std::nullopt) {
          out = composite(*c);
          if (!out.is_none()) {
            nodes.emplace(node, out);
            return out;
          }
        }
        // The callable and arguments come first (the object does not exist before
        // them); then the object is registered, so its state and items may refer to it.
        auto opt = [&](const std::shared_ptr<Value>& p) { return p ? convert(*p) : nb::none(); };
        in_progress.insert(node);
        nb::object callable = opt(o.callable), args = opt(o.args), kwargs = opt(o.kwargs);
        in_progress.erase(node);
        nb::object placeholder = g.attr("new_opaque")();
        nodes.emplace(node, placeholder);
        nb::list litems;
        for (const auto& x : o.list_items) litems.append(convert(x));
        nb::list ditems;
        for (const auto& [k, x] : o.dict_items) ditems.append(nb::make_tuple(convert(k), convert(x)));
        out = g.attr("make_object")(callable, args, kwargs, static_cast<int>(o.how),
                                    o.state ? convert(*o.state) : nb::none(), o.state != nullptr, litems, ditems,
                                    placeholder);
        nodes[node] = out;
        return out;
      }
    }
    if (shareable) nodes.emplace(node, out);
    return out;
  }
};

// ---- Python -> C++ --------------------------------------------------------------

// Keeps a Python object alive from C++; releases it under the GIL.
inline std::shared_ptr<const void> hold(nb::object o) {
  struct Held {
    nb::object o;
    ~Held() {
      nb::gil_scoped_acquire gil;
      o.reset();
    }
  };
  return std::make_shared<const Held>(Held{std::move(o)});  // one allocation
}

// Python objects a converted tree borrows memory from (tensors' storages, arrays),
// kept alive together: a Storage holds one reference to the set instead of a holder
// of its own; the set releases them under the GIL when the last Storage goes.
class Pins {
 public:
  Pins() = default;
  Pins(const Pins&) = delete;
  Pins& operator=(const Pins&) = delete;
  ~Pins() {
    if (objects_.empty()) return;  // (released: no GIL needed, on whatever thread)
    nb::gil_scoped_acquire gil;
    release();
  }
  void add(nb::object o) { objects_.push_back(o.release().ptr()); }
  void reserve(std::size_t more) {
    if (objects_.capacity() < objects_.size() + more)
      objects_.reserve(std::max(2 * objects_.capacity(), objects_.size() + more));
  }
  // Releases every object now, with the GIL held: only once nothing will read the
  // memory they lend again.
  void release() {
    for (PyObject* o : objects_) Py_DECREF(o);
    objects_.clear();
    objects_.shrink_to_fit();
  }

 private:
  std::vector<PyObject*> objects_;
};

// Memory for the Tensors of one conversion (10,000 in a large state dict): carved from
// 64 KiB blocks and released together when the last of them goes, instead of a malloc
// and a free each. Used from the converting thread only; released from any.
class TensorArena {
 public:
  TensorArena() = default;
  TensorArena(const TensorArena&) = delete;
  TensorArena& operator=(const TensorArena&) = delete;
  ~TensorArena() {
    for (void* b : blocks_) ::operator delete(b);
  }
  void* take(std::size_t n, std::size_t align) {
    std::size_t pad = (align - reinterpret_cast<std::uintptr_t>(at_) % align) % align;
    if (at_ == nullptr || pad + n > left_) {
      const std::size_t size = std::max<std::size_t>(kBlock, n + align);
      blocks_.push_back(::operator new(size));
      at_ = static_cast<std::byte*>(blocks_.back());
      left_ = size;
      pad = (align - reinterpret_cast<std::uintptr_t>(at_) % align) % align;
    }
    void* p = at_ + pad;
    at_ += pad + n;
    left_ -= pad + n;
    return p;
  }

 private:
  static constexpr std::size_t kBlock = std::size_t{64} << 10;
  std::vector<void*> blocks_;
  std::byte* at_ = nullptr;
  std::size_t left_ = 0;
};

// std::allocate_shared's allocator over a TensorArena: each block it makes holds the
// arena; freeing a block is a no-op.
template <typename T>
struct ArenaAllocator {
  using value_type = T;
  std::shared_ptr<TensorArena> arena;
  explicit ArenaAllocator(std::shared_ptr<TensorArena> a) : arena(std::move(a)) {}
  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& o) : arena(o.arena) {}
  T* allocate(std::size_t n) { return static_cast<T*>(arena->take(n * sizeof(T), alignof(T))); }
  void deallocate(T*, std::size_t) noexcept {}
  template <typename U>
  bool operator==(const ArenaAllocator<U>& o) const noexcept {
    return arena == o.arena;
  }
};

// Frees `garbage` on a helper thread, off the caller's path: the value tree of a
// finished save (10,000 tensors are tens of thousands of frees, about a tenth of the
// save). One helper at a time; while it runs, later garbage is freed here. Only C++
// data may go (nothing that takes the GIL when destroyed).
inline void free_later(std::shared_ptr<void> garbage) {
  static auto* busy = new std::atomic<bool>(false);  // never destroyed: a helper may outlive exit's destructors
  bool idle = false;
  if (!busy->compare_exchange_strong(idle, true)) return;  // freed here, as `garbage` goes
  try {
    std::thread([g = std::move(garbage)]() mutable {
      g.reset();
      busy->store(false);
    }).detach();
  } catch (const std::system_error&) {
    busy->store(false);  // no thread: freed here
  }
}

// Reads plain torch tensors (exactly torch.Tensor or nn.Parameter, on the CPU, strided,
// not quantized, nested, conjugated or negated, no attributes) with direct attribute
// calls instead of the glue's classify(): the same fields, a few hundred nanoseconds
// instead of microseconds per tensor (10,000-tensor state dicts). Everything else, and
// everything without torch, goes through classify().
class TorchFastPath {
 public:
  explicit TorchFastPath(nb::handle glue) {
    nb::object spec = glue.attr("torch_fast_path")();
    if (spec.is_none()) return;
    tensor_ = spec[0];
    parameter_ = spec[1];
    strided_ = spec[2];
    for (auto [k, v] : nb::borrow<nb::dict>(spec[3])) {
      // Quantized dtypes stay off the table: a tensor of one is quantized (torch has no
      // other tensors of these dtypes), so the dtype check is also the is_quantized one.
      auto d = dtype_from_name(nb::cast<std::string>(v));
      if (d && (*d < DType::kQInt8 || *d > DType::kQUInt2x4)) dtypes_.emplace_back(k.ptr(), *d);
    }
    keep_ = nb::borrow<nb::dict>(spec[3]);
    storage_type_ = spec[4];
    bind_descriptors();
  }

  // The fields of `h`, or false when it is not such a tensor (nothing is changed then).
  struct Fields {
    DType dtype;
    std::vector<std::int64_t> shape, strides;
    std::int64_t offset;
    bool requires_grad, is_parameter;
    nb::object storage;  // torch.UntypedStorage
    std::uintptr_t ptr;
    std::uint64_t nbytes;
  };
  // Cheapest rejections first: the type, __dict__, the dtype (one table lookup, also
  // excludes quantized tensors), then the flags; is_conj only for complex dtypes (torch
  // sets the conjugate bit on nothing else). Methods go through one vectorcall each
  // (no bound-method object).
  // A plain torch.Tensor's dtype and shape, the first look of a streamed save (the
  // layout; the shape appended to `dims`); false for anything else, Parameters included.
  // Nested tensors are plain torch.Tensors whose shape raises: they are ruled out first.
  bool layout(nb::handle h, DType& dtype, std::vector<std::int64_t>& dims) const {
    if (!tensor_.is_valid() || reinterpret_cast<PyObject*>(Py_TYPE(h.ptr())) != tensor_.ptr()) return false;
    const std::optional<DType> d = dtype_of(get(h, n_.dtype).ptr());
    if (!d || truth(get(h, n_.is_nested))) return false;
    dtype = *d;
    nb::object shape = get(h, n_.shape);
    const Py_ssize_t n = PyTuple_Size(shape.ptr());
    if (n < 0) throw nb::python_error();
    for (Py_ssize_t i = 0; i < n; ++i) dims.push_back(as_int(PyTuple_GetItem(shape.ptr(), i)));
    return true;
  }

  // `known`: the dtype and shape layout() read from `h` (so it is not nested), with no
  // code run since.
  struct Known {
    DType dtype;
    std::span<const std::int64_t> shape;
  };
  bool read(nb::handle h, Fields& f, const Known* known = nullptr) const {
    if (!tensor_.is_valid()) return false;
    PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(h.ptr()));
    const bool param = type == parameter_.ptr();
    if (type != tensor_.ptr() && !param) return false;
    if (nb::object d = n_.dict.descr.is_valid() ? get(h, n_.dict) : nb::getattr(h, n_.dict.name, nb::none());
        !d.is_none() && nb::len(d) != 0)
      return false;
    const std::optional<DType> dtype = known ? known->dtype : dtype_of(get(h, n_.dtype).ptr());
    if (!dtype) return false;
    if (!truth(get(h, n_.is_cpu)) || !get(h, n_.layout).is(strided_) || (!known && truth(get(h, n_.is_nested))) ||
        truth(call(h, n_.is_neg)) || (info(*dtype).kind == DTypeKind::kComplex && truth(call(h, n_.is_conj))))
      return false;
    f.dtype = *dtype;
    if (known)
      f.shape.assign(known->shape.begin(), known->shape.end());
    else
      ints(get(h, n_.shape), f.shape);
    ints(call(h, n_.stride), f.strides);
    f.offset = as_int(call(h, n_.storage_offset));
    f.requires_grad = truth(get(h, n_.requires_grad));
    f.is_parameter = param;
    f.storage = call(h, n_.untyped_storage);
    f.ptr = static_cast<std::uintptr_t>(as_uint(storage_call(f.storage, n_.data_ptr)));
    f.nbytes = as_uint(storage_call(f.storage, n_.nbytes));
    return true;
  }

 private:
  std::optional<DType> dtype_of(PyObject* d) const {
    for (const auto& [k, v] : dtypes_)
      if (k == d) return v;
    return std::nullopt;
  }
  // An attribute of torch.Tensor or torch.UntypedStorage: its name, and the descriptor
  // the name resolves to on the type (set by bind_descriptors()).
  struct Attr {
    nb::str name;
    nb::object descr;
  };
  // o.name: through the getset descriptor when bound (o's type is one the descriptor
  // was resolved on; bound implies descr_get_), else by name.
  nb::object get(nb::handle o, const Attr& a) const {
    PyObject* r = a.descr.is_valid() ? descr_get_(a.descr.ptr(), o.ptr(), reinterpret_cast<PyObject*>(Py_TYPE(o.ptr())))
                                     : PyObject_GetAttr(o.ptr(), a.name.ptr());
    if (r == nullptr) throw nb::python_error();
    return nb::steal(r);
  }
  // o.name(): through the method descriptor when bound, else by name.
  static nb::object call(nb::handle o, const Attr& a) {
    if (!a.descr.is_valid()) return call_by_name(o, a.name);
    PyObject* args[2] = {nullptr, o.ptr()};
    PyObject* r = PyObject_Vectorcall(a.descr.ptr(), args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
    if (r == nullptr) throw nb::python_error();
    return nb::steal(r);
  }
  static nb::object call_by_name(nb::handle o, const nb::str& name) {
    PyObject* args[2] = {nullptr, o.ptr()};
    PyObject* r = PyObject_VectorcallMethod(name.ptr(), args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
    if (r == nullptr) throw nb::python_error();
    return nb::steal(r);
  }

  // Resolves each attribute to the descriptor torch.Tensor's type holds for it, so that
  // a call skips the name lookup (the type's MRO, the instance dict), about 1,500 of
  // the ~11,000 instructions a streamed save spends on each tensor (callgrind). It is
  // the object PyObject_GetAttr would call: read() takes only objects of exactly
  // torch.Tensor or nn.Parameter with an empty __dict__ (nothing shadows a method), and
  // data descriptors come before the instance dict. Bound only where both types resolve
  // a name to the same descriptor of the expected kind (a getset for properties, a C
  // method descriptor for methods); each name that is not stays a lookup by name. The
  // storage's methods are bound likewise, and used only on objects of exactly
  // torch.UntypedStorage. (The getset type's __get__ slot is read with PyType_GetSlot,
  // which static types answer from 3.10, nanobind's minimum.)
  void bind_descriptors() {
    nb::handle getset_type = nb::handle(reinterpret_cast<PyObject*>(&PyLong_Type)).attr("real").type();
    nb::handle method_type = nb::handle(reinterpret_cast<PyObject*>(&PyUnicode_Type)).attr("join").type();
    descr_get_ = reinterpret_cast<descrgetfunc>(
        PyType_GetSlot(reinterpret_cast<PyTypeObject*>(getset_type.ptr()), Py_tp_descr_get));
    if (descr_get_ == nullptr) {
      PyErr_Clear();
      return;
    }
    const auto bind = [&](Attr& a, nb::handle type, nb::handle other, nb::handle kind) {
      PyObject* d = PyObject_GetAttr(type.ptr(), a.name.ptr());
      if (d == nullptr) {
        PyErr_Clear();
        return;
      }
      nb::object descr = nb::steal(d);
      if (!descr.type().is(kind)) return;
      if (other.is_valid()) {
        PyObject* o = PyObject_GetAttr(other.ptr(), a.name.ptr());
        if (o == nullptr) {
          PyErr_Clear();
          return;
        }
        const bool same = o == descr.ptr();
        Py_DECREF(o);
        if (!same) return;
      }
      a.descr = std::move(descr);
    };
    for (Attr* a : {&n_.is_cpu, &n_.layout, &n_.is_nested, &n_.dtype, &n_.shape, &n_.requires_grad})
      bind(*a, tensor_, parameter_, getset_type);
    for (Attr* a : {&n_.is_conj, &n_.is_neg, &n_.stride, &n_.storage_offset, &n_.untyped_storage})
      bind(*a, tensor_, parameter_, method_type);
    for (Attr* a : {&n_.data_ptr, &n_.nbytes}) bind(*a, storage_type_, nb::handle(), method_type);
    // The type's own __dict__ attribute is a mappingproxy: the instances' one is the
    // descriptor in the first class of the MRO whose namespace has one.
    const auto instance_dict = [&](nb::handle type) -> nb::object {
      for (nb::handle cls : nb::borrow<nb::tuple>(type.attr("__mro__"))) {
        nb::object ns = cls.attr("__dict__");
        if (PyMapping_HasKeyString(ns.ptr(), "__dict__")) return ns["__dict__"];
      }
      return nb::object();
    };
    nb::object d = instance_dict(tensor_);
    if (d.is_valid() && d.type().is(getset_type) && instance_dict(parameter_).is(d)) n_.dict.descr = std::move(d);
  }
  // A storage method: bound only for exactly torch.UntypedStorage.
  nb::object storage_call(nb::handle s, const Attr& a) const {
    return reinterpret_cast<PyObject*>(Py_TYPE(s.ptr())) == storage_type_.ptr() ? call(s, a) : call_by_name(s, a.name);
  }
  static bool truth(nb::handle o) {
    if (o.ptr() == Py_True) return true;
    if (o.ptr() == Py_False) return false;
    const int r = PyObject_IsTrue(o.ptr());
    if (r < 0) throw nb::python_error();
    return r != 0;
  }
  static std::int64_t as_int(nb::handle o) {
    const long long x = PyLong_AsLongLong(o.ptr());
    if (x == -1 && PyErr_Occurred()) throw nb::python_error();
    return x;
  }
  static std::uint64_t as_uint(nb::handle o) {
    const unsigned long long x = PyLong_AsUnsignedLongLong(o.ptr());
    if (x == static_cast<unsigned long long>(-1) && PyErr_Occurred()) throw nb::python_error();
    return x;
  }
  static void ints(nb::handle seq, std::vector<std::int64_t>& out) {
    // torch.Size and stride()'s result are tuples.
    const Py_ssize_t n = PyTuple_Size(seq.ptr());
    if (n < 0) throw nb::python_error();
    out.resize(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = as_int(PyTuple_GetItem(seq.ptr(), i));
  }
  struct Names {
    Attr is_cpu{nb::str("is_cpu")}, layout{nb::str("layout")}, is_nested{nb::str("is_nested")},
        is_conj{nb::str("is_conj")}, is_neg{nb::str("is_neg")}, dtype{nb::str("dtype")}, shape{nb::str("shape")},
        stride{nb::str("stride")}, storage_offset{nb::str("storage_offset")}, requires_grad{nb::str("requires_grad")},
        untyped_storage{nb::str("untyped_storage")}, data_ptr{nb::str("data_ptr")}, nbytes{nb::str("nbytes")},
        dict{nb::str("__dict__")};
  } n_;
  descrgetfunc descr_get_ = nullptr;  // getset_descriptor's __get__
  nb::object tensor_, parameter_, strided_, storage_type_;
  nb::dict keep_;  // owns the dtype objects keyed in dtypes_
  std::vector<std::pair<PyObject*, DType>> dtypes_;
};

struct FromPy {
  nb::object g = glue();
  std::shared_ptr<Pins> pins = std::make_shared<Pins>();  // what the tree's storages borrow from
  std::shared_ptr<TensorArena> tensors;                   // the fast path's Tensors live here
  PtrMap<std::shared_ptr<const Storage>> storages;        // by address of the storage's memory
  PtrMap<Value> nodes;                                    // the same Python object -> the same node
  std::vector<nb::object> pinned;                         // keeps keys of `nodes` alive
  bool split_storages = false;                            // one storage per tensor (safetensors drop-in)
  std::unordered_set<PyObject*> filling;                  // lists and dicts whose items are being converted
  std::unordered_set<PyObject*> tuples;                   // tuples whose items are being converted
  struct Filling {
    std::unordered_set<PyObject*>& set;
    PyObject* p;
    Filling(std::unordered_set<PyObject*>& s, PyObject* o) : set(s), p(o) { set.insert(p); }
    ~Filling() { set.erase(p); }
  };
  int depth = 0;
  std::optional<TorchFastPath> fast;  // made on the first object that is not a scalar
  // A streamed .safetensors or .pt save (begin_stream): the tensors of `stream_root`, the
  // dict being saved, go to `stream` as they are made.
  StreamedWrite* stream = nullptr;
  PyObject* stream_root = nullptr;
  struct StreamLook {  // begin_stream's look at the dict: what the entries view
    nb::list keys;     // keeps the names' UTF-8 alive
    std::vector<DType> dtypes;
    std::vector<std::int64_t> dims;  // all shapes, one after another
    std::vector<std::size_t> first;  // of each shape in dims, and the end
  } look;
  // The item of stream_root being converted, whose dtype and shape begin_stream has
  // read (nothing ran since: valid while no glue code has run).
  std::size_t look_item = SIZE_MAX;
  bool look_valid = false;

  // A StreamedWrite for saving `h` to `path`, or null when `h` is not a dict of at
  // least kStreamAtLeast plain torch tensors under str keys (the usual write then).
  // Streaming pays when the conversion is long next to the copy: many tensors.
  static constexpr Py_ssize_t kStreamAtLeast = 64;
  std::unique_ptr<StreamedWrite> begin_stream(nb::handle h, const std::string& path, Format format,
                                              const WriteOptions& o) {
    if (!PyDict_CheckExact(h.ptr()) || PyDict_Size(h.ptr()) < kStreamAtLeast) return nullptr;
    if (!fast) fast.emplace(g);
    look.keys = nb::steal<nb::list>(PyDict_Keys(h.ptr()));
    nb::list values = nb::steal<nb::list>(PyDict_Values(h.ptr()));
    if (!look.keys.is_valid() || !values.is_valid()) throw nb::python_error();
    const Py_ssize_t n = PyList_Size(look.keys.ptr());
    look.dtypes.resize(static_cast<std::size_t>(n));
    look.first.assign(1, 0);
    look.first.reserve(static_cast<std::size_t>(n) + 1);
    look.dims.reserve(static_cast<std::size_t>(n) * 2);
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (!PyUnicode_CheckExact(PyList_GetItem(look.keys.ptr(), i)) ||
          !fast->layout(PyList_GetItem(values.ptr(), i), look.dtypes[static_cast<std::size_t>(i)], look.dims))
        return nullptr;
      look.first.push_back(look.dims.size());
    }
    std::vector<StreamedWrite::Entry> entries(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < entries.size(); ++i) {
      Py_ssize_t size = 0;
      const char* utf8 = PyUnicode_AsUTF8AndSize(PyList_GetItem(look.keys.ptr(), static_cast<Py_ssize_t>(i)), &size);
      if (utf8 == nullptr) {  // not UTF-8: the conversion refuses it (utf8())
        PyErr_Clear();
        return nullptr;
      }
      entries[i] = {std::string_view(utf8, static_cast<std::size_t>(size)), look.dtypes[i],
                    std::span(look.dims).subspan(look.first[i], look.first[i + 1] - look.first[i])};
    }
    auto s = StreamedWrite::begin(path, format, std::move(entries), o);
    if (s) {
      stream = s.get();
      stream_root = h.ptr();
      look_valid = true;
    }
    return s;
  }

  Value convert(nb::handle h) {
    if (depth == 0) {
      // The walk makes short-lived tuples (shapes, strides, dict items) by the thousand
      // and frees each by reference count; cyclic collections triggered by them would
      // traverse every live object again and again (8 % of saving 10,000 tensors).
      const GcPause pause;
      return convert_nested(h);
    }
    return convert_nested(h);
  }

  // A str's UTF-8. Text is UTF-8 throughout tensorseal: a str holding a lone surrogate
  // (pickle writes one with surrogatepass) has none and is refused.
  static std::string utf8(nb::handle s) {
    Py_ssize_t size = 0;
    const char* p = PyUnicode_AsUTF8AndSize(s.ptr(), &size);
    if (p == nullptr) {
      PyErr_Clear();
      throw Error(rules::kInvalidArgument, "the str " + nb::cast<std::string>(nb::repr(s)).substr(0, 80) +
                                               " holds a lone surrogate: tensorseal's text is UTF-8");
    }
    return std::string(p, static_cast<std::size_t>(size));
  }

  // Pauses Python's cyclic garbage collector for one conversion (nothing it collects
  // is made here); restores the state it found.
  struct GcPause {
#if PY_VERSION_HEX >= 0x030A0000
    int was = PyGC_Disable();
    ~GcPause() {
      if (was) PyGC_Enable();
    }
#else
    nb::object gc = nb::module_::import_("gc");
    bool was = nb::cast<bool>(gc.attr("isenabled")());
    GcPause() { gc.attr("disable")(); }
    ~GcPause() {
      if (was) gc.attr("enable")();
    }
#endif
  };

  Value convert_nested(nb::handle h) {
    if (++depth > 1000) throw Error(rules::kInvalidArgument, "object nesting deeper than 1000");
    struct Guard {
      int& d;
      ~Guard() { --d; }
    } guard{depth};
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
    if (PyUnicode_CheckExact(h.ptr())) return Value::str(utf8(h));
    if (PyBytes_CheckExact(h.ptr())) {
      nb::bytes b = nb::borrow<nb::bytes>(h);
      return Value::bytes(std::string(b.c_str(), b.size()));
    }
    if (PyByteArray_CheckExact(h.ptr()))
      return Value::bytes(std::string(PyByteArray_AsString(h.ptr()), PyByteArray_Size(h.ptr())), true);
    if (const Value* known = nodes.find(h.ptr())) {
      // A container still being filled, met inside itself: a Ref (no owning cycle).
      if (filling.count(h.ptr())) return Value::ref_to(*known);
      return *known;
    }
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
      Filling f(filling, h.ptr());
      for (nb::handle x : nb::borrow<nb::list>(h)) l.as_list().items.push_back(convert(x));
      return l;
    }
    if (PyTuple_CheckExact(h.ptr())) {
      if (!tuples.insert(h.ptr()).second)
        throw Error(rules::kInvalidArgument, "cannot save a tuple that contains itself");
      std::vector<Value> items;
      for (nb::handle x : nb::borrow<nb::tuple>(h)) items.push_back(convert(x));
      tuples.erase(h.ptr());
      return Value::tuple(std::move(items));
    }
    if (PyDict_CheckExact(h.ptr())) {
      Value d = Value::dict(DictKind::kDict);
      nodes.emplace(h.ptr(), d);
      pinned.push_back(nb::borrow(h));
      Filling f(filling, h.ptr());
      // A snapshot of the items: converting a value runs Python code (attribute calls).
      // Keys and values as two lists (no tuple per item); nothing runs between the two.
      nb::list keys = nb::steal<nb::list>(PyDict_Keys(h.ptr())), values = nb::steal<nb::list>(PyDict_Values(h.ptr()));
      if (!keys.is_valid() || !values.is_valid()) throw nb::python_error();
      const Py_ssize_t n = PyList_Size(keys.ptr());
      auto& out = d.as_dict().items;
      out.reserve(static_cast<std::size_t>(n));
      expect(static_cast<std::size_t>(n));
      for (Py_ssize_t i = 0; i < n; ++i) {
        nb::handle k = PyList_GetItem(keys.ptr(), i), v = PyList_GetItem(values.ptr(), i);
        const bool streamed = stream != nullptr && h.ptr() == stream_root && PyUnicode_CheckExact(k.ptr());
        // Distinct str keys of one dict are distinct keys of the Dict: appended without
        // the lookup set() makes (it would merge keys Python calls equal, as 1 and True).
        if (streamed) {  // str keys, as begin_stream saw; the values' dtypes and shapes are known
          Value key = convert(k);
          look_item = static_cast<std::size_t>(i);
          Value value = convert(v);
          look_item = SIZE_MAX;
          out.emplace_back(std::move(key), std::move(value));
          if (out.back().second.is(Value::Kind::kTensor))
            stream->put(static_cast<std::size_t>(i), out.back().second.as_tensor());
        } else if (PyUnicode_CheckExact(k.ptr())) {
          out.emplace_back(convert(k), convert(v));
        } else {
          d.as_dict().set(convert(k), convert(v));
        }
      }
      return d;
    }
    if (!fast) fast.emplace(g);
    std::optional<TorchFastPath::Known> known;
    if (look_item != SIZE_MAX) {  // an item of the streamed dict: begin_stream read it
      if (look_valid)
        known = TorchFastPath::Known{
            look.dtypes[look_item],
            std::span(look.dims).subspan(look.first[look_item], look.first[look_item + 1] - look.first[look_item])};
      look_item = SIZE_MAX;
    }
    if (TorchFastPath::Fields f; fast->read(h, f, known ? &*known : nullptr)) return tensor(std::move(f));
    // Everything else is described by the glue (python/tensorseal/_glue.py classify: one
    // typed record per kind) so torch and numpy stay optional imports. Python code runs
    // from here on: what begin_stream read may have changed.
    look_valid = false;
    nb::object desc = g.attr("classify")(h);
    nb::handle type = desc.type();
    if (type.is(g.attr("DictDesc"))) {
      Value d = Value::dict(static_cast<DictKind>(nb::cast<int>(desc.attr("kind"))));
      nodes.emplace(h.ptr(), d);
      pinned.push_back(nb::borrow(h));
      Filling f(filling, h.ptr());
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
      o->how = static_cast<Construct>(nb::cast<int>(desc.attr("how")));
      if (o->how != Construct::kReduce && o->how != Construct::kNewObj)
        throw Error(rules::kInvalidArgument, "ObjectDesc: construction other than REDUCE or NEWOBJ");
      // The object exists once built from its callable and arguments: its items and
      // state may refer back to it (a Ref, as for lists and dicts).
      Value out(o);
      nodes.emplace(h.ptr(), out);
      pinned.push_back(nb::borrow(h));
      Filling f(filling, h.ptr());
      for (nb::handle x : nb::borrow<nb::list>(desc.attr("list_items"))) o->list_items.push_back(convert(x));
      for (nb::handle item : nb::borrow<nb::list>(desc.attr("dict_items"))) {
        nb::tuple kv = nb::borrow<nb::tuple>(item);
        Value k = convert(kv[0]);
        o->dict_items.emplace_back(std::move(k), convert(kv[1]));
      }
      if (nb::cast<bool>(desc.attr("has_state"))) o->state = std::make_shared<Value>(convert(desc.attr("state")));
      return out;
    }
    if (type.is(g.attr("CompositeDesc"))) return composite(desc);
    throw Error(rules::kInvalidArgument, "cannot save an object of type " +
                                             nb::cast<std::string>(desc.attr("type_name")) +
                                             " (tensorseal saves tensors, arrays and plain Python data)");
  }

  // A CompositeDesc (the glue's copy of tensorseal/composite.h's record): the core
  // writes the rebuild call (encode_composite), which checks the record.
  Value composite(nb::handle desc) {
    Composite c;
    c.layout = nb::cast<std::string>(desc.attr("layout"));
    const auto dtype = dtype_from_name(nb::cast<std::string>(desc.attr("dtype")));
    if (!dtype) throw Error(rules::kInvalidArgument, "CompositeDesc: unknown dtype");
    c.dtype = *dtype;
    c.shape = nb::cast<std::vector<std::int64_t>>(desc.attr("shape"));
    nb::dict parts = nb::borrow<nb::dict>(desc.attr("parts"));
    for (auto [role, t] : parts) {
      Value v = convert(t);
      if (!v.is(Value::Kind::kTensor)) throw Error(rules::kInvalidArgument, "CompositeDesc: a part is not a tensor");
      c.parts.emplace_back(nb::cast<std::string>(role), v.as_tensor());
    }
    if (nb::object x = desc.attr("coalesced"); !x.is_none()) c.coalesced = convert(x);
    c.requires_grad = nb::cast<bool>(desc.attr("requires_grad"));
    c.ragged_idx = nb::cast<std::int64_t>(desc.attr("ragged_idx"));
    c.metadata_cache = convert(desc.attr("metadata_cache"));
    c.state = convert(desc.attr("state"));
    if (nb::object cls = desc.attr("cls"); !cls.is_none())
      c.type = Global{nb::cast<std::string>(cls[0]), nb::cast<std::string>(cls[1])};
    c.stride = nb::cast<std::vector<std::int64_t>>(desc.attr("stride"));
    c.storage_offset = nb::cast<std::int64_t>(desc.attr("offset"));
    c.layout_arg = convert(desc.attr("layout_arg"));
    c.device = convert(desc.attr("device"));
    c.attributes = convert(desc.attr("attributes"));
    return encode_composite(c);
  }

  // Ends a conversion whose tree `root` nothing will read again (a save that returned):
  // releases the Python objects now (GIL held) and frees the C++ tree on a helper
  // thread (free_later).
  void dispose(Value root) {
    pins->release();
    pinned.clear();
    free_later(std::make_shared<std::tuple<Value, PtrMap<Value>, PtrMap<std::shared_ptr<const Storage>>>>(
        std::move(root), std::move(nodes), std::move(storages)));
    nodes = {};
    storages = {};
  }

  // Room for `n` more nodes (a dict's items: typically one tensor each) in the tables,
  // so that a 10,000-item dict grows them once.
  void expect(std::size_t n) {
    nodes.reserve(nodes.size() + n);
    storages.reserve(storages.size() + n);
    if (pinned.capacity() < pinned.size() + n) pinned.reserve(std::max(2 * pinned.capacity(), pinned.size() + n));
    pins->reserve(n);
  }

  // `owner` stays alive as long as any Storage holding the returned pointer.
  std::shared_ptr<const void> keep(nb::object owner) {
    pins->add(std::move(owner));
    return pins;
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
    return storage(nb::cast<std::uintptr_t>(buf.attr("ptr")), nb::cast<std::uint64_t>(buf.attr("nbytes")),
                   buf.attr("owner"), dtype_of(buf.attr("dtype")));
  }
  std::shared_ptr<const Storage> storage(std::uintptr_t ptr, std::uint64_t nbytes, nb::object owner, DType dtype) {
    if (nbytes == 0) return Storage::external(nullptr, 0, keep(std::move(owner)), dtype);
    const void* key = reinterpret_cast<const void*>(ptr);
    if (const auto* known = storages.find(key); known && (*known)->size() == nbytes && (*known)->dtype == dtype)
      return *known;
    auto s = Storage::external(reinterpret_cast<const std::byte*>(ptr), nbytes, keep(std::move(owner)), dtype);
    storages.assign(key, s);
    return s;
  }

  // A tensor read by TorchFastPath: what tensor(desc) makes of _describe_torch's record.
  Value tensor(TorchFastPath::Fields f) {
    if (!tensors) tensors = std::make_shared<TensorArena>();
    auto t = std::allocate_shared<Tensor>(ArenaAllocator<Tensor>(tensors));
    t->dtype = f.dtype;
    t->shape = std::move(f.shape);
    t->strides = std::move(f.strides);
    t->storage_offset = f.offset;
    t->requires_grad = f.requires_grad;
    t->is_parameter = f.is_parameter;
    attach(*t, f.ptr, f.nbytes, std::move(f.storage));
    return Value(std::shared_ptr<const Tensor>(t));
  }

  // Gives `t` its storage: the buffer [ptr, ptr + nbytes) kept alive by `owner`.
  void attach(Tensor& t, std::uintptr_t ptr, std::uint64_t nbytes, nb::object owner) {
    if (split_storages) {
      // Each tensor gets a storage of just the bytes it can reach (safetensors holds
      // unshared tensors; views that do not overlap are separate tensors there).
      for (auto s : t.strides)
        if (s < 0) throw Error(rules::kInvalidArgument, "negative strides are not supported");
      // The whole buffer first, to measure the view's extent against it.
      t.storage = Storage::external(reinterpret_cast<const std::byte*>(ptr), nbytes, nullptr, t.dtype);
      t.validate();
      const auto [first, last] = t.storage_extent();
      t.storage = Storage::external(reinterpret_cast<const std::byte*>(ptr + first), last - first,
                                    keep(std::move(owner)), t.dtype);
      t.storage_offset = 0;
    } else {
      t.storage = storage(ptr, nbytes, std::move(owner), DType::kUInt8);
    }
    t.validate();
  }

  Value tensor(nb::handle desc) {
    auto t = std::make_shared<Tensor>();
    t->dtype = dtype_of(desc.attr("dtype"));
    for (nb::handle d : nb::borrow<nb::tuple>(desc.attr("shape"))) t->shape.push_back(nb::cast<std::int64_t>(d));
    for (nb::handle d : nb::borrow<nb::tuple>(desc.attr("strides"))) t->strides.push_back(nb::cast<std::int64_t>(d));
    t->storage_offset = nb::cast<std::int64_t>(desc.attr("offset"));
    t->requires_grad = nb::cast<bool>(desc.attr("requires_grad"));
    t->is_parameter = nb::cast<bool>(desc.attr("is_parameter"));
    t->numpy = static_cast<NumpyType>(nb::cast<int>(desc.attr("numpy")));
    // A numpy object is spelled as this process's numpy pickles it, as torch.save would.
    if (t->numpy != NumpyType::kNone && nb::cast<bool>(g.attr("NUMPY_2_NAMES")))
      t->numpy_module = NumpyModule::kUnderscoreCore;
    if (nb::object qd = desc.attr("quant"); !qd.is_none()) {
      // (scheme name, scale, zero_point, scales desc | None, zero_points desc | None, axis)
      if (!carries_quantized(t->dtype))  // what the glue raised before it asked the core
        throw nb::type_error(("cannot save a quantized tensor of dtype torch." + std::string(name(t->dtype))).c_str());
      auto q = std::make_shared<Quantization>();
      const auto scheme = nb::cast<std::string>(qd[0]);
      q->scheme = scheme == "per_tensor_affine"    ? Quantization::Scheme::kPerTensorAffine
                  : scheme == "per_channel_affine" ? Quantization::Scheme::kPerChannelAffine
                                                   : Quantization::Scheme::kPerChannelAffineFloatQParams;
      q->scale = nb::cast<double>(qd[1]);
      q->zero_point = nb::cast<std::int64_t>(qd[2]);
      if (nb::object s = qd[3]; !s.is_none()) q->scales = tensor(s).as_tensor();
      if (nb::object z = qd[4]; !z.is_none()) q->zero_points = tensor(z).as_tensor();
      q->axis = nb::cast<std::int64_t>(qd[5]);
      t->quantization = std::move(q);
    }
    if (nb::object a = desc.attr("attributes"); !a.is_none()) {
      // The tensor's __dict__: str keys, values without tensors (the reader's contract).
      Value d = convert(a);
      for (const auto& [k, v] : d.as_dict().items) {
        if (!k.is(Value::Kind::kStr)) throw Error(rules::kInvalidArgument, "a tensor attribute's name is not a str");
        if (reaches_data(v))
          throw Error(rules::kInvalidArgument, "tensor attribute '" + std::string(k.as_str()) +
                                                   "' holds a tensor or storage, which tensorseal cannot save");
      }
      if (t->numpy != NumpyType::kNone || t->quantization)
        throw Error(rules::kInvalidArgument, "attributes on a quantized tensor cannot be saved");
      t->attributes = std::make_shared<const Value>(std::move(d));
    }
    nb::object buf = desc.attr("buffer");
    // nbytes None (a numpy array's memory): the bytes the view reaches, measured here.
    nb::object n = buf.attr("nbytes");
    const std::uint64_t nbytes = n.is_none() ? t->storage_extent().second : nb::cast<std::uint64_t>(n);
    if (split_storages) {
      attach(*t, nb::cast<std::uintptr_t>(buf.attr("ptr")), nbytes, buf.attr("owner"));
    } else {  // typed as the buffer says (numpy, bare storages)
      t->storage =
          storage(nb::cast<std::uintptr_t>(buf.attr("ptr")), nbytes, buf.attr("owner"), dtype_of(buf.attr("dtype")));
      t->validate();
    }
    if (nb::object lz = desc.attr("lazy"); !lz.is_none()) {  // (neg, conj): t is the raw view
      if (t->quantization || t->numpy != NumpyType::kNone)
        throw Error(rules::kInvalidArgument, "a quantized or numpy tensor cannot be a conj/neg view");
      return Value(lazy_view(*t, nb::cast<bool>(lz[0]), nb::cast<bool>(lz[1])));
    }
    return Value(std::shared_ptr<const Tensor>(t));
  }
};

// Python's limits= as (name, value) pairs over the defaults (tensorseal.limits).
using LimitPairs = std::vector<std::pair<std::string, std::uint64_t>>;

inline Limits limits_of(const LimitPairs& pairs) {
  Limits l;
  for (const auto& [k, v] : pairs) set_limit(l, k, v);
  return l;
}

// Python's format= of a read: "" detects, else a name or alias of formats().
inline Format format_of(const std::string& name) {
  if (name.empty()) return Format::kUnknown;
  if (const auto f = format_from_name(name)) return *f;
  throw Error(rules::kInvalidArgument, "unknown format '" + name + "'");
}

// torch.load's encoding= for Python 2 str values.
inline Py2Strings py2_strings_of(const std::string& encoding) {
  if (encoding == "utf-8") return Py2Strings::kUtf8;
  if (encoding == "latin1" || encoding == "latin-1") return Py2Strings::kLatin1;
  if (encoding == "bytes") return Py2Strings::kBytes;
  if (encoding == "ascii" || encoding == "ASCII") return Py2Strings::kAscii;
  throw Error(rules::kInvalidArgument, "unsupported encoding '" + encoding + "' (utf-8, latin1, bytes, ascii)");
}

inline ReadOptions read_options(const LimitPairs& limits, bool verify = true, const std::string& format = "",
                                bool in_memory = false, const std::string& encoding = "utf-8") {
  ReadOptions o;
  o.py2_strings = py2_strings_of(encoding);
  o.limits = limits_of(limits);
  o.verify_checksums = verify;
  o.format = format_of(format);
  o.in_memory = in_memory;
  return o;
}

// Python's progress= (a callable(done, total) or None) as the library's callback. The
// library calls it serialised from any thread; it runs under the GIL. An exception it
// raises stops the work and reaches the caller as itself (nb::python_error). The
// callable is released under the GIL wherever the callback is destroyed.
inline Progress progress_of(nb::handle fn) {
  if (fn.is_none()) return {};
  auto held = hold(nb::borrow<nb::object>(fn));
  return [held](std::uint64_t done, std::uint64_t total) {
    nb::gil_scoped_acquire gil;
    nb::handle(static_cast<const nb::object*>(held.get())->ptr())(done, total);
  };
}

}  // namespace tensorseal::py
