"""tensorseal: reproducible, safe, provably lossless PyTorch checkpoints.

All format logic is in the C++ core; this package converts between Python objects and
the core's value tree.

    >>> import tensorseal
    >>> tensorseal.save({"w": torch.ones(2)}, "model.safetensors")   # canonical bytes
    >>> tensorseal.load("model.safetensors")["w"]                     # zero-copy mmap view
    >>> tensorseal.hash("model.safetensors")                          # container-independent

Drop-ins: ``tensorseal.torch`` (``save``/``load`` like torch's) and
``tensorseal.safetensors`` (``save_file``/``load_file``/``safe_open``/``save``/``load``
like safetensors'). Submodules import lazily, so ``import tensorseal`` does not import
torch.
"""
from __future__ import annotations

import importlib
from typing import Any, List

from . import _tensorseal as _core
from ._api import (Checkpoint, PathLike, diff, explain, formats, hash, inspect, is_canonical, load, load_bytes, read, save,
                   save_bytes, scan, verify)
from ._pickle import deterministic_pickle, disable, enable, is_enabled
from .errors import (CorruptFileError, Error, InternalError, InvalidArgumentError, IoError, LimitError,
                     UnsafePickleError, UnsupportedError)
from .limits import Limits
from .objects import Global, Opaque

__version__: str = _core.__version__
__all__ = [
    "load", "save", "save_bytes", "load_bytes", "read", "hash", "inspect", "diff", "explain", "scan", "verify", "formats",
    "is_canonical",
    "deterministic_pickle", "enable", "disable", "is_enabled",
    "Error", "CorruptFileError", "UnsafePickleError", "UnsupportedError", "InvalidArgumentError",
    "IoError", "LimitError", "InternalError", "Global", "Opaque", "Checkpoint", "PathLike", "Limits",
]

_SUBMODULES = ("torch", "safetensors", "dcp")


def __getattr__(name: str) -> Any:
    # `tensorseal.torch` / `tensorseal.safetensors` on first use (PEP 562).
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(list(globals()) + list(_SUBMODULES))
