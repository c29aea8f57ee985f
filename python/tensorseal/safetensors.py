"""Drop-in replacements for ``safetensors.torch`` and ``safetensors.safe_open``.

    from tensorseal.safetensors import save_file, load_file, safe_open
    save_file({"w": w}, "model.safetensors", metadata={"format": "pt"})
    with safe_open("model.safetensors", framework="pt") as f:
        for k in f.keys():
            t = f.get_tensor(k)
        row = f.get_slice("w")[1:3, :]

Same calls, results and exception types as the safetensors package (each exception is
also a ``tensorseal.Error`` of its kind; each function lists them). Differences, all
on purpose: the files written are canonical (byte-identical to safetensors' for every
dict it accepts, ``requires_grad`` tensors and Parameters included, never with
tensorseal's structure metadata; ``__metadata__`` sorted so multi-key metadata no
longer changes between runs; no tensors with ``metadata={}`` gives
``{"__metadata__":{}}`` where safetensors 0.8 writes the invalid JSON
``{},"__metadata__":{}}``); loading maps the file and returns zero-copy views (private
copy-on-write: writes to a tensor never reach the file; two ``get_tensor`` calls for
one name view the same memory); ``safe_open``/``load_file`` also read any other format
tensorseal reads (.pt, .npz, ...). This module is ``tensorseal.safetensors``; it does
not need or shadow the real ``safetensors`` package.
"""
from __future__ import annotations

import errno
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from . import _api
from . import _tensorseal as _core
from .errors import Error, IoError, invalid_argument

__all__ = ["save_file", "load_file", "save", "load", "safe_open", "SafeSlice", "SafetensorError"]

_ST_NAMES: Dict[str, str] = {name: st for name, _bits, st, _np in _core.dtypes()}


# ---- exceptions ---------------------------------------------------------------------
# Each failure raises the type safetensors raises for it AND a tensorseal error type, so
# both `except safetensors.SafetensorError` / `except TypeError` ... and `except
# tensorseal.Error` (or its kinds) catch it:
#   missing tensor name           SafetensorError (and KeyError, as before)
#   non-str name or key, metadata that is not a dict of str -> str     TypeError
#   missing file                  FileNotFoundError
#   garbage bytes, broken header  SafetensorError
#   framework not 'pt'/'np'       SafetensorError
#   dtype safetensors lacks       KeyError
#   not a dict / not a tensor / sparse / non-contiguous   ValueError; shared memory   RuntimeError
#   a tensor on the meta device   NotImplementedError (torch's, from safetensors' copy to the cpu)
def _original_bases() -> Tuple[type, ...]:
    try:  # the real package is optional; when present its exception is a base too
        from safetensors import SafetensorError as original
    except ImportError:
        return ()
    return (original,)


class SafetensorError(Error, *_original_bases()):  # type: ignore[misc]
    """What safetensors raises as ``SafetensorError``; each instance is also of the
    tensorseal class of its kind (``CorruptFileError``, ``InvalidArgumentError``...).
    With the ``safetensors`` package installed it derives from its
    ``safetensors.SafetensorError`` too, so ``except safetensors.SafetensorError`` and
    ``except tensorseal.Error`` both catch it."""


_COMBOS: Dict[Tuple[type, type], type] = {}


def _also(err: Error, original: type) -> Error:
    """``err`` re-made as an instance of a subclass of both its class and ``original``
    (message, rule, file and offset kept)."""
    if isinstance(err, original):
        return err
    key = (type(err), original)
    cls = _COMBOS.get(key)
    if cls is None:
        # KeyError's str() would quote the message; keep the one-line form.
        cls = type(type(err).__name__, (type(err), original), {"__str__": Exception.__str__, "__module__": __name__})
        _COMBOS[key] = cls
    out = cls(str(err), err.rule, err.file, err.offset, err.detail)
    if isinstance(out, FileNotFoundError):
        out.errno, out.strerror, out.filename = errno.ENOENT, os.strerror(errno.ENOENT), err.file
    return out


def _type_error(detail: str) -> Error:
    return _also(invalid_argument(detail), TypeError)


class _Reading:
    """Context for reading ``path``: tensorseal errors leave as safetensors' types."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: Any, exc: Any, tb: Any) -> bool:
        if isinstance(exc, Error) and not isinstance(exc, SafetensorError):
            if isinstance(exc, IoError) and self.path is not None and not os.path.lexists(self.path):
                raise _also(exc, FileNotFoundError) from None
            if not isinstance(exc, IoError):
                raise _also(exc, SafetensorError) from None
        return False


def _check_for_save(tensors: Any) -> None:
    """The checks safetensors.torch applies before saving, in its order, with its
    exception types (made tensorseal errors too)."""
    import torch  # the real torch
    if not isinstance(tensors, dict):
        raise invalid_argument(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    sparse = []
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise invalid_argument(f"Key `{k}` is invalid, expected torch.Tensor but received {type(v)}")
        if v.layout != torch.strided:
            sparse.append(k)
        elif v.is_nested:  # safetensors itself fails inside torch here; say what it is
            raise invalid_argument(f"tensor '{k}' is a nested tensor, which safetensors cannot store")
    if sparse:
        raise invalid_argument(f"You are trying to save a sparse tensors: `{sparse}` which this library does not support.")
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
        raise _also(invalid_argument(
            f"Some tensors share memory, this will lead to duplicate memory on disk and potential differences when "
            f"loading them again: {failing}. Save them once (tensorseal.save keeps tied tensors tied)."), RuntimeError)
    for k, v in tensors.items():  # per tensor, as safetensors' _flatten_as_ptr
        if not v.is_contiguous():
            raise invalid_argument(f"You are trying to save a non contiguous tensor: `{k}` which is not allowed. Call "
                                   "`.contiguous()` on it before saving.")
        if v.device.type == "meta":  # safetensors fails copying it to the cpu: torch's NotImplementedError
            raise _also(invalid_argument(f"tensor '{k}' is on the meta device and has no data to save (Cannot copy "
                                         "out of meta tensor; no data!)"), NotImplementedError)
        dtype = str(v.dtype).replace("torch.", "")
        # float4_e2m1fn_x2 is stored as F4, its last dimension doubled (the core's writer).
        if _ST_NAMES.get(dtype, "") == "" and not (dtype == "float4_e2m1fn_x2" and v.dim() > 0):
            raise _also(invalid_argument(f"tensor '{k}' has dtype {v.dtype}, which safetensors cannot store"), KeyError)
    for k in tensors:
        if not isinstance(k, str):
            raise _type_error(f"argument 'tensor_dict': '{type(k).__name__}' object is not an instance of 'str'")


def _check_metadata(metadata: Optional[Dict[str, str]]) -> List[Tuple[str, str]]:
    if metadata is None:
        return []
    if not isinstance(metadata, dict):
        raise _type_error(f"argument 'metadata': '{type(metadata).__name__}' object is not an instance of 'dict'")
    for k, v in metadata.items():
        for x in (k, v):
            if not isinstance(x, str):
                raise _type_error(f"argument 'metadata': '{type(x).__name__}' object is not an instance of 'str'")
    return sorted(metadata.items())


def _plain(tensors: Dict[str, Any]) -> Dict[str, Any]:
    """The tensors as safetensors stores them: data only (``requires_grad`` and
    ``nn.Parameter`` are not part of a safetensors file, so no structure metadata)."""
    return {k: v.detach() for k, v in tensors.items()}


def save(tensors: Dict[str, Any], metadata: Optional[Dict[str, str]] = None) -> bytes:
    """Saves a dict of tensors into safetensors bytes (``safetensors.torch.save``).

    The bytes safetensors 0.8 writes for every dict it accepts (``requires_grad``
    tensors and Parameters are stored as their data; ``__metadata__`` keys sorted).
    Each exception below is the type safetensors raises and also an
    ``InvalidArgumentError`` (a ``tensorseal.Error``).

    Args:
        tensors: ``{name: torch.Tensor}``: strided, contiguous tensors of dtypes
            safetensors stores, on any device with data (not the meta device), no two
            sharing memory.
        metadata: the file's ``__metadata__``, a dict of str to str (None: none).

    Returns:
        The safetensors bytes.

    Raises:
        ValueError: ``tensors`` is not a dict, holds something that is not a tensor, a
            sparse or nested tensor, or a non-contiguous one.
        RuntimeError: tensors share memory (save them once; ``tensorseal.save`` keeps
            tied tensors tied).
        NotImplementedError: a tensor is on the meta device: it has no data.
        KeyError: a tensor's dtype is one safetensors cannot store.
        TypeError: a name, or a metadata key or value, is not a str.

    Example:
        >>> from tensorseal.safetensors import save, load
        >>> data = save({"w": torch.ones(2)}, metadata={"format": "pt"})
        >>> load(data)["w"]
        tensor([1., 1.])
    """
    _check_for_save(tensors)
    return _core.write_bytes(_plain(tensors), "safetensors", _check_metadata(metadata), 0, True, metadata == {})


def save_file(tensors: Dict[str, Any], filename: Union[str, "os.PathLike[str]"],
              metadata: Optional[Dict[str, str]] = None) -> None:
    """Saves a dict of tensors to ``filename`` (``safetensors.torch.save_file``).

    Writes the bytes :func:`save` returns. The write is atomic (temp file, fsync,
    rename): readers never see a half-written file, and on any error nothing is
    written (an old file at ``filename`` stays as it was).

    Args:
        tensors: ``{name: torch.Tensor}``, as for :func:`save`.
        filename: the path to write.
        metadata: the file's ``__metadata__``, a dict of str to str (None: none).

    Raises:
        ValueError: as :func:`save` (also ``RuntimeError``, ``NotImplementedError``,
            ``KeyError`` and ``TypeError`` for the cases listed there).
        IoError: the file or its temp file cannot be written (an ``OSError``).

    Example:
        >>> from tensorseal.safetensors import save_file
        >>> save_file(model.state_dict(), "model.safetensors", metadata={"format": "pt"})
    """
    _check_for_save(tensors)
    _core.write_file(_plain(tensors), os.fspath(filename), "safetensors", _check_metadata(metadata), 0, True,
                     metadata == {})


def _to_device(tensors: Dict[str, Any], device: Union[str, int, Any]) -> Dict[str, Any]:
    if isinstance(device, int):
        device = f"cuda:{device}"
    device = str(device)
    if device == "cpu":
        return tensors
    return _api._materialise(tensors, device)


def _read_tensors(src: Union[str, bytes]) -> Dict[str, Any]:
    """The tensors of a file or of bytes, read as safetensors reads them when they are
    safetensors (also when the bytes are a pickle too: tensorseal's detection refuses
    such a polyglot, safetensors takes its safetensors reading), else as their detected
    format (the drop-ins read every format tensorseal knows)."""
    read = (lambda **kw: _core.read_tensors(src, "torch", **kw)) if isinstance(src, str) else \
        (lambda **kw: _core.read_bytes_tensors(src, "<bytes>", "torch", **kw))
    try:
        return read(format="safetensors")
    except Error as e:
        if e.rule != "detect/format-mismatch":
            raise
    return read()


def load_file(filename: Union[str, "os.PathLike[str]"], device: Union[str, int] = "cpu") -> Dict[str, Any]:
    """Loads the tensors of ``filename`` as ``{name: tensor}`` (``safetensors.torch.load_file``).

    On the cpu the tensors are zero-copy views of the mapped file (private
    copy-on-write: writes to a tensor never reach the file). Any other format
    tensorseal reads (.pt, .npz, ...) is accepted too; its tensors are returned by
    their paths in the checkpoint.

    Args:
        filename: the file to read.
        device: where the tensors go: "cpu", a torch device string ("cuda:0") or a
            CUDA device index.

    Returns:
        ``{name: torch.Tensor}``.

    Raises:
        FileNotFoundError: there is no such file (also an ``IoError``).
        SafetensorError: the file is not a checkpoint tensorseal reads, or breaks a
            rule of its format (also a ``CorruptFileError``, ``UnsupportedError``...,
            naming the byte offset and the rule).
        IoError: the file cannot be read.

    Example:
        >>> from tensorseal.safetensors import load_file
        >>> sd = load_file("model.safetensors")
        >>> model.load_state_dict(sd)
    """
    path = os.fspath(filename)
    with _Reading(path):
        d = _read_tensors(path)
    return _to_device({name: t for name, t, _dt, _at in d["tensors"]}, device)


def load(data: bytes) -> Dict[str, Any]:
    """Loads safetensors bytes as ``{name: tensor}`` on the cpu (``safetensors.torch.load``).

    Args:
        data: the bytes of a safetensors file (or of any other format tensorseal
            reads); copied once into a buffer the tensors view.

    Returns:
        ``{name: torch.Tensor}``.

    Raises:
        SafetensorError: the bytes are not a checkpoint tensorseal reads, or break a
            rule of its format (also a ``CorruptFileError``, ``UnsupportedError``...).

    Example:
        >>> from tensorseal.safetensors import load, save
        >>> load(save({"w": torch.zeros(3)}))["w"].shape
        torch.Size([3])
    """
    with _Reading(None):
        d = _read_tensors(bytes(data))
    return {name: t for name, t, _dt, _at in d["tensors"]}


class SafeSlice:
    """A tensor of a file, sliced on demand: ``f.get_slice("w")[1:3, :]``, with
    ``get_shape()`` and ``get_dtype()`` (safetensors' dtype names: "F32", "BF16", ...).

    Made by :meth:`safe_open.get_slice`, not by hand. Indexing (ints, slices, as for
    the tensor) returns a contiguous tensor (or numpy array) of the selected part.

    Args:
        tensor: the tensor (or numpy array) of the file.
        dtype: tensorseal's name of its dtype ("float32", ...).

    Example:
        >>> with safe_open("model.safetensors", framework="pt") as f:
        ...     s = f.get_slice("embed.weight")
        ...     rows = s[:1000]          # the first 1000 rows, contiguous
        ...     s.get_shape(), s.get_dtype()
        ([32000, 4096], 'BF16')
    """

    __slots__ = ("_tensor", "_dtype")

    def __init__(self, tensor: Any, dtype: str) -> None:
        self._tensor = tensor
        self._dtype = dtype

    def get_shape(self) -> List[int]:
        """The tensor's shape as a list of ints."""
        return [int(d) for d in self._tensor.shape]

    def get_dtype(self) -> str:
        """The tensor's dtype by safetensors' name ("F32", "BF16", "I64", ...)."""
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

    Usable as a context manager. Lazy for safetensors files: opening maps the file and
    parses and validates its header only (the same rules, and errors, as
    ``tensorseal.load``); ``get_tensor`` makes one zero-copy tensor when asked, so a
    tensor's bytes are not read before it is used. Other formats (and whole
    checkpoints saved by ``tensorseal.save``) are read whole when opened.

    Args:
        filename: the file to open.
        framework: "pt" (torch tensors) or "np"/"numpy" (numpy arrays).
        device: where ``get_tensor`` puts tensors (torch only): "cpu", a torch device
            string or a CUDA device index.

    Raises:
        SafetensorError: ``framework`` is not one of those (also an
            ``InvalidArgumentError``), or the file is not a checkpoint tensorseal
            reads, or its header breaks a rule of the format.
        FileNotFoundError: there is no such file (also an ``IoError``).

    Example:
        >>> from tensorseal.safetensors import safe_open
        >>> with safe_open("model.safetensors", framework="pt") as f:
        ...     w = f.get_tensor("w")
        ...     rows = f.get_slice("w")[1:3, :]
        ...     meta = f.metadata()
    """

    def __init__(self, filename: Union[str, "os.PathLike[str]"], framework: str = "pt",
                 device: Union[str, int] = "cpu") -> None:
        fw = {"pt": "torch", "torch": "torch", "np": "numpy", "numpy": "numpy"}.get(framework)
        if fw is None:
            raise _also(invalid_argument(f"framework {framework!r} is not supported (use 'pt' or 'np')"),
                        SafetensorError)
        self._framework = fw
        self._device = device
        path = os.fspath(filename)
        with _Reading(path):
            self._open(path, fw)

    def _open(self, path: str, fw: str) -> None:
        # name -> (tensor, dtype, file offset): every tensor when read whole, the ones
        # asked for so far when lazy (a name gives the same tensor every time).
        self._tensors: Dict[str, Tuple[Any, str, int]] = {}
        index = _core.safetensors_index(path)
        if index is not None and not index.structured():
            self._index: Any = index
            self._format = "safetensors"
            # As safetensors: {} for "__metadata__": {}, None when absent or null.
            self._meta: Optional[Dict[str, str]] = dict(index.metadata()) if index.has_metadata() else None
            self._keys: List[str] = index.keys()
            return
        self._index = None
        d = _core.read_tensors(path, fw)
        self._format = d["format"]
        self._meta = dict(d["metadata"]) or None
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
        """The file's ``__metadata__``: None when the header has none (or null), else
        the dict, possibly empty (what safetensors returns)."""
        return dict(self._meta) if self._meta is not None else None

    def _get(self, name: str) -> Tuple[Any, str, int]:
        if not isinstance(name, str):
            raise _type_error(f"argument 'name': '{type(name).__name__}' object is not an instance of 'str'")
        try:
            return self._tensors[name]
        except KeyError:
            found = self._index.tensor(name, self._framework) if self._index is not None else None
            if found is None:
                raise _also(_also(invalid_argument(f"File does not contain tensor {name}"), SafetensorError),
                            KeyError) from None
        entry = self._tensors[name] = (found[0], found[1], 0)
        return entry

    def get_tensor(self, name: str) -> Any:
        """The tensor called ``name``: a zero-copy view of the file on the cpu (the
        same memory on every call), moved to the ``device`` given when opening.

        Args:
            name: the tensor's name, one of ``keys()``.

        Raises:
            SafetensorError: the file has no tensor of that name (also a ``KeyError``).
            TypeError: ``name`` is not a str.
        """
        t = self._get(name)[0]
        if self._framework == "torch" and str(self._device) != "cpu":
            return _to_device({name: t}, self._device)[name]
        return t

    def get_tensors(self) -> Dict[str, Any]:
        """Every tensor as ``{name: tensor}``, in the order of their data in the file
        (``get_tensor`` of each name of ``offset_keys()``)."""
        return {name: self.get_tensor(name) for name in self.offset_keys()}

    def get_slice(self, name: str) -> SafeSlice:
        """The tensor called ``name`` as a :class:`SafeSlice`, to index without
        materialising the rest (``f.get_slice("w")[1:3, :]``).

        Args:
            name: the tensor's name, one of ``keys()``.

        Raises:
            SafetensorError: the file has no tensor of that name (also a ``KeyError``).
            TypeError: ``name`` is not a str.
        """
        t, dt, _ = self._get(name)
        return SafeSlice(t, dt)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __repr__(self) -> str:
        return f"safe_open(format={self._format!r}, tensors={len(self._keys)})"
