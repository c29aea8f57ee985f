"""tensorseal: reproducible, safe, provably lossless PyTorch checkpoints.

All format logic is in the C++ core; this package converts between Python objects and
the core's value tree.

    >>> import tensorseal
    >>> tensorseal.save({"w": torch.ones(2)}, "model.safetensors")   # canonical bytes
    >>> tensorseal.load("model.safetensors")["w"]                     # zero-copy mmap view
    >>> tensorseal.hash("model.safetensors")                          # container-independent
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _tensorseal as _core
from .errors import (CorruptFileError, Error, InternalError, InvalidArgumentError, IoError, LimitError,
                     UnsafePickleError, UnsupportedError)
from .objects import Global, Opaque

__version__ = _core.__version__
__all__ = [
    "load", "save", "save_bytes", "load_bytes", "hash", "inspect", "read",
    "Error", "CorruptFileError", "UnsafePickleError", "UnsupportedError", "InvalidArgumentError",
    "IoError", "LimitError", "InternalError", "Global", "Opaque", "Checkpoint",
]

PathLike = Union[str, "os.PathLike[str]"]


def _default_framework() -> str:
    try:
        import torch  # noqa: F401
        return "torch"
    except ImportError:
        return "numpy"


def _format_for(path: PathLike, format: Optional[str]) -> str:
    if format is not None:
        return {"pt": "torch-zip", "torch": "torch-zip"}.get(format, format)
    fmt = _core.format_for_extension(os.fspath(path))
    if fmt == "unknown":
        raise InvalidArgumentError(
            f"{os.fspath(path)}: cannot tell the format from the extension; pass format=",
            "api/invalid-argument", os.fspath(path))
    return fmt


class Checkpoint:
    """Everything tensorseal read from a file: the content and container facts."""

    def __init__(self, d: Dict[str, Any]) -> None:
        self.format: str = d["format"]
        self.file: str = d["file"]
        self.root: Any = d.get("root")
        self.metadata: Dict[str, str] = dict(d["metadata"])
        self.facts: List[Tuple[str, str, str]] = list(d["facts"])
        self.globals: List[Tuple[str, str, str]] = list(d["globals"])

    def __repr__(self) -> str:
        return f"Checkpoint(format={self.format!r}, file={self.file!r})"


def read(path: PathLike, *, framework: Optional[str] = None, verify: bool = True) -> Checkpoint:
    """Reads any supported file (format detected from content) into a Checkpoint."""
    return Checkpoint(_core.read_file(os.fspath(path), framework or _default_framework(), verify))


def load(path: PathLike, *, mmap: bool = True, device: str = "cpu", framework: Optional[str] = None) -> Any:
    """Loads a checkpoint of any supported format without executing pickle code.

    With ``mmap=True`` tensors are views of the file's memory map (no copy; pages are
    read when touched). ``framework`` is "torch" (default when torch is installed) or
    "numpy" (bf16/float8 through ml_dtypes).
    """
    framework = framework or _default_framework()
    root = read(path, framework=framework).root
    if not mmap or device != "cpu":
        root = _materialise(root, framework, device)
    return root


def load_bytes(data: bytes, *, framework: Optional[str] = None, name: str = "<bytes>") -> Any:
    """Like load(), from bytes in memory."""
    return _core.read_bytes(bytes(data), name, framework or _default_framework())["root"]


def _materialise(obj: Any, framework: str, device: str) -> Any:
    """Copies mapped tensors into memory (mmap=False) and/or moves them to `device`,
    keeping shared storages shared."""
    if framework == "torch":
        import torch
        memo: Dict[int, Any] = {}

        def fix(t: "torch.Tensor") -> "torch.Tensor":
            key = t.untyped_storage().data_ptr()
            if key not in memo:
                memo[key] = t.untyped_storage().clone() if device == "cpu" else \
                    t.untyped_storage().to(device=device) if hasattr(t.untyped_storage(), "to") else None
            storage = memo[key]
            out = torch.empty((0,), dtype=t.dtype, device=device)
            out.set_(storage, t.storage_offset(), t.shape, t.stride())
            if isinstance(t, torch.nn.Parameter):
                return torch.nn.Parameter(out, requires_grad=t.requires_grad)
            return out.requires_grad_(t.requires_grad) if t.requires_grad else out

        return _map_tensors(obj, lambda x: fix(x) if isinstance(x, torch.Tensor) else x)
    import numpy as np
    return _map_tensors(obj, lambda x: np.array(x, copy=True) if isinstance(x, np.ndarray) else x)


def _map_tensors(obj: Any, fn: Any) -> Any:
    import collections
    if isinstance(obj, collections.OrderedDict):
        out = collections.OrderedDict((k, _map_tensors(v, fn)) for k, v in obj.items())
        for k, v in vars(obj).items():
            setattr(out, k, v)
        return out
    if isinstance(obj, dict):
        return type(obj)((k, _map_tensors(v, fn)) for k, v in obj.items())
    if isinstance(obj, list):
        return [_map_tensors(v, fn) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_map_tensors(v, fn) for v in obj)
    return fn(obj)


def save(obj: Any, path: PathLike, format: Optional[str] = None, *,
         metadata: Optional[Dict[str, str]] = None, threads: int = 0) -> None:
    """Writes ``obj`` canonically: the bytes depend only on the content.

    The format comes from ``format`` ("safetensors", "pt", "npz", "npy") or the file
    extension. The write is atomic (temp file, fsync, rename). Tensor data is read
    straight from the tensors' memory; the GIL is released while writing.
    """
    _core.write_file(obj, os.fspath(path), _format_for(path, format), sorted((metadata or {}).items()), threads)


def save_bytes(obj: Any, format: str, *, metadata: Optional[Dict[str, str]] = None) -> bytes:
    """The canonical bytes save() would write."""
    return _core.write_bytes(obj, _format_for("", format), sorted((metadata or {}).items()))


def hash(path_or_obj: Any, *, fast: bool = False, threads: int = 0) -> str:
    """Content hash ("sha256:<hex>"; "xxh3:<hex>" with fast=True) of a file or of an
    in-memory object. Independent of container, layout, dict order and file name."""
    if isinstance(path_or_obj, (str, os.PathLike)):
        return _core.hash_file(os.fspath(path_or_obj), fast, threads)
    return _core.hash_object(path_or_obj, fast, threads)


def inspect(path: PathLike, *, threads: int = 0) -> Dict[str, Any]:
    """What `tseal inspect --json` prints, as a dict."""
    d = _core.inspect_file(os.fspath(path), threads)
    return {"file": os.fspath(path), "format": d["format"], "content_hash": d["content_hash"],
            "tensors": d["tensors"], "metadata": dict(d["metadata"])}
