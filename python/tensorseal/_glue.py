"""Glue between the C++ core and torch / numpy. No format logic lives here: only the
construction of framework objects around memory the core hands out, and the
description of framework objects the core should write."""
from __future__ import annotations

import collections
import contextlib
import threading
import weakref
from typing import Any, Iterator, NamedTuple, Optional

import numpy as np

from . import _tensorseal as _core
from .objects import Global, Opaque

try:  # torch is optional
    import torch
except ImportError:  # pragma: no cover - exercised only without torch
    torch = None  # type: ignore[assignment]

_DICT_KINDS = (dict, collections.OrderedDict, collections.Counter)


def new_dict(kind: int) -> Any:
    return _DICT_KINDS[kind]()


def int_to_le(i: int) -> bytes:
    n = (i + (i < 0)).bit_length() // 8 + 1
    return i.to_bytes(n, "little", signed=True)


# ---- dtypes (from the core's table: tensorseal names are torch's) ------------------

_BY_NAME = {name: (bits, typestr) for name, bits, _st, typestr in _core.dtypes()}
_BY_TYPESTR = {typestr: name for name, _bits, _st, typestr in _core.dtypes() if typestr}


def _numpy_dtype(name: str) -> np.dtype:
    typestr = _BY_NAME.get(name, (0, ""))[1]
    if typestr:
        return np.dtype(typestr)
    try:
        import ml_dtypes  # bf16, float8, float4/6 for numpy users, under torch's names
    except ImportError as e:  # pragma: no cover
        raise TypeError(f"numpy has no dtype {name}; install ml_dtypes") from e
    if name not in _BY_NAME or not hasattr(ml_dtypes, name):
        raise TypeError(f"numpy has no dtype {name}")
    return np.dtype(getattr(ml_dtypes, name))


def _torch_dtype(name: str) -> Any:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise TypeError(f"torch {torch.__version__} has no dtype {name}")
    return dt


def dtype_name(dt: Any) -> str:
    """torch or numpy dtype -> tensorseal (torch) name."""
    if torch is not None and isinstance(dt, torch.dtype):
        return str(dt).removeprefix("torch.")
    dt = np.dtype(dt)
    return _BY_TYPESTR.get(dt.newbyteorder("<").str if dt.byteorder != "|" else dt.str, dt.name)


# ---- C++ -> Python --------------------------------------------------------------

def wrap_buffer(framework: str, arr: np.ndarray) -> Any:
    if framework == "torch":
        return torch.from_numpy(arr).untyped_storage()
    return arr


def with_flags(t: Any, requires_grad: bool, is_parameter: bool) -> Any:
    """`t` as an nn.Parameter, or with requires_grad set, as the file says."""
    if is_parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def empty_quantized(dtype: Any, scale: float, zero_point: int, scales: Any, zero_points: Any, axis: int,
                    device: Any = "cpu") -> Any:
    """An empty quantized tensor with this quantizer (per channel when `scales` is given;
    float zero points make it per_channel_affine_float_qparams, as in torch)."""
    if scales is None:
        return torch._empty_affine_quantized([0], scale=scale, zero_point=zero_point, dtype=dtype, device=device)
    return torch._empty_per_channel_affine_quantized([0], scales=scales, zero_points=zero_points, axis=axis,
                                                     dtype=dtype, device=device)


def set_attributes(t: Any, attributes: dict) -> Any:
    """Python attributes torch restores on a loaded tensor (Tensor::attributes). numpy
    arrays cannot hold any: like the Parameter flag, they are not carried."""
    if torch is not None and isinstance(t, torch.Tensor):
        t.__dict__.update(attributes)
    return t


def make_tensor(framework: str, base: Any, dtype: str, shape: tuple, strides: tuple, offset: int,
                requires_grad: bool, is_parameter: bool, neg: bool = False, conj: bool = False) -> Any:
    """A tensor over `base`; for torch, neg/conj make the lazy view torch's
    _rebuild_tensor_v2 makes from its metadata argument (base holds the raw values)."""
    if framework == "torch":
        t = torch.empty((0,), dtype=_torch_dtype(dtype))
        t.set_(base, offset, shape, strides)
        if neg or conj:
            torch._utils.set_tensor_metadata(t, {k: True for k, on in (("neg", neg), ("conj", conj)) if on})
        return with_flags(t, requires_grad, is_parameter)
    dt = _numpy_dtype(dtype)
    item = dt.itemsize
    return np.ndarray(shape, dtype=dt, buffer=base, offset=offset * item, strides=tuple(s * item for s in strides))


# Which numpy arrays are numpy objects. An np.ndarray handed to tensorseal is a tensor
# (numpy is one of tensorseal's two frameworks: load(framework="numpy") gives tensors as
# arrays, and they save and hash as the tensors they are), except
#   - an array tensorseal loaded as a pickled numpy object (make_numpy remembers it), and
#   - every array under numpy_objects() (tensorseal.torch.save: torch.save pickles
#     arrays as numpy objects).
# A numpy scalar (np.generic) is always a numpy object: no framework gives one for a tensor.
_loaded_numpy_objects: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()
_mode = threading.local()


@contextlib.contextmanager
def _mode_flag(name: str) -> Iterator[None]:
    """Within: the thread-local flag `name` of _mode is True (restored afterwards)."""
    old = getattr(_mode, name, False)
    setattr(_mode, name, True)
    try:
        yield
    finally:
        setattr(_mode, name, old)


def numpy_objects() -> "contextlib.AbstractContextManager[None]":
    """Within: every np.ndarray classify() meets is a numpy object (torch.save's view)."""
    return _mode_flag("all_arrays")


def hashing() -> "contextlib.AbstractContextManager[None]":
    """Within: classify() refuses tensors one rank holds only part of (DTensor,
    ShardedTensor): a digest of one rank's part is not the content of the state."""
    return _mode_flag("hashing")


def _is_distributed_tensor(obj: Any) -> bool:
    t = type(obj)
    if (t.__module__, t.__qualname__) in _DTENSOR_TYPES:
        return True
    return any(c.__name__ == "ShardedTensor" and c.__module__.startswith("torch.distributed._shard")
               for c in t.__mro__)


# Whether this numpy pickles its objects' reconstructions under numpy 2's module names
# ("numpy._core.multiarray._reconstruct"; numpy 1.x: "numpy.core..."): the spelling
# torch.save writes for a numpy object, and so tensorseal's writers (Tensor::numpy_module).
NUMPY_2_NAMES = np.array(0).__reduce__()[0].__module__.startswith("numpy._core.")


def make_numpy(raw: np.ndarray, dtype: str, shape: tuple, strides: tuple, offset: int, scalar: bool) -> Any:
    """A pickled numpy object, as numpy rebuilds it: an ndarray owning a copy of its
    bytes, or a numpy scalar (np.generic)."""
    dt = _numpy_dtype(dtype)
    item = dt.itemsize
    view = np.ndarray(shape, dtype=dt, buffer=raw, offset=offset * item, strides=tuple(s * item for s in strides))
    if scalar:
        return view[()]
    arr = view.copy()
    _loaded_numpy_objects[id(arr)] = arr
    return arr


def make_qtensor(framework: str, base: Any, dtype: str, shape: tuple, strides: tuple, offset: int,
                 requires_grad: bool, is_parameter: bool, scheme: str, scale: float, zero_point: int,
                 scales: Any, zero_points: Any, axis: int) -> Any:
    """A quantized tensor over the integers in ``base``, as torch._utils._rebuild_qtensor
    builds it."""
    if framework != "torch":
        raise TypeError(f"a quantized tensor ({dtype}, {scheme}) has no numpy form; load with framework='torch'")
    per_channel = scheme != "per_tensor_affine"
    t = empty_quantized(getattr(torch, dtype), scale, zero_point, scales if per_channel else None, zero_points, axis)
    t.set_(base, offset, shape, strides)
    return with_flags(t, requires_grad, is_parameter)


def make_global(module: str, name: str) -> Any:
    if module == "torch" and torch is not None and isinstance(getattr(torch, name, None), torch.dtype):
        return getattr(torch, name)
    return Global(module, name)


_NJT_MODULE = "torch.nested._internal.nested_tensor"
_DIM_RANGE = ("torch._dynamo.decorators", "_DimRange")
_NEWOBJ = 1  # Construct::kNewObj


# DTensor at each module it has lived in, and the classes of its spec that torch.save
# pickles (NEWOBJ, then BUILD with their state) and torch's weights_only unpickler
# allows once torch.distributed.tensor is imported: the core's one list
# (tensorseal/composite.h). Built and described here; never any other class.
_DTENSOR_TYPES, _DTENSOR_CLASSES = (set(classes) for classes in _core.dtensor_classes())


def _torch_class(module: str, name: str) -> Any:
    """A class of the fixed tables above (imported as torch.load needs it imported)."""
    import importlib
    return getattr(importlib.import_module(module), name)


def _build(inst: Any, state: Any) -> Any:
    """pickle's BUILD (pickle.py load_build), for the classes of _DTENSOR_CLASSES."""
    setstate = getattr(inst, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return inst
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        inst.__dict__.update(state)
    if slots:
        for k, v in slots.items():
            setattr(inst, k, v)
    return inst


def new_opaque() -> Any:
    """An empty Opaque, registered before its state is converted (recursive objects)."""
    return Opaque.__new__(Opaque)


def make_object(callable: Any, args: Any, kwargs: Any, how: int, state: Any, has_state: bool,
                list_items: list, dict_items: list, into: Any = None) -> Any:
    """The Python value of an Object: a rebuilt torch value, or the Opaque `into` (made
    by new_opaque, which the object's own state may already refer to) filled in."""
    # Only inert, well-known value types are materialised; everything else stays data.
    if isinstance(callable, Global) and torch is not None and (callable.module, callable.name) in _DTENSOR_CLASSES \
            and how == _NEWOBJ and isinstance(args, tuple) and kwargs is None and not list_items and not dict_items:
        cls = _torch_class(callable.module, callable.name)
        inst = cls.__new__(cls, *args)
        return _build(inst, state) if has_state else inst
    if isinstance(callable, Global) and torch is not None and (callable.module, callable.name) == _DIM_RANGE and \
            how == _NEWOBJ and args == () and kwargs is None and isinstance(state, list) and len(state) == 3 and \
            not list_items and not dict_items:
        # torch.mark_dynamic's record on a tensor (a frozen dataclass: dim, min, max),
        # pickled as NEWOBJ + BUILD of its fields; torch.load builds it as well.
        from torch._dynamo.decorators import _DimRange
        return _DimRange(*state)
    if isinstance(callable, Global) and torch is not None and not has_state and not list_items and not dict_items:
        if (callable.module, callable.name) == ("torch", "Size") and isinstance(args, tuple) and len(args) == 1:
            return torch.Size(args[0])
        if (callable.module, callable.name) == ("torch", "device") and isinstance(args, tuple):
            return torch.device(*args)
        if (callable.module, callable.name) == ("torch.serialization", "_get_layout") and isinstance(args, tuple) \
                and len(args) == 1 and args[0] in _LAYOUTS:
            return getattr(torch, args[0].removeprefix("torch."))
        if (callable.module, callable.name) in (("torch._utils", "_rebuild_parameter"),
                                                ("torch._utils", "_rebuild_parameter_with_state")) and \
                kwargs is None and isinstance(args, tuple) and len(args) in (3, 4) and \
                isinstance(args[0], torch.Tensor):
            # The core keeps this call only around a composite (a meta tensor), without
            # hooks or attributes (torch/rebuild.cc).
            return torch.nn.Parameter(args[0], requires_grad=bool(args[1]))
    array = _numpy_object_array(callable, args, kwargs, how, state, has_state, list_items, dict_items)
    if array is not None:
        return array
    if into is None:
        return Opaque(callable, args, kwargs, how, state, has_state, list_items, dict_items)
    Opaque.__init__(into, callable, args, kwargs, how, state, has_state, list_items, dict_items)
    return into


_NUMPY_RECONSTRUCT = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct")}


def _numpy_object_array(callable: Any, args: Any, kwargs: Any, how: int, state: Any, has_state: bool,
                        list_items: list, dict_items: list) -> Any:
    """A numpy object array (dtype 'O') as numpy's pickle builds it: _reconstruct(ndarray,
    (0,), b'b') then BUILD (1, shape, dtype('O8'), fortran, [elements]); the core read
    the elements (never running anything). None for anything else."""
    if not (isinstance(callable, Global) and (callable.module, callable.name) in _NUMPY_RECONSTRUCT and how == 0
            and kwargs is None and has_state and not list_items and not dict_items and isinstance(args, tuple)
            and len(args) == 3 and args[0] == Global("numpy", "ndarray") and isinstance(state, tuple)
            and len(state) == 5 and state[0] == 1 and isinstance(state[1], tuple) and isinstance(state[4], list)):
        return None
    dt = state[2]
    if not (isinstance(dt, Opaque) and dt.callable == Global("numpy", "dtype") and isinstance(dt.args, tuple)
            and dt.args[:1] == ("O8",)):
        return None
    shape = state[1]
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        return None
    n = 1
    for d in shape:
        n *= d
    if len(state[4]) != n:
        return None
    flat = np.empty(n, dtype=object)
    for i, x in enumerate(state[4]):
        flat[i] = x
    return flat.reshape(shape, order="F" if state[3] else "C")


_SPARSE_LAYOUTS = tuple(_core.sparse_layouts())  # the core's ("sparse_coo", "sparse_csr", ...)
# torch pickles a layout as torch.serialization._get_layout("torch.<name>").
_LAYOUTS = {f"torch.{n}" for n in ("strided", "_mkldnn") + _SPARSE_LAYOUTS}


def make_composite(framework: str, layout: str, dtype: str, shape: tuple, parts: dict, coalesced: Any,
                   requires_grad: bool, ragged_idx: int, metadata_cache: Any, state: Any, cls: tuple, stride: tuple,
                   offset: int, layout_arg: Any, device: Any, parameter: Optional[bool] = None,
                   attributes: Optional[dict] = None) -> Any:
    """A tensor torch rebuilds from other tensors, from the record the core decoded and
    checked (tensorseal/composite.h: the fields, the parts in torch's argument order),
    built with torch's own constructors as torch.load builds it; sparse invariants are
    checked now (torch defers them to the end of its load). ``parameter`` (not None): a
    torch.nn.Parameter of it with that requires_grad, as torch._utils._rebuild_parameter
    makes it. ``attributes`` (not None): the tensor's Python attributes, set as
    torch._tensor._rebuild_from_type_v2 sets them. None (the call stays an Opaque)
    without torch or for numpy, which has no such tensors."""
    if framework != "torch" or torch is None:
        return None
    if parameter is not None or attributes is not None:
        t = make_composite(framework, layout, dtype, shape, parts, coalesced, requires_grad, ragged_idx,
                           metadata_cache, state, cls, stride, offset, layout_arg, device)
        if t is None:
            return None
        if parameter is not None:
            t = torch.nn.Parameter(t, requires_grad=bool(parameter))
        # on the Parameter, as _rebuild_parameter_with_state sets them
        return set_attributes(t, attributes) if attributes is not None else t
    if layout == "sparse_coo":
        return torch.sparse_coo_tensor(parts["indices"], parts["values"], torch.Size(shape), check_invariants=True,
                                       is_coalesced=coalesced)
    if layout in _SPARSE_LAYOUTS:
        return torch.sparse_compressed_tensor(*parts.values(), torch.Size(shape), layout=getattr(torch, layout),
                                              check_invariants=True)
    if layout == "nested":
        return torch._nested_view_from_buffer(*parts.values())
    if layout == "jagged":  # NestedTensor(**kwargs), then its attributes
        from torch.nested._internal.nested_tensor import NestedTensor, _rebuild_njt
        kwargs = {"values": parts["values"], "offsets": parts["offsets"], "lengths": parts.get("lengths"),
                  "_ragged_idx": ragged_idx, "_metadata_cache": metadata_cache, "requires_grad": requires_grad}
        return torch._tensor._rebuild_from_type_v2(_rebuild_njt, NestedTensor, (kwargs,), state)
    if layout == "meta":  # no data
        return torch.empty_strided(shape, stride, dtype=_torch_dtype(dtype), device="meta",
                                   requires_grad=requires_grad)
    if layout == "dtensor":
        c = _torch_class(*cls)
        return torch._tensor._rebuild_from_type_v2(
            torch._utils._rebuild_wrapper_subclass, c,
            (c, _torch_dtype(dtype), shape, stride, offset, layout_arg, device, requires_grad), state)
    return None


# ---- Python -> C++ --------------------------------------------------------------
# classify() describes one Python object as one of these records; the binding reads
# their fields by name (python/src/module.cc, FromPy).

class DictDesc(NamedTuple):
    kind: int                     # 0 dict, 1 OrderedDict, 2 Counter (DictKind)
    items: list                   # (key, value) pairs in order
    attrs: Optional[list] = None  # OrderedDict attributes (_metadata), or None


class SetDesc(NamedTuple):
    frozen: bool
    items: list


class BufferDesc(NamedTuple):
    """Memory the core borrows (no copy): [ptr, ptr + nbytes), kept alive by owner.
    Buffers with the same ptr and nbytes are one storage in the file."""
    ptr: int
    nbytes: Optional[int]         # None under a numpy array: the extent of its view
    owner: Any
    dtype: str                    # element type of a bare storage; uint8 when untyped


class TensorDesc(NamedTuple):
    buffer: BufferDesc
    dtype: str
    shape: tuple
    strides: tuple                # in elements
    offset: int                   # storage offset, in elements
    requires_grad: bool
    is_parameter: bool
    numpy: int = 0                # 0 a torch tensor, 1 a numpy.ndarray, 2 a numpy scalar (NumpyType)
    # A quantized tensor's parameters: (scheme name, scale, zero_point, scales TensorDesc |
    # None, zero_points TensorDesc | None, axis); the buffer holds its integers.
    quant: Optional[tuple] = None
    # Python attributes of the tensor object (its __dict__), None when it has none.
    attributes: Optional[dict] = None
    # (neg, conj) of a conj/neg view, whose buffer holds the raw values; None otherwise.
    lazy: Optional[tuple] = None


class GlobalDesc(NamedTuple):
    module: str
    name: str


class ObjectDesc(NamedTuple):
    callable: Any                 # a Global
    args: tuple
    how: int = 0                  # Construct: 0 REDUCE, 1 NEWOBJ
    state: Any = None             # BUILD's argument when has_state
    has_state: bool = False
    list_items: list = []         # APPENDS, in order
    dict_items: list = []         # SETITEMS, (key, value) pairs in order


class CompositeDesc(NamedTuple):
    """A tensor torch rebuilds from other tensors, as the core's record (tensorseal/
    composite.h, the same field names): the core writes the rebuild call from it."""
    layout: str                   # "sparse_coo", ..., "nested", "jagged", "dtensor", "meta"
    dtype: str
    shape: tuple
    parts: dict                   # role -> tensor, in torch's argument order
    coalesced: Optional[bool] = None  # sparse_coo
    requires_grad: bool = False   # jagged, dtensor, meta
    ragged_idx: int = 1           # jagged
    metadata_cache: Any = None    # jagged: _metadata_cache
    state: Any = None             # jagged, dtensor: the object's state
    cls: Optional[tuple] = None   # dtensor: (module, name) of its class
    stride: tuple = ()            # dtensor, meta
    offset: int = 0               # dtensor
    layout_arg: Any = None        # sparse, dtensor: the torch.layout
    device: Any = None            # dtensor
    attributes: Optional[dict] = None  # sparse, nested, meta: the tensor's __dict__, None when empty


class UnsupportedDesc(NamedTuple):
    type_name: str


def _is_wrapper_subclass(t: Any) -> bool:
    try:
        from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    except ImportError:  # torch < 2.1
        return False
    return bool(is_traceable_wrapper_subclass(t))


def _SPARSE_TORCH_LAYOUTS() -> tuple:
    return tuple(getattr(torch, n) for n in _SPARSE_LAYOUTS)


def _describe_sparse(t: Any) -> "CompositeDesc":
    """A sparse tensor: its layout and size, and its parts, dense tensors (COO: indices,
    values and whether coalesced; CSR/BSR: crow/col indices, values; CSC/BSC: ccol/row)."""
    if t.device.type != "cpu":
        t = t.cpu()
    layout = str(t.layout).removeprefix("torch.")
    if t.layout == torch.sparse_coo:
        return CompositeDesc(layout, dtype_name(t.dtype), tuple(t.shape), {"indices": t._indices(),
                             "values": t._values()}, coalesced=t.is_coalesced(), layout_arg=t.layout)
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        parts = {"crow_indices": t.crow_indices(), "col_indices": t.col_indices()}
    else:
        parts = {"ccol_indices": t.ccol_indices(), "row_indices": t.row_indices()}
    parts["values"] = t.values()
    return CompositeDesc(layout, dtype_name(t.dtype), tuple(t.shape), parts, layout_arg=t.layout)


def _describe_nested(t: Any) -> "CompositeDesc":
    """A strided nested tensor: its buffer and the sizes, strides and offsets of its
    components, four dense tensors."""
    if t.device.type != "cpu":
        t = t.cpu()
    offsets = t._nested_tensor_storage_offsets()
    return CompositeDesc("nested", dtype_name(t.dtype), (len(offsets),),
                         {"buffer": t.values(), "sizes": t._nested_tensor_size(),
                          "strides": t._nested_tensor_strides(), "offsets": offsets})


def _is_jagged(t: Any) -> bool:
    return type(t).__name__ == "NestedTensor" and type(t).__module__ == _NJT_MODULE


def _describe_jagged(t: Any) -> "CompositeDesc":
    """A jagged nested tensor: what NestedTensor.__reduce_ex__ gives, its constructor's
    keyword arguments and its attributes."""
    if t.device.type != "cpu":
        t = t.cpu()
    rebuild, (func, cls, (kwargs,), state) = t.__reduce_ex__(2)
    if rebuild is not torch._tensor._rebuild_from_type_v2 or func.__name__ != "_rebuild_njt" or cls is not type(t):
        raise TypeError(f"cannot save a {type(t).__name__}: its reduction is not the NestedTensor one tensorseal knows")
    cache = kwargs["_metadata_cache"]
    parts = {"values": kwargs["values"], "offsets": kwargs["offsets"]}
    if kwargs["lengths"] is not None:
        parts["lengths"] = kwargs["lengths"]
    parts.update(cache)  # min_seqlen, max_seqlen
    return CompositeDesc("jagged", dtype_name(t.dtype), (len(kwargs["offsets"]) - 1,), parts,
                         requires_grad=kwargs["requires_grad"], ragged_idx=kwargs["_ragged_idx"], state=state,
                         metadata_cache=cache)


def _describe_dim_range(r: Any) -> "ObjectDesc":
    """torch.mark_dynamic's record (a frozen dataclass) as pickle writes it: NEWOBJ of the
    class, then BUILD with its fields [dim, min, max]."""
    return ObjectDesc(Global(*_DIM_RANGE), (), _NEWOBJ, [r.dim, r.min, r.max], True)


def _describe_dtensor(t: Any) -> "CompositeDesc":
    """A DTensor: what Tensor.__reduce_ex__ of a wrapper subclass gives, (DTensor, dtype,
    size, stride, offset, layout, device, requires_grad) and its state (None,
    {_local_tensor, _spec})."""
    rebuild, (func, cls, args, state) = t.__reduce_ex__(2)
    if rebuild is not torch._tensor._rebuild_from_type_v2 or func is not torch._utils._rebuild_wrapper_subclass:
        raise TypeError(f"cannot save a {type(t).__name__}: its reduction is not the DTensor one tensorseal knows")
    _cls, dtype, size, stride, offset, layout, device, requires_grad = args
    return CompositeDesc("dtensor", dtype_name(dtype), tuple(size), {"local_tensor": t._local_tensor},
                         requires_grad=requires_grad, state=state, cls=(cls.__module__, cls.__qualname__),
                         stride=tuple(stride), offset=offset, layout_arg=layout, device=device)


def _describe_pickled(obj: Any) -> "ObjectDesc":
    """An object of _DTENSOR_CLASSES as pickle writes it (protocol 2 reduction:
    copyreg.__newobj__, i.e. NEWOBJ of the class, then BUILD with its state)."""
    import copyreg
    r = obj.__reduce_ex__(2)
    if r[0] is not copyreg.__newobj__ or r[1][0] is not type(obj) or any(x is not None for x in r[3:]):
        raise TypeError(f"cannot save a {type(obj).__name__}: its reduction is not the one tensorseal knows")
    state = r[2] if len(r) > 2 else None
    return ObjectDesc(Global(type(obj).__module__, type(obj).__qualname__), tuple(r[1][1:]), _NEWOBJ, state,
                      state is not None)


def _is_composite(t: Any) -> bool:
    """A sparse, strided nested or meta tensor: saved as a composite (the core's record)."""
    return t.layout in _SPARSE_TORCH_LAYOUTS() or (t.is_nested and t.layout == torch.strided) or \
        (t.device.type == "meta" and t.layout == torch.strided and not t.is_quantized)


def _composite_kind(t: Any) -> str:
    return "sparse" if t.layout in _SPARSE_TORCH_LAYOUTS() else "nested" if t.is_nested else "meta"


def _describe_meta(t: Any) -> Any:
    """A tensor on the meta device (no data): the core's record (layout "meta")."""
    return CompositeDesc("meta", dtype_name(t.dtype), tuple(t.size()), {}, requires_grad=bool(t.requires_grad),
                         stride=tuple(t.stride()))


def _describe_torch(t: Any) -> TensorDesc:
    attributes = dict(t.__dict__) or None  # before detach/cpu, which give a new object
    if t.device.type == "meta":  # plain ones are _describe_meta's
        raise TypeError(f"cannot save a {type(t).__name__} on the meta device with attributes or a non-strided layout")
    if t.device.type != "cpu":
        t = t.detach().cpu()
    # A conj/neg view is described as its raw view (the same memory, bits cleared: conj()
    # and _neg_view toggle them) plus the bits, so it keeps sharing its base's storage.
    neg, conj = bool(t.is_neg()), bool(t.is_conj())
    param, requires_grad = isinstance(t, torch.nn.Parameter), bool(t.requires_grad)
    if conj:
        t = t.conj()
    if neg:
        t = torch._neg_view(t)
    if t.layout != torch.strided:
        raise TypeError(f"cannot save a {t.layout} tensor (only strided tensors)")
    # Tensors whose meaning is not (storage, dtype, shape, strides): writing their bytes
    # as a plain tensor would lose the rest silently (scale/zero point, nested offsets,
    # a wrapper's inner tensors). Refused until tensorseal carries them.
    quant = None
    if t.is_quantized:
        scheme = str(t.qscheme()).removeprefix("torch.")
        if scheme == "per_tensor_affine":
            quant = (scheme, float(t.q_scale()), int(t.q_zero_point()), None, None, 0)
        elif scheme in ("per_channel_affine", "per_channel_affine_float_qparams"):
            quant = (scheme, 0.0, 0, _describe_torch(t.q_per_channel_scales()),
                     _describe_torch(t.q_per_channel_zero_points()), int(t.q_per_channel_axis()))
        else:  # torch cannot load these either
            raise TypeError(f"cannot save a quantized tensor with qscheme {t.qscheme()}")
        # The dtype: the binding refuses those the core does not carry (carries_quantized).
    if t.is_nested:  # strided and NestedTensor (jagged) ones are described elsewhere
        raise TypeError(f"cannot save a nested tensor of layout {t.layout} and type {type(t).__name__}")
    if _is_wrapper_subclass(t):
        raise TypeError(f"cannot save a {type(t).__name__} (a tensor subclass wrapping other tensors); "
                        "save its local tensor or full_tensor() instead")
    storage = t.untyped_storage()
    return TensorDesc(BufferDesc(storage.data_ptr(), storage.nbytes(), storage, "uint8"), dtype_name(t.dtype),
                      tuple(t.shape), tuple(t.stride()), t.storage_offset(), requires_grad, param, 0, quant,
                      attributes, (neg, conj) if neg or conj else None)


def _describe_numpy(a: np.ndarray, numpy: int = 1) -> TensorDesc:
    if a.dtype.hasobject or a.dtype.fields is not None:
        raise TypeError(f"cannot save a numpy array of dtype {a.dtype}")
    if not a.dtype.isnative and a.dtype.itemsize > 1:
        a = a.astype(a.dtype.newbyteorder("="))
    item = a.dtype.itemsize
    if any(s < 0 or s % item for s in a.strides):
        a = np.ascontiguousarray(a)
    ptr = a.__array_interface__["data"][0]
    # nbytes None: the binding measures the bytes the view reaches (Tensor::storage_extent).
    return TensorDesc(BufferDesc(ptr, None, a, "uint8"), dtype_name(a.dtype), tuple(a.shape),
                      tuple(s // item for s in a.strides), 0, False, False, numpy)


def _describe_storage(s: Any) -> BufferDesc:
    """A bare torch storage: typed storages keep their dtype, untyped ones are bytes."""
    if isinstance(s, torch.storage.TypedStorage):
        dtype = dtype_name(s.dtype)
        untyped = s._untyped_storage
    else:
        dtype = "uint8"
        untyped = s
    if untyped.device.type == "meta":
        raise TypeError("cannot save a storage on the meta device (it has no data)")
    if untyped.device.type != "cpu":
        untyped = untyped.cpu()
    return BufferDesc(untyped.data_ptr(), untyped.nbytes(), untyped, dtype)


def torch_fast_path() -> Optional[tuple]:
    """What the binding needs to read plain tensors without classify(): (torch.Tensor,
    torch.nn.Parameter, torch.strided, {torch dtype: tensorseal name},
    torch.UntypedStorage); None without torch. The binding takes that path only for
    objects of exactly those two types on the CPU, strided, not quantized, nested,
    conjugated or negated and without attributes: everything else comes here."""
    if torch is None:
        return None
    dtypes = {}
    for name in _BY_NAME:
        dt = getattr(torch, name, None)
        if isinstance(dt, torch.dtype):
            dtypes[dt] = name
    return torch.Tensor, torch.nn.Parameter, torch.strided, dtypes, getattr(torch, "UntypedStorage", None)


def classify(obj: Any) -> Any:
    """The record for one object that is not a plain scalar, str, bytes, list or tuple."""
    if type(obj) is dict:
        return DictDesc(0, list(obj.items()))
    if type(obj) is collections.OrderedDict:
        return DictDesc(1, list(obj.items()), list(vars(obj).items()) if vars(obj) else None)
    if type(obj) is collections.Counter:
        return DictDesc(2, list(obj.items()))
    if type(obj) in (set, frozenset):
        return SetDesc(type(obj) is frozenset, list(obj))
    if torch is not None:
        if getattr(_mode, "hashing", False) and isinstance(obj, torch.Tensor) and _is_distributed_tensor(obj):
            from .errors import invalid_argument
            raise invalid_argument(
                f"a {type(obj).__name__} holds only this rank's part of its tensor, so its hash would differ on "
                "every rank: hash the whole state with the collective tensorseal.dcp.content_hash(state_dict) "
                "(every rank calls it), or hash .full_tensor()")
        if type(obj) in (torch.Tensor, torch.nn.Parameter) and _is_composite(obj):
            if type(obj) is torch.nn.Parameter:
                # Parameter.__reduce_ex__: _rebuild_parameter(<its data>, requires_grad,
                # OrderedDict()), or with attributes _rebuild_parameter_with_state(...,
                # {attributes}); the data, a plain sparse / nested / meta tensor, is a composite.
                if obj.__dict__:
                    return ObjectDesc(Global("torch._utils", "_rebuild_parameter_with_state"),
                                      (obj.data, bool(obj.requires_grad), collections.OrderedDict(),
                                       dict(obj.__dict__)))
                return ObjectDesc(Global("torch._utils", "_rebuild_parameter"),
                                  (obj.data, bool(obj.requires_grad), collections.OrderedDict()))
            # A torch.Tensor: its attributes go with its record (the core writes
            # _rebuild_from_type_v2 around its rebuild call, as Tensor.__reduce_ex__ does).
            describe = {"meta": _describe_meta, "sparse": _describe_sparse, "nested": _describe_nested}
            return describe[_composite_kind(obj)](obj)._replace(attributes=dict(obj.__dict__) or None)
        if isinstance(obj, torch.Tensor) and obj.device.type == "meta" and obj.layout == torch.strided and \
                not obj.is_nested and not obj.is_quantized and type(obj) in (torch.Tensor, torch.nn.Parameter) and \
                not obj.__dict__:
            return _describe_meta(obj)
        if isinstance(obj, torch.Tensor) and obj.layout in _SPARSE_TORCH_LAYOUTS():
            return _describe_sparse(obj)
        if isinstance(obj, torch.Tensor) and obj.is_nested and obj.layout == torch.strided and \
                not _is_wrapper_subclass(obj):
            return _describe_nested(obj)
        if isinstance(obj, torch.Tensor) and _is_jagged(obj):
            return _describe_jagged(obj)
        if isinstance(obj, torch.Tensor) and (type(obj).__module__, type(obj).__qualname__) in _DTENSOR_TYPES:
            return _describe_dtensor(obj)
        if (type(obj).__module__, type(obj).__qualname__) in _DTENSOR_CLASSES:
            return _describe_pickled(obj)
        if (type(obj).__module__, type(obj).__name__) == _DIM_RANGE:
            return _describe_dim_range(obj)
        if isinstance(obj, torch.Tensor):
            return _describe_torch(obj)
        if isinstance(obj, torch.layout):
            return ObjectDesc(Global("torch.serialization", "_get_layout"), (str(obj),))
        if isinstance(obj, (torch.storage.TypedStorage, torch.UntypedStorage)):
            return _describe_storage(obj)
        if isinstance(obj, torch.dtype):
            return GlobalDesc("torch", dtype_name(obj))
        if isinstance(obj, torch.Size):
            return ObjectDesc(Global("torch", "Size"), (tuple(obj),))
        if isinstance(obj, torch.device):
            return ObjectDesc(Global("torch", "device"), (str(obj),))
    if isinstance(obj, np.ndarray):
        is_object = getattr(_mode, "all_arrays", False) or _loaded_numpy_objects.get(id(obj)) is obj
        return _describe_numpy(obj, 1 if is_object else 0)
    if isinstance(obj, np.generic):
        return _describe_numpy(np.asarray(obj), 2)
    if isinstance(obj, Global):
        return GlobalDesc(obj.module, obj.name)
    if getattr(_mode, "objects", False):
        return _describe_object(obj)
    return UnsupportedDesc(type(obj).__module__ + "." + type(obj).__qualname__)


def objects() -> "contextlib.AbstractContextManager[None]":
    """Within: classify() describes instances of other classes as pickle protocol 2
    reduces them (torch.save's view), and tensorseal.Opaque as the object it records."""
    return _mode_flag("objects")


def _global_of(obj: Any, name: Optional[str] = None) -> GlobalDesc:
    """The global pickle writes for a class, function or reduce-by-name object: its
    module and qualified name, which must lead back to `obj` (pickle's own check)."""
    import sys
    name = name or getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    module = getattr(obj, "__module__", None)
    found: Any = sys.modules.get(module) if isinstance(module, str) else None
    for part in (name or "").split(".") if found is not None else ():
        found = getattr(found, part, None)
    if found is not obj or not name or "<locals>" in name:
        from .errors import invalid_argument
        raise invalid_argument(f"cannot save {obj!r}: it is not importable as {module}.{name} "
                               "(pickle would refuse it too)")
    return GlobalDesc(module, name)


def _describe_object(obj: Any) -> Any:
    """An object of another class as pickle protocol 2 (what torch.save uses) reduces it:
    copyreg.__newobj__ becomes NEWOBJ of the class, other callables REDUCE; the state,
    list items and dict items follow. Classes and functions are globals."""
    import copyreg
    import types
    from .errors import invalid_argument
    if isinstance(obj, Opaque):
        return ObjectDesc(obj.callable, tuple(obj.args) if obj.args is not None else (), obj.how, obj.state,
                          obj.has_state, list(obj.list_items), list(obj.dict_items))
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
        return _global_of(obj)
    try:
        rv = obj.__reduce_ex__(2)
    except Exception as e:  # noqa: BLE001 - the object's own refusal, reported as such
        raise invalid_argument(f"cannot save an object of type {type(obj).__qualname__}: {e}") from e
    if isinstance(rv, str):
        return _global_of(obj, rv)
    if not isinstance(rv, tuple) or not 2 <= len(rv) <= 5:
        raise invalid_argument(f"cannot save an object of type {type(obj).__qualname__}: "
                               "its __reduce_ex__ gives no (callable, args, ...) tuple")
    func, args, state, list_items, dict_items = rv + (None,) * (5 - len(rv))
    how = 0
    if func is copyreg.__newobj__:
        func, args, how = args[0], tuple(args[1:]), 1
    elif func is copyreg.__newobj_ex__:
        raise invalid_argument(f"cannot save an object of type {type(obj).__qualname__}: it needs keyword "
                               "arguments to be created (__newobj_ex__)")
    callable = _global_of(func)
    return ObjectDesc(Global(callable.module, callable.name), tuple(args), how, state, state is not None,
                      list(list_items) if list_items is not None else [],
                      list(dict_items) if dict_items is not None else [])
