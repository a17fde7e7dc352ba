"""Pytrees: nested tuples, lists, dicts (and namedtuples) of leaves; None is an empty subtree;
and any class registered with `register_pytree_node` (its flatten gives children and hashable
aux data, its unflatten rebuilds it). `vkgrad.tree_util` is the public face of this module.

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
    kind: str                 # 'leaf' | 'none' | 'tuple' | 'list' | 'dict' | 'namedtuple' | 'custom'
    children: tuple = ()
    meta: Any = None          # dict keys, the namedtuple class, or (registered class, aux)

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        return "".join(_render(self))


def _render(td: TreeDef) -> list:
    """The text of `td` as a list of pieces, each node visited once with an explicit stack:
    rendering every child once per use (as an f-string beside a join did) doubled the work at
    each dict level, 6.2 s at depth 22, and recursion would stop near depth 1,000."""
    out: list = []
    todo: list = [td]   # TreeDefs still to render, or str pieces to emit as they are
    while todo:
        t = todo.pop()
        if isinstance(t, str):
            out.append(t)
            continue
        if t.kind == "leaf":
            out.append("*")
            continue
        if t.kind == "none":
            out.append("None")
            continue
        labels = [f"{k!r}: " for k in t.meta] if t.kind == "dict" else [""] * len(t.children)
        if t.kind == "dict":
            opening, closing = "{", "}"
        elif t.kind == "list":
            opening, closing = "[", "]"
        elif t.kind == "custom":
            opening, closing = f"{t.meta[0].__name__}(", ")"
        else:   # tuple, namedtuple
            opening, closing = "(", ",)" if len(t.children) == 1 else ")"
        out.append(opening)
        todo.append(closing)
        for i in reversed(range(len(t.children))):
            todo.append(t.children[i])
            todo.append(("" if i == 0 else ", ") + labels[i])
    return out


LEAF = TreeDef("leaf")

# registered class -> (flatten: x -> (children, aux), unflatten: (aux, children) -> x)
_registry: dict[type, tuple[Callable, Callable]] = {}


def is_registered(nodetype: type) -> bool:
    """Whether register_pytree_node made nodetype a node type."""
    return nodetype in _registry


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable):
    """Make instances of `nodetype` pytree nodes (JAX's API): flatten_func(x) -> (children,
    aux_data), unflatten_func(aux_data, children) -> x. aux_data must be hashable."""
    if nodetype in _registry or nodetype in (tuple, list, dict, type(None)):
        raise ArgumentError(f"{nodetype.__name__} is already a pytree node type")
    _registry[nodetype] = (flatten_func, unflatten_func)
    return nodetype


def tree_flatten(x, is_leaf: Callable | None = None) -> tuple[list, TreeDef]:
    leaves: list = []
    return leaves, _flatten(x, leaves, is_leaf)


def _flatten(x, leaves, is_leaf=None) -> TreeDef:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return LEAF
    if x is None:
        return TreeDef("none")
    custom = _registry.get(type(x))
    if custom is not None:
        children, aux = custom[0](x)
        return TreeDef("custom", tuple(_flatten(c, leaves, is_leaf) for c in children),
                       (type(x), aux))
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return TreeDef("namedtuple", tuple(_flatten(c, leaves, is_leaf) for c in x), type(x))
    if isinstance(x, (tuple, list)):
        kind = "tuple" if isinstance(x, tuple) else "list"
        return TreeDef(kind, tuple(_flatten(c, leaves, is_leaf) for c in x))
    if isinstance(x, dict):
        try:
            keys = tuple(sorted(x))
        except TypeError:
            raise ArgumentError("dict keys of a pytree must be sortable (e.g. all str)") from None
        return TreeDef("dict", tuple(_flatten(x[k], leaves, is_leaf) for k in keys), keys)
    leaves.append(x)
    return LEAF


def flatten_up_to(treedef: TreeDef, tree) -> list:
    """The subtrees of `tree` at the leaf positions of `treedef` (a None where `tree` has None
    for a whole subtree: vjp's cotangents of integer leaves), in tree_flatten's order."""
    if treedef.kind == "leaf":
        return [tree]
    if treedef.kind == "none":
        return []
    if tree is None:
        return [None] * treedef.num_leaves
    kind = _flatten(tree, [], lambda x: x is not tree).kind   # tree's own top-level kind
    if kind != treedef.kind:
        raise ArgumentError(f"tree structures differ: {treedef} vs {tree_structure(tree)}")
    if treedef.kind == "dict":
        if sorted(tree) != list(treedef.meta):
            raise ArgumentError(f"tree structures differ: {treedef} vs {tree_structure(tree)}")
        kids = [tree[k] for k in treedef.meta]
    elif treedef.kind == "custom":
        kids = list(_registry[treedef.meta[0]][0](tree)[0])
    else:
        kids = list(tree)
    if len(kids) != len(treedef.children):
        raise ArgumentError(f"tree structures differ: {treedef} vs {tree_structure(tree)}")
    return [leaf for c, k in zip(treedef.children, kids) for leaf in flatten_up_to(c, k)]


def tree_unflatten(treedef: TreeDef, leaves) -> Any:
    it = iter(leaves)
    out = _unflatten(treedef, it)
    if next(it, _END) is not _END:
        raise ArgumentError(f"too many leaves for the tree structure {treedef}")
    return out


_END = object()


def custom_unflatten(meta):
    """children -> node, for a registered node type's TreeDef meta (cls, aux)."""
    unflatten = _registry[meta[0]][1]
    return lambda kids: unflatten(meta[1], kids)


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
    if td.kind == "custom":
        return _registry[td.meta[0]][1](td.meta[1], kids)
    return dict(zip(td.meta, kids))


def tree_map(fn: Callable, tree, *rest, is_leaf: Callable | None = None) -> Any:
    leaves, td = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        rl = flatten_up_to(td, r)
        if len(rl) != len(leaves):
            raise ArgumentError(f"tree structures differ: {td} vs {tree_flatten(r)[1]}")
        others.append(rl)
    return tree_unflatten(td, [fn(*xs) for xs in zip(leaves, *others)])


def tree_leaves(tree, is_leaf: Callable | None = None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf: Callable | None = None) -> TreeDef:
    return tree_flatten(tree, is_leaf)[1]
