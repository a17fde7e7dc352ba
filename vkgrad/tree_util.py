"""vg.tree_util: pytrees, JAX's names (jax.tree_util).

    leaves, treedef = vg.tree_util.tree_flatten(params)
    params = vg.tree_util.tree_unflatten(treedef, leaves)
    grads = vg.tree_util.tree_map(lambda g: g * 0.5, grads)

A pytree is nested tuples, lists, dicts and namedtuples of leaves (arrays, scalars); None is an
empty subtree; `register_pytree_node(cls, flatten, unflatten)` (or the decorator
`register_pytree_node_class`, for a class with `tree_flatten()` and a classmethod
`tree_unflatten(aux, children)`) makes any class a node; `register_pytree_with_keys` (and
`register_pytree_with_keys_class`) one whose children have path entries of its own;
`register_dataclass` a dataclass; `register_static` a class whose instances are nodes with no
children, carried whole in the structure (static under vg.jit, as static_argnums). `Partial`
is a functools.partial that is a pytree (its arguments the children, its function static), so
a function with array arguments bound passes through vg.jit. Every transform, vg.jit and
vg.optim take and return pytrees.

Paths name where a leaf sits, with JAX's entries and printing: `DictKey('a')` prints `['a']`,
`SequenceKey(0)` `[0]`, `GetAttrKey('w')` `.w` (namedtuple fields, dataclass fields),
`FlattenedIndexKey(0)` `[<flat index 0>]` (a child of a node registered without keys):

    for path, leaf in vg.tree_util.tree_leaves_with_path(params):
        print(vg.tree_util.keystr(path), leaf.shape)       # ['blocks'][0]['w'] (3, 5)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Hashable, NamedTuple, TypeVar

from vkgrad.errors import ArgumentError
from vkgrad.tracer.pytree import (TreeDef, flatten_up_to, is_registered,  # noqa: F401
                                  register_pytree_node,
                                  tree_flatten, tree_leaves, tree_map, tree_structure,
                                  tree_unflatten)
from vkgrad.tracer.core import user_source

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


def treedef_is_leaf(treedef: TreeDef) -> bool:
    """True for the structure of a leaf (or of None), as jax.tree_util.treedef_is_leaf."""
    return not treedef.children


def all_leaves(iterable, is_leaf: Callable | None = None) -> bool:
    """True when every element of iterable is a leaf (None is not: it is an empty subtree)."""
    xs = list(iterable)
    leaves = tree_leaves(xs, is_leaf)
    return len(leaves) == len(xs) and all(a is b for a, b in zip(leaves, xs))


def tree_broadcast(prefix_tree, full_tree, is_leaf: Callable | None = None):
    """prefix_tree with each leaf repeated over the leaves of full_tree's subtree at its
    place: full_tree's structure (jax.tree_util.tree_broadcast)."""
    prefix = tree_structure(prefix_tree, is_leaf)
    subtrees = flatten_up_to(prefix, full_tree)
    leaves = [p for p, sub in zip(tree_leaves(prefix_tree, is_leaf), subtrees)
              for _ in range(tree_structure(sub, is_leaf).num_leaves)]
    return tree_unflatten(tree_structure(full_tree, is_leaf), leaves)


_NO_IDENTITY = object()


def tree_reduce_associative(operation: Callable, tree, *, identity: Any = _NO_IDENTITY,
                            is_leaf: Callable | None = None) -> Any:
    """The leaves combined by an associative operation in a balanced tree (log2(n) deep):
    operation(reduce(first half), reduce(second half)), JAX's order
    (jax.tree_util.tree_reduce_associative); identity for no leaves."""
    xs = tree_leaves(tree, is_leaf)
    if not xs:
        if identity is _NO_IDENTITY:
            raise ArgumentError("tree_reduce_associative of a tree with no leaves needs "
                                "identity=")
        return identity
    return _halves(operation, xs)


def _halves(operation, xs):
    if len(xs) == 1:
        return xs[0]
    h = len(xs) // 2
    return operation(_halves(operation, xs[:h]), _halves(operation, xs[h:]))


# ------------------------------------------------------------------------------------- paths

class DictKey(NamedTuple):
    key: Any

    def __str__(self):
        return f"[{self.key!r}]"


class SequenceKey(NamedTuple):
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


class GetAttrKey(NamedTuple):
    name: str

    def __str__(self):
        return f".{self.name}"


class FlattenedIndexKey(NamedTuple):
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


# registered class -> the names of its children, in flatten order (register_dataclass)
_child_names: dict[type, tuple] = {}
# registered class -> its flatten_with_keys: x -> ([(key, child), ...], aux)
_key_flatteners: dict[type, Callable] = {}


def keystr(path: tuple) -> str:
    """A path as JAX prints it: (DictKey('a'), SequenceKey(0)) -> "['a'][0]"."""
    return "".join(str(k) for k in path)


def _children_keys(x, is_leaf):
    """(x's children, their path entries), or None when x is a leaf."""
    kids, td = tree_flatten(x, lambda y: y is not x)    # one level: the children as leaves
    if td.kind == "leaf":
        return None
    if td.kind in ("tuple", "list"):
        keys = [SequenceKey(i) for i in range(len(kids))]
    elif td.kind == "dict":
        keys = [DictKey(k) for k in td.meta]
    elif td.kind == "namedtuple":
        keys = [GetAttrKey(f) for f in td.meta._fields]
    elif td.kind == "custom" and td.meta[0] in _key_flatteners:
        keys = [k for k, _ in _key_flatteners[td.meta[0]](x)[0]]
    elif td.kind == "custom" and td.meta[0] in _child_names:
        keys = [GetAttrKey(f) for f in _child_names[td.meta[0]]]
    else:
        keys = [FlattenedIndexKey(i) for i in range(len(kids))]
    return kids, keys


def _leaves_with_path(x, path, out, is_leaf):
    if is_leaf is not None and is_leaf(x):
        out.append((path, x))
        return
    if x is None:
        return
    level = _children_keys(x, is_leaf)
    if level is None:
        out.append((path, x))
        return
    for kid, key in zip(*level):
        _leaves_with_path(kid, path + (key,), out, is_leaf)


def tree_flatten_with_path(tree, is_leaf: Callable | None = None) -> tuple[list, TreeDef]:
    """([(path, leaf), ...], treedef), in tree_flatten's order."""
    out: list = []
    _leaves_with_path(tree, (), out, is_leaf)
    return out, tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf: Callable | None = None) -> list:
    out: list = []
    _leaves_with_path(tree, (), out, is_leaf)
    return out


def tree_map_with_path(fn: Callable, tree, *rest, is_leaf: Callable | None = None) -> Any:
    """fn(path, leaf, *other leaves) at every leaf of tree; rest have tree's structure."""
    pairs, td = tree_flatten_with_path(tree, is_leaf)
    others = [flatten_up_to(td, r) for r in rest]
    return tree_unflatten(td, [fn(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


def register_dataclass(nodetype: type | None = None, data_fields=None, meta_fields=None,
                       drop_fields=()):
    """Make a dataclass a pytree node (JAX's): `data_fields` are its children (paths
    `.name`), `meta_fields` its static, hashable aux data. Without either list, the fields
    whose `dataclasses.field(metadata=dict(static=True))` say so are meta, the others data.
    Usable as a decorator."""
    if nodetype is None:
        return lambda cls: register_dataclass(cls, data_fields, meta_fields, drop_fields)
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise ArgumentError(f"register_dataclass: {nodetype.__name__} is not a dataclass; "
                                "pass data_fields and meta_fields")
        fields = [f for f in dataclasses.fields(nodetype) if f.init and f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields or ())

    def flatten(x):
        return [getattr(x, n) for n in data_fields], tuple(getattr(x, n) for n in meta_fields)

    def unflatten(meta, children):
        return nodetype(**dict(zip(data_fields, children)), **dict(zip(meta_fields, meta)))

    register_pytree_node(nodetype, flatten, unflatten)
    _child_names[nodetype] = data_fields
    return nodetype


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable,
                              unflatten_func: Callable, flatten_func: Callable | None = None):
    """Make instances of nodetype pytree nodes whose children have path entries of their own
    (JAX's): flatten_with_keys(x) -> ([(key, child), ...], aux), unflatten_func(aux, children)
    -> x; flatten_func(x) -> (children, aux), when given, flattens without building the keys."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func)
    _key_flatteners[nodetype] = flatten_with_keys
    return nodetype


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: `x.tree_flatten_with_keys() -> ([(key, child), ...], aux)`,
    `cls.tree_unflatten(aux, children)`, and `x.tree_flatten()` if the class has one."""
    flatten = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    return register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(),
                                     cls.tree_unflatten, flatten)


def register_static(cls: type) -> type:
    """Make cls's instances pytree nodes with no children: each is carried whole as the aux
    data of its structure, so vg.jit treats it as static (part of the compile cache key, as
    a static_argnums value). Instances must be hashable. Usable as a decorator."""
    return register_pytree_with_keys(cls, lambda x: ((), x), lambda x, _: x)


def flatten_one_level(pytree) -> tuple:
    """(children, aux) of one pytree node, its children not flattened further (JAX's): a
    tuple or list gives (itself, None), a dict (its values, its sorted keys), None ((),
    None), a namedtuple (itself, its class), a registered node its flatten's pair. A leaf is an
    error."""
    kids, td = tree_flatten(pytree, lambda y: y is not pytree)
    if td.kind == "leaf":
        raise ArgumentError(f"flatten_one_level: {type(pytree).__name__} is a leaf, not a "
                            "pytree node", source=user_source())
    if td.kind in ("tuple", "list"):
        return pytree, None
    if td.kind == "dict":
        return tuple(kids), td.meta
    if td.kind == "none":
        return (), None
    if td.kind == "namedtuple":
        return pytree, td.meta
    return tuple(kids), td.meta[1]


def flatten_one_level_with_keys(pytree) -> tuple:
    """(((key, child), ...), aux) of one pytree node (JAX's): flatten_one_level's children,
    each with its path entry (DictKey, SequenceKey, GetAttrKey, ...)."""
    _, aux = flatten_one_level(pytree)
    kids, keys = _children_keys(pytree, None)
    return tuple(zip(keys, kids)), aux


def is_tree_node(typ: type) -> bool:
    """Whether instances of the type `typ` are pytree nodes, not leaves (JAX's): tuples,
    lists, dicts (and their subclasses, namedtuples), None's type and registered classes."""
    return typ is type(None) or is_registered(typ) or issubclass(typ, (tuple, list, dict))


def treedef_tuple(treedefs) -> TreeDef:
    """The structure of a tuple whose elements have the structures `treedefs` (JAX's)."""
    return TreeDef("tuple", tuple(treedefs))


def tree_transpose(outer_treedef: TreeDef, inner_treedef: TreeDef | None, pytree_to_transpose):
    """An outer tree of inner trees -> an inner tree of outer trees (jax.tree_util.
    tree_transpose); inner_treedef None: that of the first inner tree."""
    inners = flatten_up_to(outer_treedef, pytree_to_transpose)
    if inner_treedef is None:
        if not inners:
            raise ArgumentError("tree_transpose: an outer tree with no leaves needs "
                                "inner_treedef")
        inner_treedef = tree_structure(inners[0])
    rows = [flatten_up_to(inner_treedef, sub) for sub in inners]   # each: inner's structure
    columns = [tree_unflatten(outer_treedef, [r[i] for r in rows])
               for i in range(inner_treedef.num_leaves)]
    return tree_unflatten(inner_treedef, columns)


KeyEntry = TypeVar("KeyEntry", bound=Hashable)   # JAX's: a path entry (DictKey, ...)
KeyPath = tuple[KeyEntry, ...]


class _Registry:
    """jax.tree_util.default_registry: the one registry of pytree node types, as an object
    with JAX's methods over the functions of this module."""

    def flatten(self, tree, leaf_predicate=None):
        return tree_flatten(tree, leaf_predicate)

    def flatten_one_level(self, tree):
        return flatten_one_level(tree)

    def flatten_one_level_with_keys(self, tree):
        return flatten_one_level_with_keys(tree)

    def flatten_with_path(self, tree, leaf_predicate=None):
        return tree_flatten_with_path(tree, leaf_predicate)

    def is_node(self, typ) -> bool:
        return is_tree_node(typ)

    def register_node(self, nodetype, flatten_func, unflatten_func, flatten_with_keys=None):
        if flatten_with_keys is None:
            return register_pytree_node(nodetype, flatten_func, unflatten_func)
        return register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func,
                                         flatten_func)

    def register_dataclass_node(self, nodetype, data_fields, meta_fields):
        return register_dataclass(nodetype, data_fields, meta_fields)


default_registry = _Registry()


class _HashableCallable:
    """A callable whose hash and equality are those of the functools.partial it holds: it stops
    Partial(functools.partial(f, a), b) from merging a into its own arguments (the children)."""

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, *args, **kwargs):
        return self.fun(*args, **kwargs)

    def __hash__(self):
        return hash(self.fun)

    def __eq__(self, other):
        return self.fun == (other.fun if isinstance(other, _HashableCallable) else other)


class Partial(functools.partial):
    """A functools.partial that is a pytree (jax.tree_util.Partial): the bound positional and
    keyword arguments are its children (paths `.args[i]`, `.keywords['k']`), the function its
    static aux data. So a function with arrays bound can be an argument or a result of vg.jit
    and the other transforms:

        f = vg.jit(lambda g, x: g(x))
        f(vg.tree_util.Partial(vnp.add, w), x)     # w is traced, vnp.add static
    """

    def __new__(cls, func, *args, **kwargs):
        if not isinstance(func, functools.partial):
            return super().__new__(cls, func, *args, **kwargs)
        shim = _HashableCallable(func)   # keep func's own arguments out of ours
        out = super().__new__(cls, shim, *args, **kwargs)
        shim.func, shim.args, shim.keywords = func.func, func.args, func.keywords   # as JAX's
        return out


register_pytree_with_keys(
    Partial,
    lambda p: (((GetAttrKey("args"), p.args), (GetAttrKey("keywords"), p.keywords)), p.func),
    lambda func, kids: Partial(func, *kids[0], **kids[1]),
    lambda p: ((p.args, p.keywords), p.func))


__all__ = ["DictKey", "FlattenedIndexKey", "GetAttrKey", "PyTreeDef", "SequenceKey", "keystr",
           "register_dataclass", "register_pytree_node", "register_pytree_node_class",
           "tree_all", "tree_flatten", "tree_flatten_with_path", "tree_leaves",
           "tree_leaves_with_path", "tree_map", "tree_map_with_path", "tree_reduce",
           "tree_structure", "tree_unflatten", "treedef_children", "treedef_is_leaf",
           "all_leaves", "tree_broadcast", "tree_reduce_associative", "Partial",
           "flatten_one_level", "register_pytree_with_keys", "register_pytree_with_keys_class",
           "register_static", "flatten_one_level_with_keys", "is_tree_node", "treedef_tuple",
           "tree_transpose", "KeyEntry", "KeyPath", "default_registry"]
