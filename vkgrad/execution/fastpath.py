"""The jitted call's fast lane: generated Python for one argument structure.

A jitted training step is called thousands of times with arguments of one structure. The general
path flattens them with the pytree walker, builds the cache key (structure, types, statics) and
hashes it: about half of the host time of a call, which is the budget of a training step. After
a call took the general path, `guard` is generated for its arguments: straight-line code that
checks that a new call's arguments have exactly that structure and those types and returns
their leaves (None on any difference, and the call takes the general path). `builder` is
generated for a compiled program's output structure: one expression that builds the pytree.

What a guard checks, per node: the exact container type and length (dict: its key set), and per
leaf: its exact type, for an Array an aval that is the SAME object as before (avals of Arrays are
interned, so equal types are one object), for an ndarray the same shape and dtype (a scalar's
type decides its aval); static arguments compare equal. Anything else, a subclass included, is
a miss.
"""

from __future__ import annotations

import operator

import numpy as np

from vkgrad.tracer.array import intern  # noqa: F401  (the jit interns its avals)
from vkgrad.tracer.pytree import TreeDef, custom_unflatten

class _Gen:
    def __init__(self, array_cls):
        self.lines, self.leaves, self.consts, self.n = [], [], {"Array": array_cls,
                                                                "ndarray": np.ndarray}, 0

    def const(self, value) -> str:
        name = f"C{len(self.consts)}"
        self.consts[name] = value
        return name

    def var(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def check(self, cond: str, indent: int) -> None:
        self.lines.append(" " * indent + f"if {cond}: return None")

    def node(self, name: str, td: TreeDef, leaves, indent: int) -> None:
        """Check `name` against `td`, binding its children to fresh names."""
        if td.kind == "leaf":
            self.leaf(name, next(leaves), indent)
            return
        if td.kind == "none":
            self.check(f"{name} is not None", indent)
            return
        if td.kind == "dict":
            self.check(f"type({name}) is not dict or {name}.keys() != "
                       f"{self.const(frozenset(td.meta))}", indent)
            kids = [f"{name}[{self.const(k)}]" for k in td.meta]
        else:
            cls = {"tuple": "tuple", "list": "list"}.get(td.kind) or self.const(td.meta)
            self.check(f"type({name}) is not {cls} or len({name}) != {len(td.children)}", indent)
            kids = [f"{name}[{i}]" for i in range(len(td.children))]
        for expr, child in zip(kids, td.children):
            v = self.var()
            self.lines.append(" " * indent + f"{v} = {expr}")
            self.node(v, child, leaves, indent)

    def leaf(self, name: str, x, indent: int) -> None:
        self.leaves.append((name, x))


def guard(array_cls, nargs: int, trees, statics, leaves):
    """A function(args) -> leaves | None for calls like the one that had `trees` ((argnum,
    TreeDef) per dynamic argument), `statics` ((argnum, value) ...) and `leaves`. The
    containers are checked node by node; the leaves all at once, by `map` (in C): their types,
    then the avals of the Arrays, then the shapes and dtypes of the ndarrays."""
    g = _Gen(array_cls)
    g.check(f"len(args) != {nargs}", 4)
    for i, value in statics:
        g.check(f"args[{i}] != {g.const(value)}", 4)
    it = iter(leaves)
    for i, td in trees:
        v = g.var()
        g.lines.append(f"    {v} = args[{i}]")
        g.node(v, td, it, 4)
    names = [n for n, _ in g.leaves]
    arrays = [(n, x) for n, x in g.leaves if type(x) is array_cls]
    ndarrays = [(n, x) for n, x in g.leaves if type(x) is np.ndarray]
    g.lines.append(f"    L = [{', '.join(names)}]")
    g.check(f"list(map(type, L)) != {g.const([type(x) for _, x in g.leaves])}", 4)
    if arrays:
        g.check(f"list(map(aval_of, [{', '.join(n for n, _ in arrays)}])) != "
                f"{g.const([x._aval for _, x in arrays])}", 4)
    if ndarrays:
        g.check(f"list(map(shape_dtype, [{', '.join(n for n, _ in ndarrays)}])) != "
                f"{g.const([(x.shape, x.dtype) for _, x in ndarrays])}", 4)
    src = "def guard(args):\n" + "\n".join(g.lines) + "\n    return L\n"
    namespace = dict(g.consts, aval_of=operator.attrgetter("_aval"),
                     shape_dtype=operator.attrgetter("shape", "dtype"))
    exec(compile(src, "<vkgrad jit guard>", "exec"), namespace)
    return namespace["guard"]


def builder(treedef: TreeDef):
    """A function(leaves) -> pytree of the shape `treedef` (tree_unflatten as one expression)."""
    consts: dict = {}
    counter = iter(range(treedef.num_leaves))

    def expr(td: TreeDef) -> str:
        if td.kind == "leaf":
            return f"L[{next(counter)}]"
        if td.kind == "none":
            return "None"
        kids = [expr(c) for c in td.children]
        if td.kind == "tuple":
            return "(" + "".join(k + ", " for k in kids) + ")"
        if td.kind == "list":
            return "[" + ", ".join(kids) + "]"
        name = f"C{len(consts)}"
        consts[name] = td.meta
        if td.kind == "namedtuple":
            return f"{name}(" + ", ".join(kids) + ")"
        if td.kind == "custom":      # a registered node: its own unflatten (vg.tree_util)
            consts[name] = custom_unflatten(td.meta)
            return f"{name}([" + ", ".join(kids) + "])"
        return "{" + ", ".join(f"{name}[{j}]: {k}" for j, k in enumerate(kids)) + "}"

    return eval("lambda L: " + expr(treedef), consts)
