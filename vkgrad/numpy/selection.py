"""Selecting and placing elements by index or mask, as JAX's functional forms of numpy's:
choose, compress, extract, place, put, put_along_axis, fill_diagonal, delete, insert,
trim_zeros. numpy's in-place functions (place, put, put_along_axis, fill_diagonal) return the
updated array and need inplace=False, as JAX's. Results whose length is data (compress,
extract, delete) need concrete conditions or indices, or `size=` where JAX takes it (then the
first `size` selected, padded with fill_value: sorting.true_positions). Compositions of take,
x.at[...] and where; no primitive of their own."""

from __future__ import annotations

import math

import numpy as _np

from vkgrad.errors import ArgumentError, DTypeError, ShapeError
from vkgrad.numpy.creation import arange, full, zeros
from vkgrad.numpy.dtypes import asarray, astype, dtype_of, no_out
from vkgrad.numpy.indexing import at, getitem, take, unravel_index
from vkgrad.numpy.reductions import any, cumsum
from vkgrad.numpy.shapes import (broadcast_arrays, broadcast_to, concatenate, expand_dims,
                                 moveaxis, ravel, reshape, stack)
from vkgrad.numpy.sorting import argsort, sort, take_along_axis, true_positions
from vkgrad.numpy.ufuncs import add, clip, greater_equal, less, remainder, subtract, where
from vkgrad.numpy.util import normalize_axes, type_string
from vkgrad.tracer.core import Tracer, concrete_value, concretization_error, user_source

__all__ = ["choose", "compress", "extract", "place", "put", "put_along_axis", "fill_diagonal",
           "delete", "insert", "trim_zeros"]


def _concrete(x, what, instead):
    """x's value as a numpy array: concrete data, or a traced value its trace knows (an eager
    grad's); else the ConcretizationError saying what needs it and what to do instead."""
    v = concrete_value(x)
    if v is None:
        raise concretization_error(x, what, instead)
    return _np.asarray(v)


def _not_inplace(name, inplace):
    if inplace:
        raise ArgumentError(f"vnp.{name} cannot modify an array in place (vkgrad arrays are "
                            "immutable, as JAX's): pass inplace=False to get the updated array",
                            source=user_source())


def _tiled(v, n):
    """The flattened v repeated (and cut) to n elements, as numpy cycles values."""
    v = ravel(v)
    reps = -(-n // v.shape[0])
    return concatenate([v] * reps)[:n] if reps > 1 else v[:n]


def choose(a, choices, out=None, mode="raise"):
    """choices[a[i]][i] for each i, all broadcast together; mode 'raise' (concrete a: an
    index outside [0, len(choices)) raises), 'wrap' (modulo) or 'clip'."""
    no_out(out)
    a = asarray(a)
    if dtype_of(a) != "i32":
        raise DTypeError(f"choose: a must be an integer array, got {type_string(a)}",
                         source=user_source())
    n = len(choices)
    if mode == "raise":
        v = _concrete(a, "vnp.choose(mode='raise') (it checks the indices)",
                      "use mode='wrap' or mode='clip', as JAX asks")
        if v.size and (v.min() < 0 or v.max() >= n):
            raise ArgumentError("choose: invalid entry in the choice array (outside [0, "
                                f"{n}))", source=user_source())
    elif mode == "wrap":
        a = remainder(a, n)
    elif mode == "clip":
        a = clip(a, 0, n - 1)
    else:
        raise ArgumentError(f"choose: mode={mode!r} is not 'raise', 'wrap' or 'clip'",
                            source=user_source())
    a, *cs = broadcast_arrays(a, *choices)
    return take_along_axis(stack(cs), expand_dims(a, 0), 0)[0]


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of a along `axis` (the flattened a if None) where the 1-D condition is
    true. Without size=, the condition must be concrete (the length is data); with it, the
    first `size` selected slices, padded with fill_value, as JAX's."""
    no_out(out)
    c = astype(asarray(condition), "bool")
    if c.ndim != 1:
        raise ShapeError(f"compress: condition must be 1-D, got {type_string(c)}",
                         source=user_source())
    arr = ravel(a) if axis is None else moveaxis(asarray(a), axis, 0)
    n = arr.shape[0]
    c, extra = c[:n], c[n:]
    arr = arr[:c.shape[0]]
    if size is None:
        mask = _concrete(c, "vnp.compress (its result's length depends on the condition)",
                         "give it a length, vnp.compress(c, a, size=n, fill_value=v), as JAX's "
                         "jnp.compress asks")
        if _concrete(extra, "vnp.compress", "").any():
            raise ArgumentError("compress: condition has true entries past the end of the "
                                "axis", source=user_source())
        r = take(arr, _np.flatnonzero(mask).astype(_np.int32), 0)
    else:
        size = int(size)
        if not 0 <= size <= arr.shape[0]:
            raise ArgumentError(f"compress: size must be in [0, {arr.shape[0]}] (the axis' "
                                f"length), got {size}", source=user_source())
        if size == 0:
            return moveaxis(zeros((0,) + tuple(arr.shape[1:]), dtype_of(arr)), 0, axis or 0)
        pos, valid = true_positions(c, size)[:2]
        valid = reshape(valid, (size,) + (1,) * (arr.ndim - 1))
        r = where(valid, take(arr, pos, 0), astype(asarray(fill_value), dtype_of(arr)))
    return r if axis is None else moveaxis(r, 0, axis)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of the flattened arr where the flattened condition is nonzero (compress
    of both flattened; size= as compress's)."""
    c = asarray(condition)
    c = c if dtype_of(c) == "bool" else astype(c, "bool")
    return compress(ravel(c), ravel(arr), size=size, fill_value=fill_value)


def place(arr, mask, vals, *, inplace=True):
    """arr with its masked elements (in order) replaced by vals, cycled (numpy's place, as a
    new array: inplace=False). The mask may be traced: each masked element's rank among the
    masked ones picks its value."""
    _not_inplace("place", inplace)
    x, m, v = asarray(arr), astype(asarray(mask), "bool"), ravel(asarray(vals))
    if math.prod(x.shape) != math.prod(m.shape):
        raise ShapeError(f"place: arr {type_string(x)} and mask {type_string(m)} need the same "
                         "size", source=user_source())
    if v.shape[0] == 0:
        raise ArgumentError("place: cannot place values from an empty array",
                            source=user_source())
    if math.prod(x.shape) == 0:
        return x
    rank = subtract(cumsum(astype(ravel(m), "i32")), 1)
    picked = take(astype(v, dtype_of(x)), remainder(where(ravel(m), rank, 0), v.shape[0]), 0)
    return reshape(where(ravel(m), picked, ravel(x)), x.shape)


def _flat_positions(ind, n, mode, name):
    """Flat positions for put: JAX's unravel_index clamping (mode None), 'clip' or 'wrap';
    numpy data when ind is concrete (so a repeated position keeps its last value)."""
    if mode not in (None, "clip", "wrap"):
        raise ArgumentError(f"{name}: mode must be None, 'clip' or 'wrap', got {mode!r} ('raise' "
                            "is not supported, as in JAX)", source=user_source())
    ind = ravel(asarray(ind))
    if isinstance(ind, Tracer):
        if mode == "clip":
            return clip(ind, 0, n - 1)
        return remainder(ind, n) if mode == "wrap" else unravel_index(ind, (n,))[0]
    i = _np.asarray(ind).astype(_np.int64)
    if mode == "clip":
        i = _np.clip(i, 0, n - 1)
    elif mode == "wrap":
        i = i % n
    else:
        i = _np.where(i >= n, n - 1, _np.where(i < -n, 0, i % n))
    return i.astype(_np.int32)


def put(a, ind, v, mode=None, *, inplace=True):
    """a with the flattened positions ind set to v (cycled), as a new array (inplace=False).
    mode None clamps out-of-range indices as JAX's unravel_index does, 'clip' clamps into
    range, 'wrap' takes them modulo the size."""
    _not_inplace("put", inplace)
    x = asarray(a)
    n = math.prod(x.shape)
    v = asarray(v)
    if n == 0 or math.prod(_np.shape(ind)) == 0 or math.prod(v.shape) == 0:
        return x
    pos = _flat_positions(ind, n, mode, "put")
    flat = at(ravel(x))[pos].set(_tiled(astype(v, dtype_of(x)), pos.shape[0]))
    return reshape(flat, x.shape)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """arr with values put at `indices` along `axis` (take_along_axis's positions; the
    flattened arr if axis is None), as a new array (inplace=False). Negative indices count
    from the end; others out of range are dropped (mode None, 'drop', 'fill'), or clamped
    ('clip', 'promise_in_bounds')."""
    _not_inplace("put_along_axis", inplace)
    x = asarray(arr)
    a = ravel(x) if axis is None else x
    ax = 0 if axis is None else normalize_axes(axis, x.ndim)[0]
    idx = asarray(indices)
    if idx.ndim != a.ndim:
        raise ShapeError(f"put_along_axis: arr {type_string(a)} and indices "
                         f"{type_string(idx)} need the same number of dimensions",
                         source=user_source())
    n = a.shape[ax]
    if mode not in (None, "drop", "fill", "clip", "promise_in_bounds"):
        raise ArgumentError(f"put_along_axis: mode={mode!r} is not one of None, 'drop', "
                            "'fill', 'clip', 'promise_in_bounds'", source=user_source())
    clamp = mode in ("clip", "promise_in_bounds")
    traced = isinstance(idx, Tracer)
    if traced:
        idx = where(less(idx, 0), add(idx, n), idx)
        # x.at drops an update at a traced position out of range
        idx = clip(idx, 0, n - 1) if clamp else where(less(idx, 0), n, idx)
    else:
        i = _np.asarray(idx).astype(_np.int64)
        i = _np.where(i < 0, i + n, i)
        idx = _np.clip(i, 0, n - 1) if clamp else i
    vals = broadcast_to(astype(asarray(values), dtype_of(a)), tuple(idx.shape))
    key = tuple(idx if i == ax else _np.arange(d, dtype=_np.int32).reshape(
        [-1 if j == i else 1 for j in range(a.ndim)]) for i, d in enumerate(idx.shape))
    if not traced:   # concrete: the updates out of range dropped here
        keep = (idx >= 0) & (idx < n)
        key = tuple(_np.broadcast_to(p, idx.shape)[keep].astype(_np.int32) for p in key)
        vals = getitem(vals, keep)
    out = at(a)[key].set(vals)
    return reshape(out, x.shape) if axis is None else out


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """a with its main diagonal set to val (cycled), as a new array (inplace=False; JAX's
    wrap=False only)."""
    _not_inplace("fill_diagonal", inplace)
    if wrap:
        raise ArgumentError("fill_diagonal(wrap=True) is not implemented (as in JAX): "
                            "wrap=False", source=user_source())
    a, val = asarray(a), asarray(val)
    if a.ndim < 2:
        raise ShapeError(f"fill_diagonal: a must be at least 2-d, got {type_string(a)}",
                         source=user_source())
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ShapeError(f"fill_diagonal: every dimension of a must have one length, got "
                         f"{type_string(a)}", source=user_source())
    n = min(a.shape)
    i = _np.arange(n, dtype=_np.int32)
    v = val if val.ndim == 0 else _tiled(val, n)
    return at(a)[(i,) * a.ndim].set(astype(v, dtype_of(a)))


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """arr without the entries obj (an int, a slice, integer indices or a bool mask) along
    `axis` (of the flattened arr if None). Indices must be concrete, except with
    assume_unique_indices=True, JAX's traced form (each kept position counted past the
    deleted ones before it)."""
    a = ravel(arr) if axis is None else asarray(arr)
    ax = 0 if axis is None else normalize_axes(axis, a.ndim)[0]
    n = a.shape[ax]
    lead = (slice(None),) * ax
    if isinstance(obj, slice):
        obj = _np.arange(n)[obj]
    if isinstance(obj, Tracer) and assume_unique_indices and dtype_of(obj) == "i32":
        d = ravel(obj)
        d = sort(clip(where(less(d, 0), add(d, n), d), 0, n))
        d = subtract(d, _np.arange(d.shape[0], dtype=_np.int32))
        i = _np.arange(n - d.shape[0], dtype=_np.int32)
        count = astype(greater_equal(expand_dims(i, 0), expand_dims(d, 1)), "i32")
        return getitem(a, lead + (add(i, count.sum(0)),))
    o = _concrete(obj, "vnp.delete's indices (the result's length depends on them)",
                  "pass numpy indices, or unique traced ones with assume_unique_indices=True, "
                  "as JAX's jnp.delete allows")
    if o.dtype == _np.bool_:
        if o.shape != (n,):
            raise ShapeError(f"delete: a boolean obj needs shape ({n},), got {o.shape}",
                             source=user_source())
        keep = ~o
    elif o.dtype.kind in "iu":
        if o.size and (o.min() < -n or o.max() >= n):
            raise ArgumentError(f"delete: index out of bounds for an axis of length {n}",
                                source=user_source())
        keep = _np.ones(n, bool)
        keep[o] = False
    else:
        raise DTypeError(f"delete: obj must be integers or a bool mask, got {o.dtype}",
                         source=user_source())
    return getitem(a, lead + (_np.flatnonzero(keep).astype(_np.int32),))


def insert(arr, obj, values, axis=None):
    """arr with values inserted before the indices obj (an int, a slice or a 1-D integer
    array; traced ones too) along `axis` (of the flattened arr if None): JAX's
    formulation, with static shapes (the values' slots found by a stable argsort of the
    indices, the rest by a running count)."""
    a = ravel(arr) if axis is None else asarray(arr)
    ax = 0 if axis is None else normalize_axes(axis, a.ndim)[0]
    n = a.shape[ax]
    idx = asarray(_np.arange(*obj.indices(n)) if isinstance(obj, slice) else obj)
    if idx.ndim > 1:
        raise ShapeError(f"insert: obj must be a slice, an int or a 1-D array, got "
                         f"{type_string(idx)}", source=user_source())
    if dtype_of(idx) != "i32":
        if math.prod(idx.shape) == 0:
            idx = astype(idx, "i32")
        else:
            raise DTypeError(f"insert: indices must be integers, got {type_string(idx)}",
                             source=user_source())
    v = astype(asarray(values), dtype_of(a))
    v = reshape(v, (1,) * (a.ndim - v.ndim) + tuple(v.shape))
    if math.prod(idx.shape) == 1:
        if idx.ndim == 0:
            v = moveaxis(v, 0, ax)
        idx = full((v.shape[ax],), ravel(idx)[0])
    k = _np.broadcast_shapes(tuple(idx.shape), (v.shape[ax],))[0]
    idx = broadcast_to(idx, (k,))
    idx = clip(where(less(idx, 0), add(idx, n), idx), 0, n)
    slots = at(idx)[argsort(idx)].add(arange(k))
    rest = at(full((n + k,), 1))[slots].set(0)     # 1 where arr's entries go
    kept = true_positions(astype(rest, "bool"), n)[0] if n else _np.zeros(0, _np.int32)
    shape = list(a.shape)
    shape[ax] += k
    lead = (slice(None),) * ax
    vshape = list(a.shape)
    vshape[ax] = k
    out = at(zeros(shape, dtype_of(a)))[lead + (slots,)].set(broadcast_to(v, tuple(vshape)))
    return at(out)[lead + (kept,)].set(a) if n else out


def trim_zeros(filt, trim="fb", axis=None):
    """filt without its leading ('f') and trailing ('b') zeros (along every axis, or `axis`:
    a slice is trimmed where all of it is zero). filt must be concrete (the result's shape
    is data, as JAX asks)."""
    x = asarray(filt)
    v = _concrete(x, "vnp.trim_zeros (its result's shape depends on the values)",
                  "slice with concrete bounds, or keep the zeros")
    axes = normalize_axes(axis, x.ndim)
    t = trim.lower()
    key = []
    for ax in range(x.ndim):
        if ax not in axes or ("f" not in t and "b" not in t):
            key.append(slice(None))
            continue
        nz = _np.flatnonzero(v.any(axis=tuple(i for i in range(x.ndim) if i != ax)))
        if nz.size == 0:
            key.append(slice(0, 0))
            continue
        key.append(slice(int(nz[0]) if "f" in t else None,
                         int(nz[-1]) + 1 if "b" in t else None))
    return getitem(x, tuple(key))
