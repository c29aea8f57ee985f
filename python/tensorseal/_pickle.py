"""Deterministic ``pickle.dumps`` of torch tensors, storages, Parameters and modules.

Why pickles of tensors differ between processes: ``Tensor.__reduce_ex__`` pickles
``torch._utils._rebuild_tensor_v2(storage, ...)`` and the storage's ``__reduce__``
returns ``(torch.storage._load_from_bytes, (b,))`` where ``b`` is a legacy
``torch.save`` of the storage, whose storage key is a memory address
(``str(storage._cdata)``). Everything else in the pickle is already deterministic.

While enabled, ``TypedStorage.__reduce__`` and ``UntypedStorage.__reduce__`` return
``(torch.storage._load_from_bytes, (<canonical legacy bytes>,))`` with the bytes from
tensorseal's canonical legacy writer: storage key "0", fixed sys_info, canonical
pickles. The result is the same bytes in every process and loads with plain
``pickle.loads`` where tensorseal is not installed (torch's own ``_load_from_bytes``
reads it). The patch is process-wide (every thread sees it while enabled); nested
enables are counted and the originals are restored when the count drops to zero.

As with stock pickle, each tensor pickles its own storage: two tensors sharing a storage
are each written with a copy of it (pickle's memo never sees the temporary storage
wrappers), so they do not share memory after ``pickle.loads``. ``tensorseal.save`` keeps
sharing.

What it does not change:

* ``torch.save`` does not reduce storages (its pickler stores them as persistent ids),
  so it is unaffected: zip ``torch.save`` is already deterministic for a given file
  name (its archive folder is the file's stem, ``archive`` for buffers) and legacy
  ``torch.save`` (``_use_new_zipfile_serialization=False``) still writes addresses as
  storage keys. ``tensorseal.torch.save`` writes canonical bytes whatever the name.
* ``multiprocessing`` queues/pipes pickle tensors with torch's own reducers
  (shared memory), not with ``__reduce__``; spawn *arguments* and return values of
  ordinary ``pickle`` go through the patched path.
* ``copy.deepcopy`` uses ``__deepcopy__`` (a clone), not ``__reduce__``.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, List, Tuple

from . import _tensorseal as _core

_lock = threading.Lock()
_depth = 0
# (class, had its own __reduce__, the original) for each patched class.
_saved: List[Tuple[type, bool, Any]] = []


def _storage_reducer(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    import torch

    def __reduce__(self: Any) -> Any:
        if isinstance(self, torch.storage.TypedStorage):
            # Only dtypes with a legacy storage class can be written as a legacy typed
            # storage; tensors of the newer dtypes pickle their *untyped* storage.
            if self.dtype not in _legacy_dtypes():
                return original(self)
            device = self._untyped_storage.device
        else:
            device = self.device
        if device.type == "meta":
            return original(self)
        data = _core.write_bytes(self, "torch-legacy")
        return (torch.storage._load_from_bytes, (data,))

    __reduce__.__qualname__ = "deterministic_storage_reduce"
    return __reduce__


def _legacy_dtypes() -> "frozenset[Any]":
    import torch
    return frozenset(torch.storage._dtype_to_storage_type_map())


def _patch() -> None:
    import torch
    for cls in (torch.storage.TypedStorage, torch.storage.UntypedStorage):
        own = "__reduce__" in cls.__dict__
        original = cls.__dict__["__reduce__"] if own else cls.__reduce__
        _saved.append((cls, own, original))
        cls.__reduce__ = _storage_reducer(original)  # type: ignore[method-assign]


def _unpatch() -> None:
    while _saved:
        cls, own, original = _saved.pop()
        if own:
            cls.__reduce__ = original  # type: ignore[method-assign]
        else:
            delattr(cls, "__reduce__")


def enable() -> None:
    """Makes ``pickle.dumps`` of torch objects deterministic until :func:`disable`.

    Calls nest: each ``enable()`` needs one ``disable()``.
    """
    global _depth
    with _lock:
        if _depth == 0:
            _patch()
        _depth += 1


def disable() -> None:
    """Undoes one :func:`enable`; the original reducers return after the last one.
    Calling it more often than ``enable()`` is a no-op."""
    global _depth
    with _lock:
        if _depth == 0:
            return
        _depth -= 1
        if _depth == 0:
            _unpatch()


def is_enabled() -> bool:
    """Whether deterministic pickling is on."""
    return _depth > 0


@contextlib.contextmanager
def deterministic_pickle() -> Iterator[None]:
    """Context manager: inside it ``pickle.dumps`` of a Tensor, Storage, Parameter,
    state_dict or ``nn.Module`` gives the same bytes in every process, and the bytes
    load with plain ``pickle.loads`` (no tensorseal needed)::

        with tensorseal.deterministic_pickle():
            b = pickle.dumps(torch.IntTensor([1]))
    """
    enable()
    try:
        yield
    finally:
        disable()


__all__: List[str] = ["deterministic_pickle", "enable", "disable", "is_enabled"]
