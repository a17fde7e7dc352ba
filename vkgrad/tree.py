"""vg.tree: JAX's jax.tree module, the short names over vkgrad.tree_util.

    grads = vg.tree.map(lambda g: g * 0.5, grads)
    leaves, treedef = vg.tree.flatten(params)
    for path, leaf in vg.tree.leaves_with_path(params): ...
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
from typing import Any, Callable

from vkgrad.tree_util import (TreeDef, tree_broadcast, tree_flatten, tree_flatten_with_path,
                              tree_leaves, tree_leaves_with_path, tree_map, tree_map_with_path,
                              tree_reduce_associative, tree_structure, tree_transpose,
                              tree_unflatten)

_MISSING = object()


def map(f: Callable, tree, *rest, is_leaf: Callable | None = None) -> Any:  # noqa: A001
    return tree_map(f, tree, *rest, is_leaf=is_leaf)


def leaves(tree, is_leaf: Callable | None = None) -> list:
    return tree_leaves(tree, is_leaf)


def structure(tree, is_leaf: Callable | None = None) -> TreeDef:
    return tree_structure(tree, is_leaf)


def flatten(tree, is_leaf: Callable | None = None) -> tuple[list, TreeDef]:
    return tree_flatten(tree, is_leaf)


def unflatten(treedef: TreeDef, leaves) -> Any:  # noqa: F811
    return tree_unflatten(treedef, leaves)


def flatten_with_path(tree, is_leaf: Callable | None = None):
    return tree_flatten_with_path(tree, is_leaf)


def leaves_with_path(tree, is_leaf: Callable | None = None) -> list:
    return tree_leaves_with_path(tree, is_leaf)


def map_with_path(f: Callable, tree, *rest, is_leaf: Callable | None = None) -> Any:
    return tree_map_with_path(f, tree, *rest, is_leaf=is_leaf)


def all(tree, *, is_leaf: Callable | None = None) -> bool:  # noqa: A001
    return builtins.all(tree_leaves(tree, is_leaf))


def reduce(function: Callable, tree, initializer: Any = _MISSING,
           is_leaf: Callable | None = None) -> Any:
    xs = tree_leaves(tree, is_leaf)
    if initializer is _MISSING:
        return functools.reduce(function, xs)
    return functools.reduce(function, xs, initializer)


def transpose(outer_treedef: TreeDef, inner_treedef: TreeDef | None, pytree_to_transpose):
    """An outer tree of inner trees -> an inner tree of outer trees (jax.tree.transpose);
    inner_treedef None: that of the first inner tree."""
    return tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose)


def static(**field_kwargs):
    """A dataclass field marked static (jax.tree.static): dataclasses.field(**field_kwargs)
    with metadata static=True, so register_dataclass carries it in the structure, not as a
    leaf."""
    metadata = dict(field_kwargs.pop("metadata", None) or {}, static=True)
    return dataclasses.field(metadata=metadata, **field_kwargs)


def broadcast(prefix_tree, full_tree, is_leaf: Callable | None = None):
    """prefix_tree's leaves repeated over full_tree's structure (jax.tree.broadcast)."""
    return tree_broadcast(prefix_tree, full_tree, is_leaf)


def reduce_associative(operation: Callable, tree, *, identity: Any = _MISSING,
                       is_leaf: Callable | None = None) -> Any:
    """The leaves combined pairwise by an associative operation (jax.tree.reduce_associative)."""
    kw = {} if identity is _MISSING else {"identity": identity}
    return tree_reduce_associative(operation, tree, is_leaf=is_leaf, **kw)


__all__ = ["all", "broadcast", "reduce_associative", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map",
           "map_with_path", "reduce", "static", "structure", "transpose", "unflatten"]
