"""Pytrees: nested tuples, lists, dicts (and namedtuples) of leaves; None is an empty subtree.

`tree_flatten(x) -> (leaves, treedef)`; `tree_unflatten(treedef, leaves)` rebuilds it. Dicts
flatten in sorted-key order (so equal dicts flatten equally whatever their insertion order).
A treedef is plain, hashable, comparable data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from vkgrad.errors import ArgumentError


@dataclass(frozen=True)
class TreeDef:
    kind: str                 # 'leaf' | 'none' | 'tuple' | 'list' | 'dict' | 'namedtuple'
    children: tuple = ()
    meta: Any = None          # dict keys, or the namedtuple class

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(str(c) for c in self.children)
        if self.kind == "dict":
            return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(self.meta, self.children)) + "}"
        if self.kind == "list":
            return f"[{inner}]"
        return f"({inner}{',' if len(self.children) == 1 else ''})"


LEAF = TreeDef("leaf")


def tree_flatten(x) -> tuple[list, TreeDef]:
    leaves: list = []
    return leaves, _flatten(x, leaves)


def _flatten(x, leaves) -> TreeDef:
    if x is None:
        return TreeDef("none")
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return TreeDef("namedtuple", tuple(_flatten(c, leaves) for c in x), type(x))
    if isinstance(x, (tuple, list)):
        kind = "tuple" if isinstance(x, tuple) else "list"
        return TreeDef(kind, tuple(_flatten(c, leaves) for c in x))
    if isinstance(x, dict):
        try:
            keys = tuple(sorted(x))
        except TypeError:
            raise ArgumentError("dict keys of a pytree must be sortable (e.g. all str)") from None
        return TreeDef("dict", tuple(_flatten(x[k], leaves) for k in keys), keys)
    leaves.append(x)
    return LEAF


def tree_unflatten(treedef: TreeDef, leaves) -> Any:
    it = iter(leaves)
    out = _unflatten(treedef, it)
    if next(it, _END) is not _END:
        raise ArgumentError(f"too many leaves for the tree structure {treedef}")
    return out


_END = object()


def _unflatten(td: TreeDef, it):
    if td.kind == "leaf":
        v = next(it, _END)
        if v is _END:
            raise ArgumentError(f"too few leaves for the tree structure {td}")
        return v
    if td.kind == "none":
        return None
    kids = [_unflatten(c, it) for c in td.children]
    if td.kind == "tuple":
        return tuple(kids)
    if td.kind == "list":
        return kids
    if td.kind == "namedtuple":
        return td.meta(*kids)
    return dict(zip(td.meta, kids))


def tree_map(fn: Callable, tree, *rest) -> Any:
    leaves, td = tree_flatten(tree)
    others = []
    for r in rest:
        rl, rtd = tree_flatten(r)
        if rtd != td:
            raise ArgumentError(f"tree structures differ: {td} vs {rtd}")
        others.append(rl)
    return tree_unflatten(td, [fn(*xs) for xs in zip(leaves, *others)])


def tree_leaves(tree) -> list:
    return tree_flatten(tree)[0]
