"""Tracing a Python function into a Program, and what the transforms share around it.

Every transform (grad, vjp, jvp, vmap in this package; vg.jit, custom rules and vkgrad.dump
elsewhere) traces `fun` on abstract versions of its (flattened pytree) arguments into a Program,
in a fresh trace pushed on top of whatever is active (`trace_function`), then transforms and
evaluates that Program. make_ir and trace return the Program itself.
"""

from __future__ import annotations

import functools
import inspect
import re

import numpy as np

from vkgrad.errors import ArgumentError
from vkgrad.ir.core import Program, np_dtype
from vkgrad.ir.verifier import checked
from vkgrad.dtypes import canonical_array
from vkgrad.tracer.array import host_array
from vkgrad.tracer.core import (ArrayOps, ShapeDtype, Tracer, abstract_leaf, current_trace,
                                new_trace, source_location, user_source)
from vkgrad.tracer.pytree import TreeDef, tree_flatten, tree_unflatten
from vkgrad.traceback_util import api_boundary


def check_function(fun, what: str) -> None:
    """Refuse anything but a callable where `vg.<what>` expects the function to transform (else
    the mistake surfaces later as "'int' object is not callable", far from its cause)."""
    if not callable(fun):
        shown = repr(fun) if len(repr(fun)) <= 60 else repr(fun)[:57] + "..."
        raise ArgumentError(f"vg.{what} expects a function, got {type(fun).__name__} {shown}",
                            source=user_source())


def fun_name(fun) -> str:
    """fun's name as an identifier (for programs, messages and logs)."""
    f = fun.func if isinstance(fun, functools.partial) else fun
    name = getattr(f, "__name__", type(f).__name__)
    return re.sub(r"\W", "_", name).strip("_") or "fun"


def fun_where(fun) -> str:
    """Where fun is defined: 'file.py:line', or the notebook cell."""
    code = getattr(fun.func if isinstance(fun, functools.partial) else fun, "__code__", None)
    if code is None:
        return "?"
    where = source_location(code.co_filename, code.co_firstlineno)
    return where if where.startswith("Cell ") else \
        f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"


class Traced:
    """A traced function: its program, output structure, and what to evaluate it with."""

    def __init__(self, program, out_tree, leaves, captured, arg_slices, arg_trees):
        self.program = program
        self.out_tree: TreeDef = out_tree
        self.leaves = leaves            # the concrete (or outer-trace) argument leaves
        self.captured = captured        # outer-trace values captured as extra inputs
        self.arg_slices = arg_slices    # positional arg index -> slice of leaves (None: static)
        self.arg_trees = arg_trees

    @property
    def args(self) -> list:
        return list(self.leaves) + list(self.captured)


def trace_function(fun, args, static_argnums=(), allow_spec=False, concrete=False) -> Traced:
    """fun traced on `args` (static_argnums passed through as Python values; allow_spec: leaves
    may be vkgrad.ShapeDtype specs). concrete: the trace knows the arguments' values (the eager
    transforms, as JAX's outside jit), so Python may read values computed from them (`if x > 0`);
    a tracer of an enclosing abstract trace (jit) has none, and reading it stays an error. Such a
    program holds for these values only: the eager transforms trace on every call and cache no
    program, so it is never reused for others."""
    name = fun_name(fun)
    static = set(normalize_argnums(static_argnums, len(args), "static_argnums")) \
        if static_argnums != () else set()
    leaves, types, slices, trees = [], [], [], []
    for i, a in enumerate(args):
        if i in static:
            slices.append(None)
            trees.append(None)
            continue
        ls, tree = tree_flatten(a)
        types += [abstract_leaf(x, f"argument {i} of {name}", allow_spec) for x in ls]
        slices.append(slice(len(leaves), len(leaves) + len(ls)))
        trees.append(tree)
        leaves += ls
    src = user_source()
    with new_trace(name) as t:
        tracers = [t.new_arg(ty.shape, ty.dtype, src) for ty in types]
        if concrete:
            t.known = dict(zip(t.inputs, leaves))
        rebuilt = [a if sl is None else tree_unflatten(tree, tracers[sl])
                   for a, sl, tree in zip(args, slices, trees)]
        out = fun(*rebuilt)
        out_leaves, out_tree = tree_flatten(out)
        for j, o in enumerate(out_leaves):
            abstract_leaf(o, f"result leaf {j} of {name}")
        program, captured = t.finish(out_leaves)
    if any(tree is not None and tree.kind != "leaf" for tree in trees):
        program = program.replace(arg_names=_leaf_names(fun, args, trees))
    return Traced(checked(program, f"tracing {name}"), out_tree, leaves, captured, slices, trees)


def _leaf_names(fun, args, trees) -> tuple:
    """"params['w']", "x", "batch[0]": where each input leaf comes from (for printing, when an
    argument is a pytree)."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, tree in enumerate(trees):
        if tree is not None:
            base = params[i] if i < len(params) and not params[i].startswith("*") else f"arg{i}"
            names += _paths(tree, base)
    return tuple(names)


def _paths(tree: TreeDef, prefix: str) -> list:
    if tree.kind == "leaf":
        return [prefix]
    if tree.kind == "dict":
        return [p for k, c in zip(tree.meta, tree.children) for p in _paths(c, f"{prefix}[{k!r}]")]
    if tree.kind == "namedtuple":
        return [p for f, c in zip(tree.meta._fields, tree.children)
                for p in _paths(c, f"{prefix}.{f}")]
    return [p for i, c in enumerate(tree.children) for p in _paths(c, f"{prefix}[{i}]")]


def normalize_argnums(argnums, nargs, what="argnums") -> tuple:
    """argnums (an int or a sequence) as distinct non-negative positions among nargs."""
    many = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if many else (argnums,)
    out = []
    for a in nums:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool) or not -nargs <= a < nargs:
            raise ArgumentError(f"{what}={argnums!r} does not name positional arguments of a "
                                f"call with {nargs} argument(s)", source=user_source())
        out.append(int(a) % nargs)
    if len(set(out)) != len(out):
        raise ArgumentError(f"{what}={argnums!r} repeats an argument", source=user_source())
    return tuple(out)


def bind_kwargs(fun, kwargs):
    """Keyword arguments are not differentiated: they are closed over (arrays in them become
    consts, values of an enclosing trace captured inputs)."""
    return functools.partial(fun, **kwargs) if kwargs else fun


def is_final() -> bool:
    """True when results are computed now (not traced into an enclosing program)."""
    return current_trace() is None


def to_user(x):
    """A result as users get it: Arrays and tracers as they are, anything else as an Array."""
    return x if isinstance(x, ArrayOps) or x is None else host_array(canonical_array(
        np.asarray(x)))


def make_ir(fun, static_argnums=()):
    """`make_ir(fun)(*args) -> Program`: the program `fun` traces to on these arguments (arrays,
    scalars, pytrees of them, or vkgrad.ShapeDtype specs). `str(program)` is its text."""
    check_function(fun, "make_ir")
    @api_boundary
    @functools.wraps(fun)
    def make(*args, **kwargs) -> Program:
        traced = trace_function(bind_kwargs(fun, kwargs), args, static_argnums, allow_spec=True)
        return traced.program
    return make


def trace(fun, args, static_argnums=()) -> Program:
    """The Program `fun` traces to on `args` (a tuple of arrays, scalars, pytrees of them, or
    vkgrad.ShapeDtype specs); static_argnums are passed through as Python values."""
    return trace_function(fun, tuple(args), static_argnums, allow_spec=True).program


class ShapeDtypeStruct:
    """A shape and a dtype, no data (jax.ShapeDtypeStruct): what eval_shape returns, and an
    argument eval_shape (and make_ir) can trace on. dtype is numpy's, as JAX's."""
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

    def __eq__(self, other):
        return isinstance(other, ShapeDtypeStruct) and (self.shape, self.dtype) == \
            (other.shape, other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))


def _spec(x):
    """An eval_shape argument leaf as a trace argument: ShapeDtypeStructs (and arrays, which
    need not be read) become ShapeDtype specs; Python scalars stay (weakly typed)."""
    if isinstance(x, ShapeDtypeStruct):
        return ShapeDtype(x.shape, x.dtype)
    if isinstance(x, (np.ndarray, np.generic, ArrayOps)) and not isinstance(x, Tracer):
        return ShapeDtype(x.shape, abstract_leaf(x, "an argument of eval_shape").dtype)
    return x


def typeof(x) -> ShapeDtypeStruct:
    """x's abstract value, its shape and dtype (jax.typeof): of an array, a tracer (its traced
    type, no value read) or a Python scalar (float32 for a float, int32 for an int, as JAX's
    weakly typed scalars)."""
    t = abstract_leaf(x, "the argument of typeof")
    return ShapeDtypeStruct(t.shape, np_dtype(t.dtype))


def eval_shape(fun, *args, **kwargs):
    """The shapes and dtypes of fun's results, a pytree of ShapeDtypeStructs, from a trace
    alone: nothing is computed (jax.eval_shape). Arguments may be arrays, scalars or
    ShapeDtypeStructs, in pytrees."""
    check_function(fun, "eval_shape")
    specs = tuple(tree_unflatten(t, [_spec(x) for x in ls])
                  for ls, t in map(tree_flatten, args))
    traced = trace_function(bind_kwargs(fun, kwargs), specs, allow_spec=True)
    outs = [ShapeDtypeStruct(getattr(o, "shape", ()), np_dtype(o.dtype))   # a Literal is 0-d
            for o in traced.program.outputs]
    return tree_unflatten(traced.out_tree, outs)
