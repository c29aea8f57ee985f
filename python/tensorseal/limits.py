"""Resource limits of a read (docs/limits.md): the ``limits=`` keyword of
:func:`tensorseal.read`, ``load``, ``load_bytes``, ``inspect``, ``hash``, ``scan``,
``verify``, ``diff`` and ``explain``.

``limits`` is a :class:`Limits` or a dict with the same keys, e.g.
``tensorseal.load(path, limits={"max_alloc": 1 << 20})``; fields left out (or None)
keep the C++ defaults (``Limits.defaults()``). A file over a limit raises
:class:`tensorseal.LimitError`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _tensorseal as _core

__all__ = ["Limits"]


@dataclasses.dataclass(frozen=True)
class Limits:
    """One field per field of ``tensorseal::Limits`` (include/tensorseal/limits.h);
    None keeps the default. A file over a limit raises :class:`tensorseal.LimitError`
    naming the rule (docs/limits.md has each limit's rules and what it protects
    against).

    Args:
        max_safetensors_header: bytes of a safetensors JSON header (at most
            safetensors' own cap, 100,000,000).
        max_pickle_bytes: bytes of one pickle stream.
        max_pickle_ops: opcodes run for one pickle stream.
        max_depth: nesting of containers (and of MARKs) in a pickle.
        max_stack: entries of the pickle stack and metastack.
        max_memo: entries of the pickle memo.
        max_string: bytes of one str or bytes value (and of a numpy array in a pickle).
        max_alloc: bytes of values one pickle builds; the inflated size of one zip
            entry or npy array.
        max_nested_files: depth of torch files nested in ``_load_from_bytes`` payloads.
        max_entries: zip entries, safetensors tensors, shards, DCP items.
        max_ndim: dimensions of one shape.
        max_pickle_inflate: inflated bytes of one deflated pickle record.
        max_inflate: inflated bytes of an archive's deflated members (an .npz), all
            together, allowed whatever they compress to.
        max_inflate_ratio: past ``max_inflate``, the most the deflated members may
            inflate to, as a multiple of their compressed bytes (0: ``max_inflate`` is
            a hard cap).
        max_expanded_bytes: bytes an overlapping view (a stride of 0, ``expand()``)
            may describe beyond the bytes its storage holds.

    Raises:
        InvalidArgumentError: when the limits are used (the ``limits=`` of a call): a
            value that is not a non-negative int or is above 2**64 - 1, or an unknown
            name in a dict.

    Example:
        >>> tensorseal.load("big.pt", limits=tensorseal.Limits(max_alloc=1 << 36))
        >>> tensorseal.load("big.pt", limits={"max_alloc": 1 << 36})   # the same
        >>> tensorseal.Limits.defaults()["max_depth"]
        1000
    """

    max_safetensors_header: Optional[int] = None
    max_pickle_bytes: Optional[int] = None
    max_pickle_ops: Optional[int] = None
    max_depth: Optional[int] = None
    max_stack: Optional[int] = None
    max_memo: Optional[int] = None
    max_string: Optional[int] = None
    max_alloc: Optional[int] = None
    max_nested_files: Optional[int] = None
    max_entries: Optional[int] = None
    max_ndim: Optional[int] = None
    max_pickle_inflate: Optional[int] = None
    max_inflate: Optional[int] = None
    max_inflate_ratio: Optional[int] = None
    max_expanded_bytes: Optional[int] = None

    @staticmethod
    def defaults() -> Dict[str, int]:
        """Every limit's default value, from the C++ core, as ``{name: value}``."""
        return dict(_core.limit_defaults())


LimitsArg = Union[Limits, Mapping[str, Optional[int]], None]


def limit_pairs(limits: LimitsArg) -> List[Tuple[str, int]]:
    """``limits`` as the (name, value) pairs the core takes; the core checks the names
    and ranges (api/invalid-argument)."""
    from .errors import invalid_argument
    if limits is None:
        return []
    if isinstance(limits, Limits):
        items: Any = dataclasses.asdict(limits).items()
    elif isinstance(limits, Mapping):
        items = limits.items()
    else:
        raise invalid_argument(f"limits must be a tensorseal.Limits or a dict, not {type(limits).__name__}")
    out = []
    for k, v in items:
        if v is None:
            continue
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise invalid_argument(f"limit {k!r} = {v!r} is not a non-negative integer")
        if v >= 1 << 64:
            raise invalid_argument(f"limit {k} = {v} is above its largest value {(1 << 64) - 1}")
        out.append((k, v))
    return out
