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

from vkgrad.runtime.inflight import HostResult
from vkgrad.runtime.pool import Owned
from vkgrad.runtime.runners import picker
from vkgrad.tracer.array import (Array, _slots, intern, shares,  # noqa: F401  (the jit
                                 views)                             # interns its avals)
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

    def check(self, cond: str) -> None:
        self.lines.append(f"    if {cond}: return None")

    def node(self, name: str, td: TreeDef, leaves) -> None:
        """Check `name`'s exact type and length, then bind its children to fresh names in one
        statement: a dict's by one itemgetter (a missing key raises KeyError: a miss), a
        list's or tuple's by unpacking."""
        if td.kind == "leaf":
            self.leaves.append((name, next(leaves)))
            return
        if td.kind == "none":
            self.check(f"{name} is not None")
            return
        if td.kind == "custom":   # a registered node: its flatten is not inlined here
            self.check("True")
            return
        kids = [self.var() for _ in td.children]
        cls = {"dict": "dict", "tuple": "tuple", "list": "list"}.get(td.kind) or \
            self.const(td.meta)
        self.check(f"type({name}) is not {cls} or len({name}) != {len(kids)}")
        if kids:
            source = f"{self.const(_getter(td.meta))}({name})" if td.kind == "dict" else name
            self.lines.append(f"    {''.join(k + ', ' for k in kids)}= {source}")
        for k, child in zip(kids, td.children):
            self.node(k, child, leaves)


def _getter(keys):
    """itemgetter of `keys` that returns a tuple for any number of them."""
    get = operator.itemgetter(*keys)
    return get if len(keys) > 1 else lambda d: (get(d),)


def guard(array_cls, nargs: int, trees, statics, leaves):
    """A function(args) -> leaves | None for calls like the one that had `trees` ((argnum,
    TreeDef) per dynamic argument), `statics` ((argnum, value) ...) and `leaves`. The
    containers are checked one by one (type and length), their children taken in one statement
    each; the leaves all at once, by `map` (in C): their types, then the avals of the Arrays,
    then the shapes and dtypes of the ndarrays."""
    g = _Gen(array_cls)
    g.check(f"len(args) != {nargs}")
    for i, value in statics:
        g.check(f"args[{i}] != {g.const(value)}")
    it = iter(leaves)
    for i, td in trees:
        v = g.var()
        g.lines.append(f"    {v} = args[{i}]")
        g.node(v, td, it)
    names = [n for n, _ in g.leaves]
    arrays = [(n, x) for n, x in g.leaves if type(x) is array_cls]
    ndarrays = [(n, x) for n, x in g.leaves if type(x) is np.ndarray]
    g.lines.append(f"    L = [{', '.join(names)}]")
    g.check(f"list(map(type, L)) != {g.const([type(x) for _, x in g.leaves])}")
    if arrays:   # (every leaf an Array, a training step's case: L itself)
        which = "L" if len(arrays) == len(names) else f"[{', '.join(n for n, _ in arrays)}]"
        g.check(f"list(map(aval_of, {which})) != {g.const([x._aval for _, x in arrays])}")
    if ndarrays:
        g.check(f"list(map(shape_dtype, [{', '.join(n for n, _ in ndarrays)}])) != "
                f"{g.const([(x.shape, x.dtype) for _, x in ndarrays])}")
    body = "\n".join("    " + line for line in g.lines)
    src = ("def guard(args):\n    try:\n" + body +
           "\n    except KeyError:   # a dict without one of the keys\n        return None"
           "\n    return L\n")
    namespace = dict(g.consts, aval_of=operator.attrgetter("_aval"),
                     shape_dtype=operator.attrgetter("shape", "dtype"))
    exec(compile(src, "<vkgrad jit guard>", "exec"), namespace)
    return namespace["guard"]


def builder(treedef: TreeDef):
    """A function(leaves) -> pytree of the shape `treedef` (tree_unflatten as one expression:
    the leaves unpacked into locals first, and a dict whose keys are all str or int written
    with its keys as literals, which CPython builds in one step)."""
    consts: dict = {}
    counter = iter(range(treedef.num_leaves))

    def expr(td: TreeDef) -> str:
        if td.kind == "leaf":
            return f"a{next(counter)}"
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
        if all(type(key) in (str, int) for key in td.meta):
            return "{" + ", ".join(f"{key!r}: {k}" for key, k in zip(td.meta, kids)) + "}"
        return "{" + ", ".join(f"{name}[{j}]: {k}" for j, k in enumerate(kids)) + "}"

    body = expr(treedef)
    n = treedef.num_leaves
    unpack = f"    {''.join(f'a{i}, ' for i in range(n))}= L\n" if n else ""
    src = f"def build(L):\n{unpack}    return {body}\n"
    exec(compile(src, "<vkgrad jit results>", "exec"), consts)
    return consts["build"]


def results(out_avals, owned_results=None, future_results=None):
    """A function(outs) -> one Array per program output, from a runner's outs (per output an
    Owned, a HostResult or host data). `owned_results`: the outputs that are always Owned (a
    VulkanRunner's), `future_results` those that are always HostResults: with kp's slot writer
    (vkgrad/tracer/array.py) every Array is made by one kp.new_slotted, in the outputs' order,
    host data given to its Array afterwards; else the Owned ones by one map, the others one by
    one."""
    if not owned_results:
        return lambda outs: _arrays(out_avals, outs)
    rest = [i for i in range(len(out_avals)) if i not in owned_results]
    dev, other = picker(owned_results), picker(rest)
    dev_avals, other_avals = dev(out_avals), other(out_avals)
    at = {i: k for k, i in enumerate(owned_results + rest)}
    order = picker([at[i] for i in range(len(out_avals))])   # [*dev, *other] -> outputs
    by_kind = lambda outs: order(views(dev_avals, dev(outs)) + _arrays(other_avals, other(outs)))
    if future_results is None:
        return by_kind
    n, avals = len(out_avals), list(out_avals)
    futures = list(future_results)
    hosted = [i for i in rest if i not in set(futures)]   # host data (a const, a literal)
    not_owned = futures + hosted
    nones = [None] * n

    def made(outs):
        w = _slots[0]
        if w is None:
            return by_kind(outs)
        owned, future = list(outs), nones.copy()
        for i in not_owned:
            owned[i] = None
        for i in futures:
            future[i] = outs[i]
        arrays = w.new_slotted(Array, n, {"_aval": avals, "_owned": owned, "_future": future},
                               _UNSET)
        shares[0] += w.add_to_slots(owned, "users", 1)   # second views, as in Array.__init__
        for i in hosted:
            arrays[i]._set_host(outs[i])
        return arrays
    return made


_UNSET = {"_host": None, "_deleted": False}


def _arrays(avals, outs) -> list:
    return [Array(aval, x) if type(x) is Owned else
            Array(aval, future=x) if type(x) is HostResult else Array(aval, host=x)
            for aval, x in zip(avals, outs)]
