"""Drop-in replacements for ``safetensors.torch`` and ``safetensors.safe_open``.

    from tensorseal.safetensors import save_file, load_file, safe_open
    save_file({"w": w}, "model.safetensors", metadata={"format": "pt"})
    with safe_open("model.safetensors", framework="pt") as f:
        for k in f.keys():
            t = f.get_tensor(k)
        row = f.get_slice("w")[1:3, :]

Same calls and results as the safetensors package. Differences, all on purpose:
the files written are canonical (byte-identical to safetensors' for a flat dict,
``__metadata__`` sorted so multi-key metadata no longer changes between runs);
loading maps the file and returns zero-copy views (private copy-on-write: writes to a
tensor never reach the file; two ``get_tensor`` calls for one name view the same
memory); ``safe_open``/``load_file`` also read any other format tensorseal reads
(.pt, .npz, ...). This module is ``tensorseal.safetensors``; it does not need or
shadow the real ``safetensors`` package.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from . import _api
from . import _tensorseal as _core
from .errors import invalid_argument

__all__ = ["save_file", "load_file", "save", "load", "safe_open", "SafeSlice"]

_ST_NAMES: Dict[str, str] = {name: st for name, _bits, st, _np in _core.dtypes()}


def _check_for_save(tensors: Any) -> None:
    """The checks safetensors.torch applies before saving, with its exception types."""
    import torch  # the real torch
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    sparse = []
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"Key `{k}` is invalid, expected torch.Tensor but received {type(v)}")
        if v.layout != torch.strided:
            sparse.append(k)
    if sparse:
        raise ValueError(f"You are trying to save a sparse tensors: `{sparse}` which this library does not support.")
    # Tensors whose bytes overlap in one storage (safetensors' _find_shared_tensors).
    groups: Dict[Tuple[Any, int, int], List[Tuple[int, int, str]]] = {}
    for k, v in tensors.items():
        if v.device.type == "meta":
            continue
        s = v.untyped_storage()
        if s.data_ptr() == 0 or s.nbytes() == 0:
            continue
        start = v.data_ptr()
        extent = (sum((n - 1) * st for n, st in zip(v.shape, v.stride()) if st > 0) + 1) * v.element_size() \
            if v.nelement() else 0
        stop = start + extent
        groups.setdefault((v.device, s.data_ptr(), s.nbytes()), []).append((start, stop, k))
    failing = []
    for areas in groups.values():
        if len(areas) < 2:
            continue
        areas.sort()
        current = {areas[0][2]}
        last_stop = areas[0][1]
        for start, stop, name in areas[1:]:
            if start >= last_stop:
                if len(current) > 1:
                    failing.append(current)
                current = {name}
            else:
                current.add(name)
            last_stop = stop
        if len(current) > 1:
            failing.append(current)
    if failing:
        raise RuntimeError(
            f"Some tensors share memory, this will lead to duplicate memory on disk and potential differences when "
            f"loading them again: {failing}. Save them once (tensorseal.save keeps tied tensors tied).")
    for k, v in tensors.items():
        if not v.is_contiguous():
            raise ValueError(f"You are trying to save a non contiguous tensor: `{k}` which is not allowed. Call "
                             "`.contiguous()` on it before saving.")


def _check_metadata(metadata: Optional[Dict[str, str]]) -> List[Tuple[str, str]]:
    if metadata is None:
        return []
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in metadata.items()):
        raise ValueError("metadata must be a dict of str -> str")
    return sorted(metadata.items())


def save(tensors: Dict[str, Any], metadata: Optional[Dict[str, str]] = None) -> bytes:
    """Saves a dict of tensors into safetensors bytes (``safetensors.torch.save``)."""
    _check_for_save(tensors)
    return _core.write_bytes(dict(tensors), "safetensors", _check_metadata(metadata), 0, True)


def save_file(tensors: Dict[str, Any], filename: Union[str, "os.PathLike[str]"],
              metadata: Optional[Dict[str, str]] = None) -> None:
    """Saves a dict of tensors to ``filename`` (``safetensors.torch.save_file``).
    The write is atomic: readers never see a half-written file."""
    _check_for_save(tensors)
    _core.write_file(dict(tensors), os.fspath(filename), "safetensors", _check_metadata(metadata), 0, True)


def _to_device(tensors: Dict[str, Any], device: Union[str, int, Any]) -> Dict[str, Any]:
    if isinstance(device, int):
        device = f"cuda:{device}"
    device = str(device)
    if device == "cpu":
        return tensors
    return _api._materialise(tensors, "torch", device, copy=False)


def load_file(filename: Union[str, "os.PathLike[str]"], device: Union[str, int] = "cpu") -> Dict[str, Any]:
    """Loads the tensors of ``filename`` as ``{name: tensor}`` (``safetensors.torch.load_file``).
    Zero-copy views of the mapped file on the cpu."""
    d = _core.read_tensors(os.fspath(filename), "torch")
    return _to_device({name: t for name, t, _dt, _at in d["tensors"]}, device)


def load(data: bytes) -> Dict[str, Any]:
    """Loads safetensors bytes as ``{name: tensor}`` on the cpu (``safetensors.torch.load``)."""
    d = _core.read_bytes_tensors(bytes(data), "<bytes>", "torch")
    return {name: t for name, t, _dt, _at in d["tensors"]}


class SafeSlice:
    """A tensor of a file, sliced on demand: ``f.get_slice("w")[1:3, :]``, with
    ``get_shape()`` and ``get_dtype()`` (safetensors' dtype names: "F32", "BF16", ...)."""

    __slots__ = ("_tensor", "_dtype")

    def __init__(self, tensor: Any, dtype: str) -> None:
        self._tensor = tensor
        self._dtype = dtype

    def get_shape(self) -> List[int]:
        return [int(d) for d in self._tensor.shape]

    def get_dtype(self) -> str:
        return _ST_NAMES.get(self._dtype, self._dtype)

    def __getitem__(self, index: Any) -> Any:
        out = self._tensor[index]
        if hasattr(out, "contiguous"):
            return out.contiguous()
        import numpy as np
        return np.ascontiguousarray(out)

    def __repr__(self) -> str:
        return f"SafeSlice(shape={self.get_shape()}, dtype={self.get_dtype()})"


class safe_open:  # noqa: N801 - the name safetensors users know
    """Opens a checkpoint and hands out its tensors by name (``safetensors.safe_open``).

    ``framework``: "pt" (torch tensors) or "np"/"numpy" (numpy arrays). ``device``:
    where ``get_tensor`` puts tensors (torch only). Usable as a context manager.

    Lazy for safetensors files: opening maps the file and parses and validates its
    header only (the same rules, and errors, as ``tensorseal.load``); ``get_tensor``
    makes one zero-copy tensor when asked, so a tensor's bytes are not read before it
    is used. Other formats (and whole checkpoints saved by ``tensorseal.save``) are
    read whole when opened.
    """

    def __init__(self, filename: Union[str, "os.PathLike[str]"], framework: str = "pt",
                 device: Union[str, int] = "cpu") -> None:
        fw = {"pt": "torch", "torch": "torch", "np": "numpy", "numpy": "numpy"}.get(framework)
        if fw is None:
            raise invalid_argument(f"framework {framework!r} is not supported (use 'pt' or 'np')")
        self._framework = fw
        self._device = device
        path = os.fspath(filename)
        # name -> (tensor, dtype, file offset): every tensor when read whole, the ones
        # asked for so far when lazy (a name gives the same tensor every time).
        self._tensors: Dict[str, Tuple[Any, str, int]] = {}
        index = _core.safetensors_index(path)
        if index is not None and not index.structured():
            self._index: Any = index
            self._format = "safetensors"
            self._meta: Dict[str, str] = dict(index.metadata())
            self._keys: List[str] = index.keys()
            return
        self._index = None
        d = _core.read_tensors(path, fw)
        self._format = d["format"]
        self._meta = dict(d["metadata"])
        self._tensors = {name: (t, dt, at) for name, t, dt, at in d["tensors"]}
        self._keys = sorted(self._tensors)

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def keys(self) -> List[str]:
        """Tensor names, sorted."""
        return list(self._keys)

    def offset_keys(self) -> List[str]:
        """Tensor names in the order of their data in the file."""
        if self._index is not None:
            return self._index.offset_keys()
        return [k for k, _ in sorted(self._tensors.items(), key=lambda kv: (kv[1][2], kv[0]))]

    def metadata(self) -> Optional[Dict[str, str]]:
        """The file's ``__metadata__`` (None when it has none)."""
        return dict(self._meta) if self._meta else None

    def _get(self, name: str) -> Tuple[Any, str, int]:
        try:
            return self._tensors[name]
        except KeyError:
            found = self._index.tensor(name, self._framework) \
                if self._index is not None and isinstance(name, str) else None
            if found is None:
                raise KeyError(f"File does not contain tensor {name}") from None
        entry = self._tensors[name] = (found[0], found[1], 0)
        return entry

    def get_tensor(self, name: str) -> Any:
        t = self._get(name)[0]
        if self._framework == "torch" and str(self._device) != "cpu":
            return _to_device({name: t}, self._device)[name]
        return t

    def get_slice(self, name: str) -> SafeSlice:
        t, dt, _ = self._get(name)
        return SafeSlice(t, dt)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __repr__(self) -> str:
        return f"safe_open(format={self._format!r}, tensors={len(self._keys)})"
