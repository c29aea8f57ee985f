"""Python stand-ins for pickle content that tensorseal never executes."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple


class Global:
    """A reference to a global name (``module.name``) found in a pickle. Never imported."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __repr__(self) -> str:
        return f"Global({self.module}.{self.name})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Global) and (self.module, self.name) == (other.module, other.name)

    def __hash__(self) -> int:
        return hash((self.module, self.name))


class Opaque:
    """An object a pickle would have built by calling ``callable(*args)``; kept as data.

    ``state`` is what pickle's BUILD would have set, ``list_items``/``dict_items`` what
    APPENDS/SETITEMS would have added. tensorseal never runs the callable.
    """

    __slots__ = ("callable", "args", "kwargs", "how", "state", "has_state", "list_items", "dict_items")

    def __init__(self, callable: Any, args: Any, kwargs: Any = None, how: int = 0, state: Any = None,
                 has_state: bool = False, list_items: Optional[List[Any]] = None,
                 dict_items: Optional[List[Tuple[Any, Any]]] = None) -> None:
        self.callable = callable
        self.args = args
        self.kwargs = kwargs
        self.how = how
        self.state = state
        self.has_state = has_state
        self.list_items = list_items or []
        self.dict_items = dict_items or []

    def __repr__(self) -> str:
        return f"Opaque({self.callable!r}, args={self.args!r})"
