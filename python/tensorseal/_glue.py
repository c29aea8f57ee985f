"""Glue between the C++ core and torch / numpy. No format logic lives here: only the
construction of framework objects around memory the core hands out, and the
description of framework objects the core should write."""
from __future__ import annotations

import collections
from typing import Any

import numpy as np

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


# ---- dtypes ---------------------------------------------------------------------

def _numpy_dtype(name: str) -> np.dtype:
    special = {"bool": np.bool_, "complex32": None}
    if name in special and special[name] is not None:
        return np.dtype(special[name])
    try:
        return np.dtype(name)
    except TypeError:
        pass
    try:
        import ml_dtypes  # bf16 and float8 for numpy users
    except ImportError as e:  # pragma: no cover
        raise TypeError(f"numpy has no dtype {name}; install ml_dtypes") from e
    mapped = {"float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
              "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
              "float8_e8m0fnu": "float8_e8m0fnu", "bfloat16": "bfloat16",
              "float4_e2m1fn": "float4_e2m1fn", "float6_e2m3fn": "float6_e2m3fn",
              "float6_e3m2fn": "float6_e3m2fn"}.get(name)
    if mapped is None or not hasattr(ml_dtypes, mapped):
        raise TypeError(f"numpy has no dtype {name}")
    return np.dtype(getattr(ml_dtypes, mapped))


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
    if dt.kind == "b":
        return "bool"
    names = {"f2": "float16", "f4": "float32", "f8": "float64", "c8": "complex64", "c16": "complex128",
             "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
             "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64"}
    key = f"{dt.kind}{dt.itemsize}"
    if key in names and dt.kind in "fciu":
        return names[key]
    return dt.name  # ml_dtypes: bfloat16, float8_e4m3fn, ...


# ---- C++ -> Python --------------------------------------------------------------

def wrap_buffer(framework: str, arr: np.ndarray) -> Any:
    if framework == "torch":
        return torch.from_numpy(arr).untyped_storage()
    return arr


def make_tensor(framework: str, base: Any, dtype: str, shape: tuple, strides: tuple, offset: int,
                requires_grad: bool, is_parameter: bool) -> Any:
    if framework == "torch":
        t = torch.empty((0,), dtype=_torch_dtype(dtype))
        t.set_(base, offset, shape, strides)
        if is_parameter:
            return torch.nn.Parameter(t, requires_grad=requires_grad)
        if requires_grad:
            t.requires_grad_(True)
        return t
    dt = _numpy_dtype(dtype)
    item = dt.itemsize
    return np.ndarray(shape, dtype=dt, buffer=base, offset=offset * item, strides=tuple(s * item for s in strides))


def make_storage(framework: str, base: Any, dtype: str) -> Any:
    """A bare storage: a torch UntypedStorage (TypedStorage is deprecated in torch) or
    numpy's uint8 buffer. The declared element type is not kept."""
    return base


def make_global(module: str, name: str) -> Any:
    if module == "torch" and torch is not None and isinstance(getattr(torch, name, None), torch.dtype):
        return getattr(torch, name)
    return Global(module, name)


def make_object(callable: Any, args: Any, kwargs: Any, how: int, state: Any, has_state: bool,
                list_items: list, dict_items: list) -> Any:
    # Only inert, well-known value types are materialised; everything else stays data.
    if isinstance(callable, Global) and torch is not None and not has_state and not list_items and not dict_items:
        if (callable.module, callable.name) == ("torch", "Size") and isinstance(args, tuple) and len(args) == 1:
            return torch.Size(args[0])
        if (callable.module, callable.name) == ("torch", "device") and isinstance(args, tuple):
            return torch.device(*args)
    return Opaque(callable, args, kwargs, how, state, has_state, list_items, dict_items)


# ---- Python -> C++ --------------------------------------------------------------

def _describe_torch(t: Any) -> tuple:
    if t.device.type != "cpu":
        t = t.detach().cpu()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.layout != torch.strided:
        raise TypeError(f"cannot save a {t.layout} tensor (only strided tensors)")
    storage = t.untyped_storage()
    return ("tensor", storage.data_ptr(), storage.data_ptr(), storage.nbytes(), storage,
            dtype_name(t.dtype), tuple(t.shape), tuple(t.stride()), t.storage_offset(),
            bool(t.requires_grad), isinstance(t, torch.nn.Parameter))


def _describe_numpy(a: np.ndarray) -> tuple:
    if a.dtype.hasobject or a.dtype.fields is not None:
        raise TypeError(f"cannot save a numpy array of dtype {a.dtype}")
    if not a.dtype.isnative and a.dtype.itemsize > 1:
        a = a.astype(a.dtype.newbyteorder("="))
    item = a.dtype.itemsize
    if any(s < 0 or s % item for s in a.strides):
        a = np.ascontiguousarray(a)
    ptr = a.__array_interface__["data"][0]
    extent = item + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) if a.size else 0
    return ("tensor", ptr, ptr, extent, a, dtype_name(a.dtype), tuple(a.shape),
            tuple(s // item for s in a.strides), 0, False, False)


def _describe_storage(s: Any) -> tuple:
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
    return ("storage", untyped.data_ptr(), untyped.data_ptr(), untyped.nbytes(), untyped, dtype)


def classify(obj: Any) -> tuple:
    if type(obj) is dict:
        return ("dict", 0, list(obj.items()), None)
    if type(obj) is collections.OrderedDict:
        attrs = list(vars(obj).items()) if vars(obj) else None
        return ("dict", 1, list(obj.items()), attrs)
    if type(obj) is collections.Counter:
        return ("dict", 2, list(obj.items()), None)
    if type(obj) in (set, frozenset):
        return ("set", type(obj) is frozenset, list(obj))
    if torch is not None:
        if isinstance(obj, torch.Tensor):
            return _describe_torch(obj)
        if isinstance(obj, (torch.storage.TypedStorage, torch.UntypedStorage)):
            return _describe_storage(obj)
        if isinstance(obj, torch.dtype):
            return ("global", "torch", dtype_name(obj))
        if isinstance(obj, torch.Size):
            return ("object", Global("torch", "Size"), (tuple(obj),))
        if isinstance(obj, torch.device):
            return ("object", Global("torch", "device"), (str(obj),))
    if isinstance(obj, np.ndarray):
        return _describe_numpy(obj)
    if isinstance(obj, np.generic):
        return _describe_numpy(np.asarray(obj))
    if isinstance(obj, Global):
        return ("global", obj.module, obj.name)
    return ("unknown", type(obj).__module__ + "." + type(obj).__qualname__)
