"""Recursive object graphs for tests/py/test_recursive.py, made by Python itself (the
classes live here so that pickle and torch.load can import them back)."""
from __future__ import annotations


class Node:
    """A tree whose children point back at their parent (`child.parent = self`)."""

    def __init__(self, name: str, parent: "Node | None" = None) -> None:
        self.name = name
        self.parent = parent
        self.children: list = []
        if parent is not None:
            parent.children.append(self)


def tree() -> Node:
    root = Node("root")
    a, _ = Node("a", root), Node("b", root)
    Node("a0", a)
    return root


def containers() -> dict:
    """A list holding itself, a dict under a key of itself, a list shared twice, and a
    recursive tuple (l = [t], t = (l,))."""
    selfish: list = []
    selfish.append(selfish)
    d: dict = {"name": "root"}
    d["me"] = d
    inner: list = []
    t = (inner,)
    inner.append(t)
    return {"list": selfish, "dict": d, "pair": [selfish, [selfish]], "tuple": t}
