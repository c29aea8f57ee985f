"""Python stand-ins for pickle content that tensorseal never executes."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

__all__ = ["Global", "Opaque"]


class Global:
    """A reference to a global name (``module.name``) found in a pickle. Never imported.

    What ``tensorseal.load`` / ``tensorseal.torch.load(weights_only=False)`` return
    for a class or function a pickle names but tensorseal does not rebuild; equal (and
    hashing alike) when module and name are.

    Args:
        module: the module part, e.g. ``"collections"``.
        name: the qualified name in it, e.g. ``"OrderedDict"``.

    Example:
        >>> g = tensorseal.Global("posix", "system")
        >>> g, g == tensorseal.Global("posix", "system")
        (Global(posix.system), True)
    """

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

    tensorseal never runs the callable. Made by the loaders (``tensorseal.load``,
    ``tensorseal.torch.load(weights_only=False)``) for objects they do not rebuild;
    it is read-only data (``tensorseal.save`` refuses it, with InvalidArgumentError).

    Args:
        callable: what the pickle would call: a :class:`Global` (or another value).
        args: the positional arguments, a tuple.
        kwargs: the keyword arguments (NEWOBJ_EX), or None.
        how: the opcode that made it: 0 REDUCE, 1 NEWOBJ, 2 NEWOBJ_EX, 3 INST, 4 OBJ.
        state: what pickle's BUILD would have set (see ``has_state``).
        has_state: whether the pickle has a BUILD for it (``state`` may be None).
        list_items: what APPENDS would have added, in order.
        dict_items: what SETITEMS would have added, as (key, value) pairs.

    Example:
        >>> obj = tensorseal.torch.load("trainer.pt", weights_only=False)["callback"]
        >>> obj.callable, obj.state
        (Global(mylib.Callback), {'every': 100})
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
