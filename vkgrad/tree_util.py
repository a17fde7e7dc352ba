"""vg.tree_util: pytrees, JAX's names (jax.tree_util).

    leaves, treedef = vg.tree_util.tree_flatten(params)
    params = vg.tree_util.tree_unflatten(treedef, leaves)
    grads = vg.tree_util.tree_map(lambda g: g * 0.5, grads)

A pytree is nested tuples, lists, dicts and namedtuples of leaves (arrays, scalars); None is an
empty subtree; `register_pytree_node(cls, flatten, unflatten)` (or the decorator
`register_pytree_node_class`, for a class with `tree_flatten()` and a classmethod
`tree_unflatten(aux, children)`) makes any class a node. Every transform, vg.jit and
vg.optim take and return pytrees.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from vkgrad.tracer.pytree import (TreeDef, flatten_up_to, register_pytree_node,  # noqa: F401
                                  tree_flatten, tree_leaves, tree_map, tree_structure,
                                  tree_unflatten)

PyTreeDef = TreeDef


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: `x.tree_flatten() -> (children, aux)`, `cls.tree_unflatten(aux,
    children)`."""
    return register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)


def tree_reduce(fn: Callable, tree, initializer: Any = None, is_leaf=None) -> Any:
    leaves = tree_leaves(tree, is_leaf)
    return functools.reduce(fn, leaves) if initializer is None else \
        functools.reduce(fn, leaves, initializer)


def tree_all(tree) -> bool:
    return all(tree_leaves(tree))


def treedef_children(treedef: TreeDef) -> list:
    return list(treedef.children)


__all__ = ["PyTreeDef", "register_pytree_node", "register_pytree_node_class", "tree_all",
           "tree_flatten", "tree_leaves", "tree_map", "tree_reduce", "tree_structure",
           "tree_unflatten", "treedef_children"]
