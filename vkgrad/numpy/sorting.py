"""Sorting and searching: argsort, sort, take_along_axis, quantile / percentile / median, and
the positions of non-zero entries (argwhere, flatnonzero). One primitive, argsort (stable, last
axis; vkgrad/primitives/lax.py; a bitonic sort per row on Vulkan): sort, median and percentile
gather with it (docs/numpy.md, "Sorting")."""

from __future__ import annotations

import builtins
import math

import numpy as _np

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.numpy.creation import zeros
from vkgrad.numpy.dtypes import as_float, asarray, astype, dtype_of, no_out
from vkgrad.numpy.indexing import index_array
from vkgrad.numpy.reductions import all, any
from vkgrad.numpy.shapes import broadcast_to, moveaxis, ravel, reshape, size, stack, transpose
from vkgrad.numpy.ufuncs import (add, equal, floor, isnan, less, less_equal, logical_and,
                                 logical_not, logical_or, maximum, minimum, multiply, nonzero,
                                 not_equal, subtract, where)
from vkgrad.numpy.util import normalize_axes, type_string
from vkgrad.tracer.core import ArrayOps, Tracer, concretization_error, user_source

__all__ = ["argsort", "sort", "searchsorted", "take_along_axis", "quantile", "percentile", "median",
           "argwhere", "flatnonzero", "partition", "argpartition", "unique", "isin",
           "nanquantile", "nanpercentile", "nanmedian", "lexsort"]


def _along_last(fn, a, axis):
    """fn applied along `axis` of a (moved to the last axis and back)."""
    if axis is None:
        return fn(ravel(a))
    ax = normalize_axes(axis, a.ndim)[0]
    if ax == a.ndim - 1:
        return fn(a)
    return moveaxis(fn(moveaxis(a, ax, -1)), -1, ax)


def _sortable(a):
    a = asarray(a)
    if a.ndim == 0:
        raise ShapeError("cannot sort a 0-d array", source=user_source())
    return a if dtype_of(a) != "bool" else astype(a, "f32")   # 0 and 1: the f32 kernel sorts them


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """Stable indices that sort `a` along `axis` (int32), NaN last; descending=True (JAX's
    argument) for largest first, NaN first, as JAX puts it."""
    if order is not None:
        raise ArgumentError("argsort(order=...) sorts structured arrays, which vkgrad does not "
                            "have", source=user_source())
    return _along_last(lambda x: _order(x, descending), _sortable(a), axis)


def _order(x, descending):
    return P.argsort_descending(x) if descending else P.argsort(x)


def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """Sorted copy along `axis` (its gradient sends each value's cotangent back to where it
    came from)."""
    dt = dtype_of(asarray(a))

    def by_rows(x):
        return P.take_last(x, _order(x, descending))
    return astype(_along_last(by_rows, _sortable(a), axis), dt)   # bools sort as 0.0 and 1.0


def take_along_axis(arr, indices, axis):
    """numpy's take_along_axis: out[..., j, ...] = arr[..., indices[..., j, ...], ...]."""
    arr = asarray(arr)
    idx = index_array(indices, arr.shape[normalize_axes(axis, arr.ndim)[0]] if axis is not None
                       else size(arr), axis)
    if axis is None:
        return P.take(ravel(arr), ravel(idx), 0)
    ax = normalize_axes(axis, arr.ndim)[0]
    if idx.ndim != arr.ndim:
        raise ShapeError(f"take_along_axis: indices {type_string(idx)} need as many dimensions as "
                         f"{type_string(arr)}", source=user_source())
    lead = [builtins.max(p, q) for i, (p, q) in enumerate(zip(arr.shape, idx.shape)) if i != ax]
    arr = broadcast_to(arr, [arr.shape[ax] if i == ax else lead[i - (i > ax)]
                             for i in range(arr.ndim)])
    idx = broadcast_to(idx, [idx.shape[ax] if i == ax else lead[i - (i > ax)]
                             for i in range(idx.ndim)])
    return moveaxis(P.take_last(moveaxis(arr, ax, -1), moveaxis(idx, ax, -1)), -1, ax)


def _concrete_q(q, what):
    if isinstance(q, ArrayOps):
        raise ArgumentError(f"vnp.{what}: q must be a Python number or a numpy array (it "
                            "decides which sorted elements are read)", source=user_source())
    return _np.asarray(q, _np.float64)


def _quantiles(a, q, axis, keepdims, what, skip_nans=False):
    """Linear interpolation between the sorted values (numpy's default method), q in [0, 1];
    skip_nans: between the sorted values that are not NaN (they sort last), NaN where a slice
    has none (nanquantile's), read at traced positions."""
    a = as_float(a)
    qs = _np.asarray(q, _np.float64)
    if qs.size and (qs.min() < 0 or qs.max() > 1):
        raise ArgumentError(f"{what}: q must lie in [0, {100 if 'percentile' in what else 1}]",
                            source=user_source())
    axes = normalize_axes(axis, a.ndim)
    kept = [i for i in range(a.ndim) if i not in axes]
    x = reshape(transpose(a, kept + list(axes)), [a.shape[i] for i in kept] + [-1])
    n = x.shape[-1]
    s = sort(x, axis=-1)
    if skip_nans:
        count = P.reduce_sum(astype(logical_not(isnan(x)), dtype_of(x)), (x.ndim - 1,))
    outs = []
    for qi in qs.reshape(-1):
        if skip_nans:
            v = _at_position(s, count, float(qi))
        else:
            pos = qi * (n - 1)
            lo, frac = int(math.floor(pos)), float(pos - math.floor(pos))
            hi = builtins.min(lo + 1, n - 1)
            v = s[..., lo]
            if frac:
                v = add(multiply(v, 1.0 - frac), multiply(s[..., hi], frac))
        if keepdims:
            v = reshape(v, [1 if i in axes else a.shape[i] for i in range(a.ndim)])
        outs.append(v)
    r = stack(outs) if outs else zeros((0,))
    return reshape(r, qs.shape + tuple(r.shape[1:]))


def _at_position(s, count, q):
    """The rows of s (sorted, NaNs last) read at q * (count - 1), linearly between the two
    neighbours; NaN where a row's count is 0."""
    pos = multiply(q, subtract(count, 1))
    lo = maximum(floor(pos), 0)
    frac = subtract(pos, lo)
    hi = minimum(add(lo, 1), maximum(subtract(count, 1), 0))

    def read(i):
        col = reshape(astype(i, "i32"), tuple(i.shape) + (1,))
        return reshape(take_along_axis(s, col, -1), tuple(i.shape))
    v = add(multiply(read(lo), subtract(1.0, frac)), multiply(read(hi), frac))
    return where(equal(count, 0), _np.nan, v)


def _linear_only(out, method, what) -> None:
    no_out(out)
    if method != "linear":
        raise ArgumentError(f"{what}(method={method!r}): vkgrad has numpy's default, "
                            "'linear'", source=user_source())


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False):
    _linear_only(out, method, "quantile")
    return _quantiles(a, _concrete_q(q, "quantile"), axis, keepdims, "quantile")


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False):
    _linear_only(out, method, "percentile")
    return _quantiles(a, _concrete_q(q, "percentile") / 100.0, axis, keepdims, "percentile")


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    no_out(out)
    return _quantiles(a, 0.5, axis, keepdims, "median")


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False):
    """quantile ignoring NaNs (NaN for a slice of NaNs only); traced positions in the sorted
    values, so the gradient reaches the two values read."""
    _linear_only(out, method, "nanquantile")
    return _quantiles(a, _concrete_q(q, "nanquantile"), axis, keepdims, "nanquantile", True)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False):
    """percentile ignoring NaNs (nanquantile of q / 100)."""
    _linear_only(out, method, "nanpercentile")
    return _quantiles(a, _concrete_q(q, "nanpercentile") / 100.0, axis, keepdims,
                      "nanpercentile", True)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """median ignoring NaNs (JAX's nanquantile at 0.5)."""
    no_out(out)
    return _quantiles(a, 0.5, axis, keepdims, "nanmedian", True)


def lexsort(keys, axis=-1):
    """Indices that sort by the last key, ties broken by the one before it, and so on
    (numpy's, stable; int32): one stable argsort per key, from the first key to the last, each
    of the order so far."""
    keys = [asarray(k) for k in keys]
    if not keys:
        raise ArgumentError("lexsort needs at least one key", source=user_source())
    if len({tuple(k.shape) for k in keys}) > 1:
        raise ShapeError("lexsort: all keys need one shape, got "
                         + ", ".join(type_string(k) for k in keys), source=user_source())
    if keys[0].ndim == 0:
        return asarray(_np.int32(0))
    order = argsort(keys[0], axis=axis)
    for k in keys[1:]:
        order = take_along_axis(order, argsort(take_along_axis(k, order, axis), axis=axis),
                                axis)
    return order


def argwhere(a): return _np.stack(nonzero(a), axis=-1)
def flatnonzero(a): return nonzero(ravel(a))[0]


def _kth_in_range(a, kth, axis, name):
    n = a.shape[axis] if a.ndim else 1
    for k in _np.atleast_1d(kth):
        if not -n <= int(k) < n:
            raise ArgumentError(f"{name}: kth {int(k)} is out of bounds for an axis of length "
                                f"{n}", source=user_source())


def partition(a, kth, axis=-1):
    """numpy's partition: the kth element in its sorted place, smaller ones before it and
    larger after. A full sort is such an order, and the one computed (numpy leaves each side's
    order unspecified)."""
    a = asarray(a)
    _kth_in_range(a, kth, axis, "partition")
    return sort(a, axis)


def argpartition(a, kth, axis=-1):
    """The indices partition(a, kth, axis) takes: argsort's (see partition)."""
    a = asarray(a)
    _kth_in_range(a, kth, axis, "argpartition")
    return argsort(a, axis)


def searchsorted(a, v, side="left", sorter=None):
    """numpy's: where each v would go in the sorted 1-D a to keep it sorted ("left": before
    equal elements, "right": after them), int32 of v's shape. NaNs sort last, as numpy's sort
    puts them. One comparison of every v with every a and a count (no gather loop: for
    moderate sizes of a)."""
    if side not in ("left", "right"):
        raise ArgumentError(f"searchsorted: side must be 'left' or 'right', got {side!r}",
                            source=user_source())
    a, v = asarray(a), asarray(v)
    if a.ndim != 1:
        raise ShapeError(f"searchsorted: a must be 1-D, got {type_string(a)}",
                         source=user_source())
    if sorter is not None:
        a = take_along_axis(a, asarray(sorter), 0)
    a, v = as_float(a), as_float(v)
    col = reshape(v, tuple(v.shape) + (1,))
    nan_v, nan_a = isnan(col), isnan(a)
    if side == "left":      # elements before v: less than it (all but NaNs when v is NaN)
        before = logical_or(less(a, col), logical_and(nan_v, logical_not(nan_a)))
    else:                   # ... not greater than it (all when v is NaN)
        before = logical_or(less_equal(a, col), nan_v)
    count = P.reduce_sum(astype(before, "f32"), (v.ndim,))   # exact below 2**24 elements
    return astype(count, "i32")


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None):
    """numpy's unique (sorted, NaNs one value with equal_nan): of a concrete array, numpy's
    own, any axis. Of a traced one (under jit, grad, vmap), as JAX: its result's length is
    data, so `size=` fixes it: the first `size` unique values of the flattened array, padded
    with fill_value (default: the smallest value); the padding's index is the smallest
    value's and its count 0. The values are gathered from `ar`, so their gradient is the
    gather's."""
    ar = asarray(ar)
    flags = (return_index, return_inverse, return_counts)
    if not isinstance(ar, Tracer):
        if size is not None:
            return _unique_traced(ar, size, fill_value, equal_nan, flags)
        out = _np.unique(_np.asarray(ar), *flags, axis=axis, equal_nan=equal_nan)
        if not builtins.any(flags):
            return asarray(out)
        return tuple(asarray(o if i == 0 else o.astype(_np.int32)) for i, o in enumerate(out))
    if size is None:
        raise concretization_error(
            ar, "vnp.unique (its result's length depends on the data)",
            "give it a length, vnp.unique(x, size=n, fill_value=v), as JAX's jnp.unique asks")
    if axis is not None:
        raise ArgumentError("vnp.unique(axis=...) of a traced array is not supported (the "
                            "flattened array's unique values are: axis=None)",
                            source=user_source())
    return _unique_traced(ar, size, fill_value, equal_nan, flags)


def true_positions(mask, size):
    """Where the first `size` True entries of a non-empty 1-D bool mask are: the running count
    c of its Trues (float32: exact below 2**24), starts[k] = #(c <= k) for k = 0..size (the
    k-th True's position while k < c[-1]; one comparison of every c with every k and a count,
    as searchsorted), and of the first `size`: valid (k < c[-1]) and at (starts, or 0 past
    the last True; int32)."""
    n = mask.shape[0]
    c = P.cumsum(astype(mask, "f32"))
    ks = _np.arange(size + 1, dtype=_np.float32)
    starts = P.reduce_sum(astype(less_equal(reshape(c, (1, n)), reshape(ks, (size + 1, 1))),
                                 "f32"), (1,))
    valid = less(ks[:size], c[-1])
    return astype(P.select(valid, starts[:size], 0.0), "i32"), valid, starts, c


def _unique_traced(ar, size, fill_value, equal_nan, flags):
    """unique with a fixed size, from one sort: the sorted values' first occurrences are
    marked, their running count c numbers each sorted element's unique value (1, 2, ...), and
    the k-th unique value starts at sorted position #(c <= k) (true_positions)."""
    size = int(size)
    if size < 0:
        raise ArgumentError(f"vnp.unique: size must be >= 0, got {size}", source=user_source())
    x = ravel(ar)
    n = x.shape[0]
    if n == 0:
        raise ArgumentError("vnp.unique(size=...) of an empty array: there is no value to pad "
                            "with", source=user_source())
    perm = P.argsort(as_float(x) if dtype_of(x) == "bool" else x)
    s = P.take(x, perm, 0)
    new = P.ne(s[1:], s[:-1])
    if equal_nan and dtype_of(x) not in ("i32", "bool"):
        new = logical_and(new, logical_not(logical_and(isnan(s[1:]), isnan(s[:-1]))))
    first = P.concatenate([_np.ones(1, _np.bool_), new], 0)
    at, valid, starts, c = true_positions(first, size)     # valid: k < number of uniques
    idx = P.take(perm, at, 0)
    values = P.take(x, idx, 0)
    if fill_value is not None:
        values = P.select(valid, values, P.convert(asarray(fill_value), dtype_of(x)))
    out = [values]
    if flags[0]:
        out.append(idx)
    if flags[1]:      # each element's unique value number, moved back to its own position
        numbers = P.scatter_add(P.sub(c, 1.0), perm, 0, (n,))
        out.append(reshape(astype(numbers, "i32"), ar.shape))
    if flags[2]:
        out.append(astype(P.select(valid, P.sub(starts[1:], starts[:size]), 0.0), "i32"))
    return out[0] if len(out) == 1 else tuple(out)


_ISIN_METHODS = ("auto", "compare_all", "binary_search", "sort")


def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """jnp.isin: whether each element is among test_elements (NaN is in nothing), element's
    shape; invert=True for "not in". `method` is JAX's choice of algorithm; all give these
    values, computed here as JAX's 'auto' does: every element compared with every test
    element, then any (all for invert)."""
    if method not in _ISIN_METHODS:
        raise ArgumentError(f"isin: method={method!r} is not implemented; options are "
                            f"{_ISIN_METHODS}", source=user_source())
    e, t = asarray(element), ravel(asarray(test_elements))
    if size(e) == 0 or t.shape[0] == 0:
        return asarray(_np.full(e.shape, bool(invert)))
    col = reshape(e, tuple(e.shape) + (1,))
    return all(not_equal(col, t), -1) if invert else any(equal(col, t), -1)
