"""Indexing: x[key] (getitem), vnp.take, and JAX's functional updates x.at[idx].set(v).

x[key] takes ints, slices (negative bounds and steps), None, Ellipsis and integer arrays: one
array alone is one gather along its axis; several, or one with ints beside it, are numpy's
advanced indexing (the indices broadcast together; their axes stay in place when adjacent in
the key, else lead), one gather of flat positions. Negative indices count from the end, traced
ones too (a select at this layer);
traced indices out of range clamp into it, as in JAX (a GPU kernel cannot raise), concrete ones
raise.

x.at[idx].set(v) returns a new array (arrays are immutable). The updated positions are found
by indexing an array of flat positions with idx (the same indexing as x[idx]), then updates are
gathered and scattered on the flattened x.
"""

from __future__ import annotations

import builtins
import math

import numpy as _np

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, DTypeError, ShapeError, VkgradIndexError
from vkgrad.ir.core import np_dtype
from vkgrad.numpy.dtypes import asarray, astype, dtype_name, dtype_of
from vkgrad.numpy.ufuncs import (add, clip, divide, divmod, greater, less, logical_or, maximum,
                                 minimum, multiply, power, remainder, where)
from vkgrad.numpy.util import is_int, normalize_axes, type_string
from vkgrad.tracer.array import Array, host_array
from vkgrad.tracer.core import (ArrayOps, Tracer, concrete_value, concretization_error,
                                user_source)

__all__ = ["take", "at", "unravel_index", "ravel_multi_index"]


def _flat(a):
    return P.reshape(a, (math.prod(a.shape),))


def take(a, indices, axis=None):
    """Gather along `axis` (numpy's take; embeddings: take(table, ids, axis=0))."""
    a = asarray(a)
    if axis is None:
        a, axis = _flat(a), 0
    ax = normalize_axes(axis, a.ndim)[0]
    return P.take(a, index_array(indices, a.shape[ax], ax), ax)


def index_array(indices, n, axis):
    """indices as int32 positions along an axis of size n: negative ones count from the end;
    concrete ones out of range raise, traced ones clamp (in the take kernel)."""
    idx = asarray(indices)
    dt = dtype_of(idx)
    if dt != "i32":
        raise VkgradIndexError(f"indices must be integers, got {type_string(idx)}"
                               + (" (a boolean mask gives a data-dependent shape: use "
                                  "vnp.where(mask, x, 0) instead)" if dt == "bool" else ""),
                               source=user_source())
    if isinstance(idx, Tracer):
        return where(less(idx, 0), add(idx, n), idx)
    idx = _np.asarray(idx)   # concrete (an Array's ops inside a trace would be traced)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise VkgradIndexError(f"index out of bounds for axis {axis} with size {n}",
                               source=user_source())
    return _np.where(idx < 0, idx + n, idx).astype(_np.int32)


def getitem(x, key):
    """x[key] for ints, slices, None, Ellipsis and integer arrays (module docstring): numpy's
    advanced indexing by _advanced_getitem, else one strided slice, a gather per negative-step
    slice and one for the array index, then a reshape for the dropped and the new axes. A concrete boolean mask of a concrete array
    selects as numpy's does (outside a trace the shape is known, as in JAX)."""
    x = asarray(x)
    if isinstance(x, Array) and x._owned is None and _basic(key):   # host data: numpy's view
        try:
            return host_array(_np.asarray(x)[key])
        except (IndexError, ValueError):
            pass   # out of range, a zero step: the general path raises vkgrad's error
    if not isinstance(x, Tracer) and _concrete_mask(key):
        return host_array(_np.asarray(x)[tuple(_np.asarray(k) if isinstance(k, ArrayOps) else k
                                               for k in key) if isinstance(key, tuple) else
                                         _np.asarray(key)])
    entries = _key_entries(x, _masks_as_indices(x, key))
    if _is_advanced(entries):
        return _advanced_getitem(x, entries)
    start, limit, step, reverse, array_at, out_shape = _index_plan(x, entries)
    y = x
    if (tuple(start), tuple(limit), tuple(step)) != ((0,) * x.ndim, tuple(x.shape),
                                                     (1,) * x.ndim):
        y = P.slice_(x, start, limit, step)
    for dim, s, st, m in reverse:
        y = P.take(y, P.add(P.mul(P.iota((m,), 0, "i32"), st), s), dim)
    if array_at is not None:
        y = P.take(y, array_at[1], array_at[0])
    return P.reshape(y, out_shape) if tuple(out_shape) != tuple(y.shape) else y


def _basic(key) -> bool:
    """A key of ints, slices, None and Ellipsis only (numpy's basic indexing)."""
    keys = key if isinstance(key, tuple) else (key,)
    return builtins.all(k is None or k is Ellipsis or isinstance(k, slice) and
                        builtins.all(b is None or is_int(b) for b in (k.start, k.stop, k.step))
                        or is_int(k) for k in keys)


def _concrete_mask(key) -> bool:
    """Whether a key holds a boolean mask and no traced index."""
    keys = key if isinstance(key, tuple) else (key,)
    return builtins.any(dtype_of(k) == "bool" for k in keys
                        if isinstance(k, (ArrayOps, _np.ndarray))) and \
        not builtins.any(isinstance(k, Tracer) for k in keys)


def _is_mask(k) -> bool:
    return isinstance(k, (_np.ndarray, list)) and _np.asarray(k).dtype == _np.bool_ and \
        _np.ndim(k) >= 1


def _masks_as_indices(x, key):
    """The key with each concrete boolean mask spelled as its nonzero() integer arrays (numpy
    defines x[mask] so; the shape is known at trace time, as in JAX). A mask must match the
    axes it covers, as numpy requires."""
    keys = key if isinstance(key, tuple) else (key,)
    if not builtins.any(_is_mask(k) for k in keys):
        return key
    width = [_np.ndim(k) if _is_mask(k) else 0 if k is None or k is Ellipsis else 1
             for k in keys]
    ellipsis = next((j for j, k in enumerate(keys) if k is Ellipsis), len(keys))
    out = []
    for j, k in enumerate(keys):
        if not _is_mask(k):
            out.append(k)
            continue
        k = _np.asarray(k)
        d = builtins.sum(width[:j]) if j < ellipsis else x.ndim - builtins.sum(width[j:])
        if d < 0 or k.shape != tuple(x.shape[d:d + k.ndim]):
            raise VkgradIndexError(f"a boolean index of shape {k.shape} does not match the "
                                   f"axes it indexes, {tuple(x.shape[builtins.max(d, 0):][:k.ndim])}"
                                   f", of {type_string(x)}", source=user_source())
        out.extend(i.astype(_np.int32) for i in _np.nonzero(k))
    return tuple(out)


def _key_entries(x, key) -> list:
    """The key as one entry per axis of x (Ellipsis spelled out as full slices), None for a new
    axis; an integer array as ("array", it)."""
    key = key if isinstance(key, tuple) else (key,)
    entries = []
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, slice) or is_int(k):
            entries.append(k)
        elif isinstance(k, (ArrayOps, _np.ndarray, list)):
            entries.append(("array", k))
        else:
            raise VkgradIndexError(f"unsupported index {k!r} of type {type(k).__name__}: use "
                                   "ints, slices, None, ... or an integer array",
                                   source=user_source())
    if builtins.sum(1 for k in entries if k is Ellipsis) > 1:
        raise VkgradIndexError("an index can only have one ellipsis (...)", source=user_source())
    n_real = builtins.sum(1 for k in entries if k is not None and k is not Ellipsis)
    if n_real > x.ndim:
        raise VkgradIndexError(f"too many indices for {type_string(x)}: {n_real} given",
                               source=user_source())
    fill = [slice(None)] * (x.ndim - n_real)
    if Ellipsis in entries:
        i = entries.index(Ellipsis)
        entries = entries[:i] + fill + entries[i + 1:]
    else:
        entries = entries + fill
    return entries


def _is_advanced(entries) -> bool:
    """Several integer arrays, or one with ints beside it: numpy's advanced indexing, where
    the ints are index arrays too and the indexed axes may move to the front."""
    arrays = builtins.sum(1 for k in entries if isinstance(k, tuple))
    return arrays > 1 or (arrays == 1 and builtins.any(is_int(k) for k in entries))


def _advanced_getitem(x, entries):
    """x[key] with numpy's advanced indexing: the slices and new axes first (every indexed axis
    kept whole), then the indexed axes moved to the front and flattened, and ONE gather of the
    flat positions the broadcast indices select. The gathered axes stay where the indices were
    when they are adjacent in the key, else they lead (numpy's rule)."""
    y = getitem(x, tuple(slice(None) if k is not None and not isinstance(k, slice) else k
                         for k in entries))
    at = [j for j, k in enumerate(entries) if k is not None and not isinstance(k, slice)]
    dims = [builtins.sum(1 for k in entries[:j] if k is not None) for j in at]   # x's axes
    idx = [index_array(entries[j][1] if isinstance(entries[j], tuple) else entries[j],
                       y.shape[j], d) for j, d in zip(at, dims)]
    shape = _np.broadcast_shapes(*(tuple(_np.shape(i)) for i in idx))
    flat = 0
    for i, j in zip(idx, at):   # row-major positions in the indexed axes
        flat = add(multiply(flat, y.shape[j]), i)
    flat = P.broadcast_to(asarray(flat), shape) if tuple(_np.shape(flat)) != shape else flat
    rest = [j for j in range(y.ndim) if j not in at]
    y = P.transpose(y, at + rest) if at + rest != list(range(y.ndim)) else y
    y = P.reshape(y, (math.prod(y.shape[:len(at)]),) + tuple(y.shape[len(at):]))
    r = P.take(y, astype(asarray(flat), "i32"), 0)
    if at != list(range(at[0], at[0] + len(at))) or at[0] == 0:
        return r   # not adjacent (or already first): the indexed axes lead
    nb = len(shape)
    return P.transpose(r, list(range(nb, nb + at[0])) + list(range(nb))
                       + list(range(nb + at[0], r.ndim)))


def _index_plan(x, entries):
    """What the entries read: the strided slice (start, limit, step per axis), the negative-step
    slices to gather (axis, start, step, length), the array index (axis, positions) or None, and
    the result's shape."""
    start, limit, step, reverse, out_shape = [], [], [], [], []
    array_at, d = None, 0
    for k in entries:
        if k is None:
            out_shape.append(1)
            continue
        n = x.shape[d]
        if is_int(k):
            i = int(k) + n if k < 0 else int(k)
            if not 0 <= i < n:
                raise VkgradIndexError(f"index {k} is out of bounds for axis {d} with size {n}",
                                       source=user_source())
            start.append(i), limit.append(i + 1), step.append(1)
        elif isinstance(k, slice):
            if k.step == 0:
                raise VkgradIndexError("slice step cannot be zero", source=user_source())
            s, stop, st = k.indices(n)
            m = len(range(s, stop, st))
            if st > 0:
                start.append(s), limit.append(s + (m - 1) * st + 1 if m else s), step.append(st)
            else:   # negative step: a gather of the indices s, s+st, ... (in getitem)
                start.append(0), limit.append(n), step.append(1)
                reverse.append((d, s, st, m))
            out_shape.append(m)
        else:
            start.append(0), limit.append(n), step.append(1)
            idx = index_array(k[1], n, d)
            array_at = (d, idx)
            out_shape += list(idx.shape)
        d += 1
    return start, limit, step, reverse, array_at, out_shape


class _At:
    __slots__ = ("_x",)

    def __init__(self, x):
        self._x = x

    def __getitem__(self, idx):
        return _AtRef(self._x, idx)


class _AtRef:
    """x.at[idx]: .get(), .set(v), .add(v), .multiply(v) (.mul), .divide(v), .power(v),
    .min(v), .max(v). Repeated indices: add/mul/min/max combine every update (as JAX);
    set keeps the last one (numpy's order) where the indices are concrete."""

    __slots__ = ("x", "idx")

    def __init__(self, x, idx):
        self.x, self.idx = asarray(x), idx

    def get(self, *, mode=None, fill_value=None):
        return getitem(self.x, self.idx)

    def _positions(self):
        """The flat positions idx selects, shaped like x[idx]: a numpy array when idx is
        concrete (any numpy index works, boolean masks too), else a traced i32 array."""
        x, idx = self.x, self.idx
        n = math.prod(x.shape)
        keys = idx if isinstance(idx, tuple) else (idx,)
        if not builtins.any(isinstance(k, ArrayOps) for k in keys):
            try:
                return _np.asarray(_np.arange(n, dtype=_np.int32).reshape(x.shape)[idx])
            except IndexError as e:
                raise VkgradIndexError(f"x.at[...]: {e}", source=user_source()) from None
        return _traced_positions(x, idx)

    def _apply(self, v, combine):
        """x with combine(x[idx], v) at idx (combine None: v itself)."""
        x, idx = self.x, self.idx
        if isinstance(idx, ArrayOps) and dtype_of(idx) == "bool" and \
                tuple(idx.shape) == tuple(x.shape):   # a traced mask: a select, no scatter
            v = astype(asarray(v), dtype_of(x))
            return where(idx, v if combine is None else combine(x, v), x)
        pos = self._positions()
        dt = dtype_of(x)
        n = math.prod(x.shape)
        v = astype(P.broadcast_to(asarray(v), tuple(pos.shape)), dt)
        flat_x, flat_v = _flat(x), _flat(v)
        if isinstance(pos, _np.ndarray):   # concrete: rounds of distinct positions
            for slots, at_ in _duplicate_rounds(pos.reshape(-1), keep_last=combine is None):
                hit = _np.zeros(n, bool)
                hit[at_] = True
                upd = P.scatter_add(P.take(flat_v, slots.astype(_np.int32), 0),
                                    at_.astype(_np.int32), 0, (n,))
                flat_x = where(hit, upd if combine is None else combine(flat_x, upd), flat_x)
            return P.reshape(flat_x, x.shape)
        p = _flat(pos)   # traced positions: -1 for an index out of range, whose update drops
        hit = P.le(_np.int32(0), p)
        p, flat_v = where(hit, p, 0), where(hit, flat_v, np_dtype(dt).type(0))
        if combine is add:
            return P.reshape(add(flat_x, P.scatter_add(flat_v, p, 0, (n,))), x.shape)
        if combine is not None:
            raise VkgradIndexError(
                "x.at[traced indices].mul/min/max/...: vkgrad needs concrete indices for these "
                "(repeated indices must be grouped at trace time); use .add, .set, or numpy "
                "indices", source=user_source())
        ones = astype(hit, dt)
        count = P.scatter_add(ones, p, 0, (n,))   # set: repeats -> mean
        total = P.scatter_add(flat_v, p, 0, (n,))
        upd = where(greater(count, 1), astype(divide(total, maximum(count, 1)), dt), total)
        return P.reshape(where(greater(count, 0), upd, flat_x), x.shape)   # exact for one

    def set(self, values, **kw): return self._apply(values, None)
    def add(self, values, **kw): return self._apply(values, add)
    def multiply(self, values, **kw): return self._apply(values, multiply)
    def divide(self, values, **kw): return self._apply(values, divide)
    def power(self, values, **kw): return self._apply(values, power)
    def min(self, values, **kw): return self._apply(values, minimum)
    def max(self, values, **kw): return self._apply(values, maximum)
    mul = multiply


def _traced_positions(x, idx):
    """The flat positions a key with traced indices selects, shaped like x[idx], -1 where an
    index is out of range (JAX drops those updates; a gather would clamp them onto the last
    element): each axis a traced array indexes gets one more slot holding -1, and its indices
    out of range are sent there. Gathered as f32 (exact below 2**24; the gather kernel moves
    f32) and cast back."""
    pos = P.reshape(P.iota((math.prod(x.shape),), 0, "f32"), x.shape)
    key, d = [], 0
    for k in _key_entries(x, _masks_as_indices(x, idx)):
        if isinstance(k, tuple) and isinstance(k[1], Tracer):
            n = x.shape[d]
            i = asarray(k[1])
            i = where(less(i, 0), add(i, n), i)
            k = where(logical_or(less(i, 0), less(n - 1, i)), n, i)
            pad = list(pos.shape)
            pad[d] = 1
            pos = P.concatenate([pos, P.broadcast_to(_np.float32(-1), tuple(pad))], d)
        elif isinstance(k, tuple):
            k = k[1]
        key.append(k)
        d += k is not None
    return astype(getitem(pos, tuple(key)), "i32")


def _duplicate_rounds(pos, keep_last):
    """Split the update slots into rounds with distinct positions each: [(slots, positions)].
    keep_last: one round, the last update of each position (numpy's x[idx] = v)."""
    if keep_last:
        _, first_rev = _np.unique(pos[::-1], return_index=True)
        slots = len(pos) - 1 - first_rev
        return [(slots, pos[slots])] if len(slots) else []
    rounds, slots = [], _np.arange(len(pos))
    while len(slots):
        _, first = _np.unique(pos[slots], return_index=True)
        rounds.append((slots[first], pos[slots[first]]))
        slots = _np.delete(slots, first)
    return rounds


def at(x):
    """`vnp.at(x)[idx].set(v)`: the same as x.at[idx], for numpy's arrays too (which have no
    .at)."""
    return _At(x)


def setitem(self, key, value):
    raise ArgumentError(
        f"'{type(self).__name__}' object does not support item assignment. vkgrad arrays are "
        "immutable (as JAX's). Instead of ``x[idx] = y``, use ``x = x.at[idx].set(y)`` or "
        "another .at[] method (.add, .multiply, .min, .max; .get reads)",
        source=user_source())


def unravel_index(indices, shape):
    """jnp.unravel_index: the tuple of coordinate arrays of flat `indices` into `shape` (C
    order). As JAX's, an index out of range clamps: one from -1 down to -size counts from the
    end, a larger one gives the last element's coordinates, a smaller the first's."""
    idx = asarray(indices)
    shape = [shape] if _np.ndim(shape) == 0 else list(shape)
    out = [None] * len(shape)
    for i in reversed(range(len(shape))):
        idx, out[i] = divmod(idx, shape[i])
    above, below = greater(idx, 0), less(idx, -1)
    return tuple(where(above, s - 1, where(below, 0, o)) for s, o in zip(shape, out))


_RAVEL_MODES = ("raise", "wrap", "clip", "ignore")


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """jnp.ravel_multi_index: the flat index of the coordinates `multi_index` (a sequence of
    int arrays, one per dimension of `dims`) in C or F order. mode='raise' checks concrete
    coordinates (traced ones cannot be checked: use 'wrap' or 'clip', as JAX asks), 'wrap'
    takes them modulo the dimension, 'clip' clamps, 'ignore' uses them as they are."""
    if mode not in _RAVEL_MODES:
        raise ArgumentError(f"ravel_multi_index: invalid mode={mode!r}. Expected one of "
                            f"{_RAVEL_MODES}", source=user_source())
    if order not in ("C", "F"):
        raise ArgumentError(f"ravel_multi_index: invalid order={order!r}. Expected 'C' or 'F'",
                            source=user_source())
    if len(multi_index) != len(dims):
        raise ShapeError(f"ravel_multi_index: {len(multi_index)} coordinate arrays for "
                         f"{len(dims)} dimensions {tuple(dims)}", source=user_source())
    if not builtins.all(is_int(d) for d in dims):
        raise ArgumentError(f"ravel_multi_index: dims must be Python ints, got {tuple(dims)}",
                            source=user_source())
    dims = tuple(int(d) for d in dims)
    if math.prod(dims) - 1 > _np.iinfo(_np.int32).max:
        raise ShapeError(f"ravel_multi_index: flat indices into {dims} do not fit in int32",
                         source=user_source())
    if dtype is not None and dtype_name(dtype) != "i32":
        raise DTypeError(f"ravel_multi_index: dtype={dtype!r} is not an integer type",
                         source=user_source())
    coords = [_coordinate(asarray(i), d, mode) for i, d in zip(multi_index, dims)]
    strides = _np.cumprod((1,) + (dims[:-1] if order == "F" else dims[:0:-1]))
    strides = strides if order == "F" else strides[::-1]
    result = _np.int32(0)
    for c, s in zip(coords, strides):
        result = add(result, multiply(c, int(s)))
    return asarray(result)


def _coordinate(i, d, mode):
    if dtype_of(i) != "i32":
        raise DTypeError(f"ravel_multi_index: only int indices permitted, got {type_string(i)}",
                         source=user_source())
    if mode == "clip":
        return clip(i, 0, d - 1)
    if mode == "wrap":
        return remainder(i, d)
    if mode == "raise":
        v = concrete_value(i)
        if v is None:
            raise concretization_error(
                i, "ravel_multi_index(mode='raise') (it checks the coordinates' values)",
                "use mode='wrap' or mode='clip', as JAX asks")
        if v.size and (v.min() < 0 or v.max() >= d):
            raise VkgradIndexError(f"ravel_multi_index: invalid entry in coordinates array: "
                                   f"values in [{v.min()}, {v.max()}] for a dimension of {d}",
                                   source=user_source())
    return i
