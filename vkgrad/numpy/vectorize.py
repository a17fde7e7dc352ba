"""Functions applied over arrays, as jax.numpy's: vectorize (numpy's generalized-ufunc
signatures), apply_along_axis, apply_over_axes and piecewise. Each is vg.vmap of the user's
function over the axes it does not see (JAX's construction), so a function written for one
example runs as one batched program: nothing loops in Python over the elements."""

from __future__ import annotations

import functools
import re

import numpy as _np

from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.numpy.creation import arange, zeros
from vkgrad.numpy.dtypes import asarray, astype, dtype_of
from vkgrad.numpy.shapes import broadcast_shapes, expand_dims, squeeze
from vkgrad.numpy.ufuncs import where
from vkgrad.numpy.util import normalize_axes
from vkgrad.tracer.core import user_source
from vkgrad.transforms.tracing import check_function
from vkgrad.transforms.vectorization import vmap

__all__ = ["vectorize", "apply_along_axis", "apply_over_axes", "piecewise"]

# numpy's grammar of a generalized-ufunc signature: "(m,n),(n)->(m)"
_DIMENSION = r"\w+"
_CORE_DIMENSIONS = f"(?:{_DIMENSION}(?:,{_DIMENSION})*)?"
_ARGUMENT = rf"\({_CORE_DIMENSIONS}\)"
_ARGUMENTS = f"{_ARGUMENT}(?:,{_ARGUMENT})*"
_SIGNATURE = f"^{_ARGUMENTS}->{_ARGUMENTS}$"


def _parse_signature(signature: str):
    """"(m,n),(n)->(m)" -> ([('m', 'n'), ('n',)], [('m',)])."""
    signature = re.sub(r"\s+", "", signature)
    if not re.match(_SIGNATURE, signature):
        raise ArgumentError(f"vectorize: not a valid gufunc signature: {signature!r}",
                            source=user_source())
    return [[tuple(re.findall(_DIMENSION, a)) for a in re.findall(_ARGUMENT, side)]
            for side in signature.split("->")]


def _update_sizes(sizes: dict, shape, core_dims, where: str, is_input: bool) -> None:
    """Record each core dimension's size from `shape`'s last axes; a second size for the same
    name is an error, as numpy's and JAX's."""
    n = len(core_dims)
    if (len(shape) < n) if is_input else (len(shape) != n):
        what = "does not have enough dimensions for all core dimensions" if is_input else \
            "does not match core dimensions"
        raise ShapeError(f"vectorize: {'input' if is_input else 'output'} with shape "
                         f"{tuple(shape)} {what} {core_dims} {where}", source=user_source())
    for dim, size in zip(core_dims, tuple(shape)[len(shape) - n:]):
        if sizes.setdefault(dim, size) != size:
            raise ShapeError(f"vectorize: inconsistent size for core dimension {dim!r}: "
                             f"{size} vs {sizes[dim]} {where}", source=user_source())


def _apply_excluded(func, excluded, args, kwargs):
    """(func with the excluded positional and keyword arguments bound, the other args, the
    other kwargs)."""
    if not excluded:
        return func, args, kwargs
    static = [(i, args[i]) for i in sorted(e for e in excluded if isinstance(e, int))
              if i < len(args)]
    static_kw = {k: v for k, v in kwargs.items() if k in excluded}

    def bound(*dyn, **kw):
        full = list(dyn)
        for i, a in static:
            full.insert(i, a)
        return func(*full, **kw, **static_kw)

    return (bound, [a for i, a in enumerate(args) if i not in excluded],
            {k: v for k, v in kwargs.items() if k not in excluded})


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """jnp.vectorize: pyfunc, written for one element (or, with a signature such as
    "(n),(n)->()", for arrays with those core dimensions last), mapped with vg.vmap over the
    broadcast leading dimensions of its arguments. `excluded` positions (ints) and keywords
    (strs) are passed to pyfunc as they are; a keyword argument not excluded is refused (JAX
    drops it silently). Without a signature pyfunc may return any shape. A size-1 leading
    dimension is not mapped but broadcast, as JAX's."""
    check_function(pyfunc, "numpy.vectorize")
    if any(not isinstance(e, (str, int)) for e in excluded):
        raise ArgumentError(f"vectorize can only exclude integer or string arguments, but "
                            f"excluded={excluded!r}", source=user_source())
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise ArgumentError(f"vectorize: excluded={excluded!r} contains negative numbers",
                            source=user_source())

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        where = f"(on vectorized function with excluded={excluded!r} and " \
                f"signature={signature!r})"
        func, args, kwargs = _apply_excluded(pyfunc, excluded, args, kwargs)
        if kwargs:
            raise ArgumentError(f"vectorize: keyword arguments {sorted(kwargs)} are not in "
                                f"excluded={excluded!r}; only positional arguments are "
                                "mapped, so pass them positionally or exclude them",
                                source=user_source())
        if signature is not None:
            in_dims, out_dims = _parse_signature(signature)
        else:
            in_dims, out_dims = [()] * len(args), None
        nones = {i for i, a in enumerate(args) if a is None}
        if nones:
            if any(in_dims[i] != () for i in nones):
                raise ArgumentError(f"vectorize: cannot pass None at locations {nones} with "
                                    f"signature={signature!r}", source=user_source())
            func, args, _ = _apply_excluded(func, nones, args, {})
            in_dims = [d for i, d in enumerate(in_dims) if i not in nones]
        args = [asarray(a) for a in args]
        if len(args) != len(in_dims):
            raise ArgumentError(f"vectorize: wrong number of positional arguments: expected "
                                f"{len(in_dims)}, got {len(args)} {where}", source=user_source())
        sizes: dict = {}
        for a, dims in zip(args, in_dims):
            _update_sizes(sizes, a.shape, dims, where, is_input=True)
        loops = broadcast_shapes(*(a.shape[:a.ndim - len(d)] for a, d in zip(args, in_dims)))

        def checked(*xs):
            out = func(*xs)
            if out_dims is None:
                return out
            outs, dims = (out if isinstance(out, tuple) else (out,)), out_dims
            if len(dims) > 1 and not isinstance(out, tuple):
                raise ArgumentError(f"vectorize: the output must be a tuple when multiple "
                                    f"outputs are expected {where}", source=user_source())
            if len(outs) != len(dims):
                raise ArgumentError(f"vectorize: wrong number of output arguments: expected "
                                    f"{len(dims)}, got {len(outs)} {where}", source=user_source())
            out_sizes = dict(sizes)
            for o, d in zip(outs, dims):
                _update_sizes(out_sizes, _np.shape(o), d, where, is_input=False)
            return out

        # one vmap per loop dimension, innermost last; a dimension of size 1 in an argument is
        # squeezed out and that argument not mapped there (broadcast by vmap)
        squeezed, filled = [], []
        for a, dims in zip(args, in_dims):
            loop_shape = a.shape[:a.ndim - len(dims)]
            squeezed.append(squeeze(a, tuple(i for i, s in enumerate(loop_shape) if s == 1)))
            filled.append(((1,) * (len(loops) - len(loop_shape)) + tuple(loop_shape))[::-1])
        mapped, expand = checked, []
        for neg, axis_sizes in enumerate(zip(*filled)):
            in_axes = tuple(None if s == 1 else 0 for s in axis_sizes)
            if all(a is None for a in in_axes):
                expand.append(len(loops) - 1 - neg)
            else:
                mapped = vmap(mapped, in_axes=in_axes)
        result = mapped(*squeezed)
        if not expand:
            return result
        if isinstance(result, tuple):
            return tuple(expand_dims(r, tuple(expand)) for r in result)
        return expand_dims(result, tuple(expand))

    return wrapped


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """jnp.apply_along_axis: func1d(a 1-D slice along `axis`, *args, **kwargs) for every
    slice, by vg.vmap over the other axes; the result's axes from func1d take `axis`'s
    place."""
    check_function(func1d, "numpy.apply_along_axis")
    arr = asarray(arr)
    axis = normalize_axes(axis, arr.ndim)[0]
    func = lambda a: func1d(a, *args, **kwargs)   # noqa: E731
    for i in range(1, arr.ndim - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(arr)


def apply_over_axes(func, a, axes):
    """jnp.apply_over_axes: a = func(a, axis) for each axis in turn, a result with one
    dimension fewer given it back (expand_dims), as numpy's."""
    check_function(func, "numpy.apply_over_axes")
    a = asarray(a)
    for axis in ((axes,) if _np.ndim(axes) == 0 else axes):
        b = asarray(func(a, axis))
        if b.ndim == a.ndim - 1:
            b = expand_dims(b, axis)
        elif b.ndim != a.ndim:
            raise ShapeError(f"apply_over_axes: the function returned {b.ndim} dimensions for "
                             f"an array of {a.ndim} at axis {axis}; it must keep them or drop "
                             "one", source=user_source())
        a = b
    return a


def piecewise(x, condlist, funclist, *args, **kw):
    """jnp.piecewise: at each element of x, the value of funclist[i] (a function of that
    element, *args and **kw, or a constant) for the last condlist[i] that holds there, and of
    the extra last function (else 0) where none does. Each function sees one element, and its
    result is cast to x's dtype: JAX's vectorize of lax.switch, which under vmap computes every
    branch and selects; here the selects are written (vkgrad.control_flow, whose switch that
    is, sits above vkgrad.numpy)."""
    x = asarray(x)
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funclist = list(funclist[-1:]) + list(funclist[:-1])
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ArgumentError(f"piecewise: with {nc} condition(s), either {nc} or {nc + 1} "
                            f"functions are expected; got {nf}", source=user_source())
    conds = astype(asarray(condlist), "bool")
    if tuple(conds.shape[1:]) != tuple(x.shape):
        raise ShapeError(f"piecewise: each condition must have x's shape {tuple(x.shape)}, "
                         f"got {tuple(conds.shape[1:])}", source=user_source())
    dt = dtype_of(x)
    # the last condition that holds (0 where none does): one select per condition, elementwise
    # so it fuses (JAX's argmax of a cumsum is an int32 reduction, which no kernel computes)
    index = zeros(x.shape, "i32")
    for i in range(nc):
        index = where(conds[i], i + 1, index)

    def branch(f):
        if callable(f):
            return lambda v: astype(asarray(f(v, *args, **kw)), dt)
        return lambda v: astype(asarray(f), dt)

    branches = [branch(f) for f in funclist]

    def pick(i, v):
        out = branches[0](v)
        for k, b in enumerate(branches[1:], 1):
            out = where(i == k, b(v), out)
        return out

    return vectorize(pick)(index, x)


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """function applied to the index grids of `shape` (numpy's fromfunction): as JAX, by
    vg.vmap over each axis' arange, so function sees scalars of `dtype` (float32 by
    default)."""
    shape = (shape,) if isinstance(shape, (int, _np.integer)) else tuple(shape)
    for i in range(len(shape)):
        in_axes = tuple(0 if i == j else None for j in reversed(range(len(shape))))
        function = vmap(function, in_axes=in_axes)
    return function(*(arange(s, dtype=dtype) for s in shape), **kwargs)


__all__ += ["fromfunction"]
