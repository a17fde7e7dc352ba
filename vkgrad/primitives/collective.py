"""psum, pmax, pmin: reductions over a NAMED axis (JAX's collectives), variadic (one eqn reduces
every leaf of a pytree), each result the operand's type.

A named axis is bound while a function is traced, as in JAX, by
    vg.vmap(f, axis_name="i")                     the mapped axis: the batching rule below turns
                                                  the collective into a reduction over it, so it
                                                  never reaches a compiled program;
    vg.distributed.data_parallel(f, axis_name=)   the processes of the MPI world: the eqn stays in
                                                  the program and its impl all-reduces through the
                                                  installed communicator (vkgrad/distributed.py);
                                                  on Vulkan the program is split at it
                                                  (vkgrad/execution/segmented.py).
`bound_axis(name, size)` binds a name while tracing; `batching_axis(name)` says which name the
batching rules are mapping (vkgrad/transforms/batching.py sets it).

An eqn holds its axes' names and `axis_size`, the number of members they hold together (as
jax.lax.axis_size). Over one member a collective is the identity (the sum over one member is
its value): the simplification pass removes it (vkgrad/passes/simplify.py, psum_one_member and
its siblings, as XLA's AllReduceSimplifier removes an all-reduce over groups of one), so a
data-parallel step in a world of one process compiles to the program vg.jit makes of it
without the collectives: one submission, no host step, the same bits. The traced stage of the
dump still shows the collective; the optimized stage no longer does.

VJP: the cotangent of a psum is the psum of the cotangent (JAX's pmap rule: every member's
result depends on every member's operand); pmax and pmin have no VJP, as in JAX.
"""

from __future__ import annotations

import contextlib
import contextvars
import math

from vkgrad.dtypes import NUMERIC_DTYPES
from vkgrad.errors import ArgumentError
from vkgrad.ir.core import Primitive, TensorType, abstract_eval_rules, batching_rules, vjp_rules
from vkgrad.ir.interpreter import impls
from vkgrad.primitives.lax import _check_dtypes, mul, reduce_max, reduce_min, reduce_sum
from vkgrad.tracer.core import bind, user_source

# ((name, size), ...) bound while tracing, innermost last
_bound: contextvars.ContextVar = contextvars.ContextVar("vkgrad_axes", default=())
# (name, size) of the axis the batching rules map now, or None
_batching: contextvars.ContextVar = contextvars.ContextVar("vkgrad_batching_axis", default=None)


@contextlib.contextmanager
def bound_axis(name, size: int):
    """Bind the axis `name` of `size` members while tracing (vmap, data_parallel); None binds
    nothing (an unnamed vmap)."""
    if name is None:
        yield
        return
    token = _bound.set(_bound.get() + ((name, int(size)),))
    try:
        yield
    finally:
        _bound.reset(token)


@contextlib.contextmanager
def batching_axis(name, size: int):
    """The axis the batching rules map over now, of `size` examples (name None: an unnamed
    vmap)."""
    token = _batching.set(None if name is None else (name, size))
    try:
        yield
    finally:
        _batching.reset(token)


def over_mapped_axis(e) -> bool:
    """Whether eqn e is a collective over the axis the batching rules map now: it needs its
    batching rule even where no operand is mapped (the psum over the examples of a value that
    is the same for each is size times it)."""
    mapped = _batching.get()
    return e.prim in REDUCERS and mapped is not None and mapped[0] in e.params["axes"]


def axis_size(axis_name) -> int:
    """The number of members of the bound axis (or tuple of axes) `axis_name`, as JAX's
    lax.axis_size; an unbound name is an error naming it."""
    names = axis_name if isinstance(axis_name, (tuple, list)) else (axis_name,)
    bound = dict(_bound.get())
    unbound = [n for n in names if n not in bound]
    if unbound:
        raise ArgumentError(
            f"unbound axis name: {unbound[0]!r} (bound here: {sorted(map(str, bound)) or 'none'});"
            f" a collective reduces over an axis bound by vg.vmap(f, axis_name={unbound[0]!r}) "
            f"or vg.distributed.data_parallel(f, axis_name={unbound[0]!r})",
            source=user_source())
    return math.prod(bound[n] for n in names)


class SingleProcess:
    """The communicator of a world of one process: every collective is the identity."""
    size = 1

    def all_reduce(self, arrays, op: str) -> list:
        return list(arrays)


_communicator = [SingleProcess()]


def set_communicator(comm) -> None:
    """Install the object whose `all_reduce(arrays, op)` the collectives' impl calls (an MPI
    world: vkgrad/distributed.py)."""
    _communicator[0] = comm


def communicator():
    return _communicator[0]


def _type_rule(name):
    def rule(*xs, axes, axis_size):
        for x in xs:    # each operand on its own: a pytree's leaves may differ in dtype
            _check_dtypes(name, [x], NUMERIC_DTYPES)
        return [TensorType(x.shape, x.dtype) for x in xs]
    return rule


REDUCERS = {}      # primitive -> (op name, reduction over one axis, the unmapped member's value)


def _collective(name: str, op: str, reduce, of_unmapped):
    p = Primitive(name, ("pure",), multiple_results=True)
    abstract_eval_rules[p] = _type_rule(name)
    impls[p] = lambda *xs, axes, axis_size: communicator().all_reduce(xs, op)
    batching_rules[p] = lambda args, dims, **params: _batch(p, args, dims, **params)
    REDUCERS[p] = (op, reduce, of_unmapped)
    return p


psum_p = _collective("psum", "sum", reduce_sum, lambda x, n: mul(x, n))
pmax_p = _collective("pmax", "max", reduce_max, lambda x, n: x)
pmin_p = _collective("pmin", "min", reduce_min, lambda x, n: x)
# out = sum over members of x: each member's x reaches every member's out, so dx = psum(g)
vjp_rules[psum_p] = lambda gs, ans, *xs, **params: tuple(bind(psum_p, *gs, **params))


def _batch(p, args, dims, axes, axis_size):
    """Under vmap: the vmapped axis' name reduces over the mapped axis (the result is the same
    for every example: unmapped); other names stay collectives over the batched values."""
    name, size = _batching.get() or (None, None)
    if name not in axes:
        return bind(p, *args, axes=axes, axis_size=axis_size), list(dims)
    _, reduce, of_unmapped = REDUCERS[p]
    outs = [of_unmapped(a, size) if d is None else reduce(a, (d,)) for a, d in zip(args, dims)]
    rest = tuple(a for a in axes if a != name)
    if rest:
        outs = bind(p, *outs, axes=rest, axis_size=axis_size // size)
    return list(outs), [None] * len(outs)


def collective(p, xs, axis_name):
    """Bind collective `p` on the arrays `xs` over `axis_name` (a name or a tuple of names),
    checking the names are bound."""
    axes = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    size = axis_size(axes)
    if not xs:
        return []
    return bind(p, *xs, axes=axes, axis_size=size)

