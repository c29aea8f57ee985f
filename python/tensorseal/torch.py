"""Drop-in replacements for ``torch.save`` / ``torch.load``.

    import tensorseal.torch as tst
    tst.save(model.state_dict(), "model.pt")       # canonical .pt: same bytes every time
    sd = tst.load("model.pt")                        # never executes pickle code

``save`` writes what ``torch.save`` writes (a zip ``.pt`` that stock ``torch.load``
reads, or the legacy format with ``_use_new_zipfile_serialization=False``), but
canonically: the bytes depend only on the content, not on the file name, memory
addresses or time. ``load`` reads every torch format (and safetensors / npy / npz)
without running pickle code. This module is ``tensorseal.torch``; the real ``torch``
is untouched and imported here with an absolute import.
"""
from __future__ import annotations

import contextlib
import os
import pickle
from typing import IO, Any, Callable, Dict, Optional, Union

import torch  # the real torch (absolute import)

from . import _api, _glue
from . import _tensorseal as _core
from .errors import invalid_argument

__all__ = ["save", "load"]

FileLike = Union[str, "os.PathLike[str]", IO[bytes]]
MapLocation = Union[None, str, "torch.device", Dict[str, str], Callable[..., Any]]


def save(obj: Any, f: FileLike, pickle_module: Any = None, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False, *,
         objects: bool = False) -> None:
    """Saves ``obj`` like ``torch.save(obj, f)``, with canonical bytes.

    The bytes depend only on the content, not on the file name, memory addresses or
    time; stock ``torch.load`` reads them. A path is written atomically (temp file,
    fsync, rename): readers never see a half-written file.

    Args:
        obj: data: tensors, Parameters, dicts, OrderedDicts (with their ``_metadata``),
            lists, tuples, numbers, strings, dtypes; numpy arrays are pickled as numpy
            objects, as ``torch.save`` does. A whole ``nn.Module`` cannot be saved
            (save its ``state_dict()``).
        f: a path, or a writable binary file object (written once, then flushed).
        pickle_module: accepted for compatibility: None or the ``pickle`` module.
        pickle_protocol: accepted for compatibility; the canonical writer always uses
            protocol 2 (what torch writes by default).
        _use_new_zipfile_serialization: True (default) writes the zip format, False the
            legacy format.
        _disable_byteorder_record: accepted for compatibility; the canonical zip always
            records the byte order (``little``).
        objects: also save instances of other classes (an OmegaConf config, a
            ``defaultdict``, a dataclass), classes and functions, as ``torch.save``
            would: each by its ``__reduce_ex__(2)``, the classes and functions by their
            importable name. Loaded back by tensorseal as :class:`tensorseal.Opaque`,
            which saves again as the same object. False (the default) refuses them.

    Raises:
        InvalidArgumentError: ``obj`` holds something that is not data (a module, a
            function, an instance of a class of your own; with ``objects=True``, one
            pickle could not save either), ``f`` is neither a path nor a binary file, or
            ``pickle_module`` is another module.
        IoError: the file or its temp file cannot be written (nothing is left at the path).

    Example:
        >>> import tensorseal.torch as tst
        >>> tst.save(model.state_dict(), "model.pt")   # same bytes for any file name
        >>> tst.save({"w": torch.ones(2)}, "old.pt", _use_new_zipfile_serialization=False)
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise invalid_argument("tensorseal.torch.save: pickle_module is not supported")
    fmt = "torch-zip" if _use_new_zipfile_serialization else "torch-legacy"
    with contextlib.ExitStack() as modes:
        modes.enter_context(_glue.numpy_objects())  # as torch.save: a numpy array is pickled as one
        if objects:
            modes.enter_context(_glue.objects())
        if isinstance(f, (str, os.PathLike)):
            _api.save(obj, f, fmt)
            return
        if not hasattr(f, "write"):
            raise invalid_argument(
                f"tensorseal.torch.save: f must be a path or a binary file, not {type(f).__name__}")
        data = _api.save_bytes(obj, fmt)
    f.write(data)
    if hasattr(f, "flush"):
        f.flush()


def _map_location(obj: Any, map_location: MapLocation) -> Any:
    if map_location is None:
        return obj
    if isinstance(map_location, dict):
        target = map_location.get("cpu", "cpu")
        return obj if target == "cpu" else _api._materialise(obj, str(target))
    if callable(map_location) and not isinstance(map_location, (str, torch.device)):
        memo: Dict[int, Any] = {}

        def fix(t: Any) -> Any:
            if not isinstance(t, torch.Tensor):
                return t
            s = t.untyped_storage()
            key = id(s) if s.data_ptr() == 0 else s.data_ptr()
            if key not in memo:
                moved = map_location(s, "cpu")
                memo[key] = s if moved is None else moved
            return _api._retarget(t, memo[key])

        return _api._map_tensors(obj, fix)
    device = str(torch.device(map_location))
    return obj if device == "cpu" else _api._materialise(obj, device)


def load(f: FileLike, map_location: MapLocation = None, pickle_module: Any = None, *,
         weights_only: Optional[bool] = True, mmap: Optional[bool] = None, **pickle_load_args: Any) -> Any:
    """Loads a checkpoint like ``torch.load(f)``, without executing pickle code.

    Any torch format (zip, legacy, plain pickle of tensors) and safetensors / npy / npz
    are accepted. ``weights_only=False`` never executes anything either: objects
    outside the safe set come back as :class:`tensorseal.Opaque` data instead of
    raising. An allowance, not a wider safe set: files torch's own weights_only loader
    refuses for their encoding (pickle protocols 4/5, plain pickles, legacy files of
    uint16/32/64 and float8 tensors) are read when their globals are in the safe set
    (README, "Drop-ins").

    Args:
        f: a path, or a readable binary file object (read whole into memory).
        map_location: ``None`` / ``"cpu"`` keep tensors on the CPU (tensorseal does not
            restore saved CUDA locations), a device string or ``torch.device`` moves
            them, a dict maps ``"cpu"`` to a target, a callable is called as
            ``fn(storage, "cpu")`` and its result used (``None`` keeps the storage).
        pickle_module: accepted for compatibility: None or the ``pickle`` module.
        weights_only: True (the default, as in torch >= 2.6) refuses a file that
            references any global outside tensorseal's safe set (``tensorseal.scan``
            classes it unknown or dangerous; docs/security.md), as ``torch.load``
            would; the set also holds the numpy objects ``torch.save`` pickles, which
            torch's own weights_only loader refuses unless allowlisted. False returns
            such objects as inert data.
        mmap: None or False (torch's default) reads the file into memory, so the
            tensors never depend on it: saving over the same path afterwards, as
            training loops do, is safe. True maps paths as ``torch.load(mmap=True)``:
            zero-copy views of the file (private copy-on-write) that fault with SIGBUS
            if the file is truncated or rewritten in place while they live.
        **pickle_load_args: ``encoding`` ("utf-8", "latin1", "bytes", "ascii") decodes
            the str values of Python 2 pickles as ``torch.load`` does (a Python 2
            file's non-UTF-8 str needs ``"latin1"`` or ``"bytes"``, as in torch); other
            keywords are ignored.

    Returns:
        The object ``torch.load`` returns for the file: tensors that shared a storage
        still share memory.

    Raises:
        UnsafePickleError: ``weights_only=True`` and the file references a global
            outside the safe set (also a ``pickle.UnpicklingError``).
        CorruptFileError: the file breaks a rule of its format (the message names the
            byte offset and the rule).
        UnsupportedError: the file is of no format tensorseal reads, or uses a feature
            it does not handle.
        LimitError: the file exceeds a resource limit (docs/limits.md).
        IoError: the file cannot be opened or read.
        InvalidArgumentError: ``f`` is neither a path nor a binary file, or
            ``pickle_module`` or ``encoding`` is unsupported.

    Example:
        >>> import tensorseal.torch as tst
        >>> sd = tst.load("model.pt", map_location="cpu", weights_only=True)
        >>> sd = tst.load("model.pt", mmap=True)   # zero-copy views, as torch.load(mmap=True)
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise invalid_argument("tensorseal.torch.load: pickle_module is not supported")
    encoding = pickle_load_args.get("encoding", "utf-8")
    if encoding not in ("utf-8", "latin1", "bytes", "ASCII", "ascii"):
        raise invalid_argument("tensorseal.torch.load: unsupported encoding")
    # weights_only: the core refuses (UnsafePickleError, rule scan/unknown-global or
    # scan/dangerous-global) any global outside the safe set before making objects.
    weights_only = weights_only is not False
    if isinstance(f, (str, os.PathLike)):
        name = os.fspath(f)
        d = _core.read_file(name, "torch", True, True, weights_only, in_memory=mmap is not True, encoding=encoding)
        obj = d["root"]
    else:
        if not hasattr(f, "read"):
            raise invalid_argument(
                f"tensorseal.torch.load: f must be a path or a binary file, not {type(f).__name__}")
        given = getattr(f, "name", None)
        name = given if isinstance(given, str) else "<file>"
        data = f.read()
        d = _core.read_bytes(bytes(data), name, "torch", weights_only, encoding=encoding)
        obj = d["root"]
    return _map_location(obj, map_location)

