"""Array manipulation: shapes, axes, joining, splitting, flipping, tiling, padding. Layout ops
only (a reshape, transpose, slice, concatenate or gather), which fuse into their neighbours'
kernels on Vulkan."""

from __future__ import annotations

import builtins
import math

import numpy as _np

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, ShapeError, VkgradIndexError
from vkgrad.numpy.dtypes import asarray, astype, dtype_of, promote, promoted_dtype
from vkgrad.numpy.indexing import getitem
from vkgrad.numpy.ufuncs import greater_equal, less, logical_and, where
from vkgrad.numpy.util import define_wrappers, is_int, normalize_axes, type_string
from vkgrad.tracer.core import Tracer, concretization_error, user_source


def shape(a) -> tuple:
    return tuple(asarray(a).shape)


def ndim(a) -> int:
    return asarray(a).ndim


def size(a) -> int:
    return math.prod(shape(a))


def reshape(a, newshape):
    a = asarray(a)
    newshape = (newshape,) if isinstance(newshape, (int, _np.integer)) else tuple(newshape)
    if builtins.sum(1 for d in newshape if d == -1) > 1:
        raise ShapeError(f"reshape of {type_string(a)} to {newshape}: only one dimension may be -1",
                         source=user_source())
    if -1 in newshape:
        known = math.prod(d for d in newshape if d != -1)
        total = math.prod(a.shape)
        if known == 0 or total % known:
            raise ShapeError(f"cannot reshape {type_string(a)} ({total} elements) to {newshape}",
                             primitive="reshape", source=user_source())
        newshape = tuple(total // known if d == -1 else d for d in newshape)
    return P.reshape(a, newshape)


def ravel(a):
    return reshape(a, (-1,))


def transpose(a, axes=None):
    a = asarray(a)
    perm = tuple(reversed(range(a.ndim))) if axes is None else tuple(
        int(p) % a.ndim if a.ndim else p for p in axes)
    return P.transpose(a, perm)


def swapaxes(a, axis1, axis2):
    a = asarray(a)
    i, j = normalize_axes(axis1, a.ndim)[0], normalize_axes(axis2, a.ndim)[0]
    perm = list(range(a.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return P.transpose(a, perm)


def moveaxis(a, source, destination):
    """a with the axes `source` (an int or a sequence) moved to `destination` (numpy's)."""
    a = asarray(a)
    def each(axes):   # in the order given (normalize_axes sorts)
        axes = axes if isinstance(axes, (tuple, list)) else (axes,)
        return [normalize_axes(i, a.ndim)[0] for i in axes]
    s, d = each(source), each(destination)
    if len(s) != len(d) or len(set(s)) != len(s) or len(set(d)) != len(d):
        raise ShapeError(f"moveaxis: source {source} and destination {destination} must name "
                         "as many distinct axes", source=user_source())
    perm = [i for i in range(a.ndim) if i not in s]
    for dest, src in sorted(zip(d, s)):
        perm.insert(dest, src)
    return P.transpose(a, perm)


def rollaxis(a, axis, start=0):
    """numpy's rollaxis: axis moved to sit before position `start` (moveaxis is clearer)."""
    a = asarray(a)
    ax = normalize_axes(axis, a.ndim)[0]
    if not -a.ndim <= start <= a.ndim:
        raise VkgradIndexError(f"rollaxis: start {start} is out of bounds for an array of "
                               f"dimension {a.ndim}", source=user_source())
    start = start + a.ndim if start < 0 else start
    start = start - 1 if ax < start else start
    return moveaxis(a, ax, start)


def broadcast_to(a, shape):
    return P.broadcast_to(asarray(a), (shape,) if isinstance(shape, int) else tuple(shape))


def expand_dims(a, axis):
    a = asarray(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out_ndim = a.ndim + len(axes)
    new = normalize_axes(axes, out_ndim)
    dims = iter(a.shape)
    return P.reshape(a, [1 if i in new else next(dims) for i in range(out_ndim)])


def squeeze(a, axis=None):
    a = asarray(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        axes = normalize_axes(axis, a.ndim)
        if builtins.any(a.shape[i] != 1 for i in axes):
            raise ShapeError(f"squeeze of {type_string(a)}: axis {axis} does not have size 1",
                             source=user_source())
    return P.reshape(a, [d for i, d in enumerate(a.shape) if i not in axes])


def concatenate(arrays, axis=0):
    arrays = [asarray(x) for x in arrays]
    if not arrays:
        raise ShapeError("concatenate needs at least one array", source=user_source())
    if axis is None:
        arrays, axis = [ravel(x) for x in arrays], 0
    dt = promoted_dtype(*arrays)
    nd = arrays[0].ndim
    if nd == 0:
        raise ShapeError("zero-dimensional arrays cannot be concatenated", source=user_source())
    return P.concatenate([promote(x, dt) for x in arrays], normalize_axes(axis, nd)[0])


def stack(arrays, axis=0):
    arrays = [asarray(x) for x in arrays]
    if not arrays:
        raise ShapeError("stack needs at least one array", source=user_source())
    ax = normalize_axes(axis, arrays[0].ndim + 1)[0]
    return concatenate([expand_dims(x, ax) for x in arrays], ax)


def _atleast(arys, padded) -> list:
    """Each array reshaped to padded(its shape): numpy's atleast_nd."""
    out = []
    for a in map(asarray, arys):
        shape = padded(tuple(a.shape))
        out.append(reshape(a, shape) if shape != tuple(a.shape) else a)
    return out


def _pad1(s): return s or (1,)
def _pad2(s): return (1,) * (2 - len(s)) + s if len(s) < 2 else s
def _pad3(s): return {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s)


def _at_least(padded):
    def at_least(*arys):
        r = _atleast(arys, padded)
        return r[0] if len(r) == 1 else r
    return at_least


def _stack_along(padded, axis):
    def stack_along(tup):
        return concatenate(_atleast(tup, padded), axis)
    return stack_along


def _flip_along(axis):
    def flip_along(m):
        return flip(m, axis)
    return flip_along


def _split_along(axis):
    def split_along(ary, indices_or_sections):
        return split(ary, indices_or_sections, axis)
    return split_along


_AT_LEAST = {   # name: (the padded shape, docstring)
    "atleast_1d": (_pad1, "Each array with at least 1 dimension (a scalar becomes (1,))."),
    "atleast_2d": (_pad2, "Each array with at least 2 dimensions (leading 1s added)."),
    "atleast_3d": (_pad3, "Each array with at least 3 dimensions ((n,) becomes (1, n, 1))."),
}
_STACKS = {   # name: (the padded shape, axis, docstring)
    "vstack": (_pad2, 0, "The arrays (at least 2-D) joined along axis 0: rows."),
    "dstack": (_pad3, 2, "The arrays (at least 3-D) joined along axis 2: depth."),
}
_FLIPS = {   # name: (axis, docstring)
    "flipud": (0, "m reversed along axis 0 (up/down)."),
    "fliplr": (1, "m reversed along axis 1 (left/right)."),
}
_SPLITS = {   # name: (axis, docstring)
    "vsplit": (0, "split(ary, indices_or_sections, axis=0): rows."),
    "dsplit": (2, "split(ary, indices_or_sections, axis=2): depth."),
}

__all__ = (define_wrappers(globals(), _AT_LEAST, _at_least)
           + define_wrappers(globals(), _STACKS, _stack_along)
           + define_wrappers(globals(), _FLIPS, _flip_along)
           + define_wrappers(globals(), _SPLITS, _split_along)
           + ["shape", "ndim", "size", "reshape", "ravel", "transpose", "swapaxes", "moveaxis",
              "rollaxis",
              "broadcast_to", "expand_dims", "squeeze", "concatenate", "stack", "hstack",
              "row_stack", "column_stack", "append", "broadcast_arrays", "broadcast_shapes",
              "flip", "rot90", "roll", "repeat", "tile", "array_split", "split", "hsplit",
              "pad"])


def hstack(tup):
    arrs = _atleast(tup, _pad1)
    return concatenate(arrs, 0 if arrs[0].ndim == 1 else 1)


row_stack = vstack   # the table above defines vstack


def column_stack(tup):
    arrs = [asarray(a) for a in tup]
    return concatenate([reshape(a, (-1, 1)) if a.ndim < 2 else a for a in arrs], 1)


def append(arr, values, axis=None):
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def broadcast_arrays(*args):
    args = [asarray(a) for a in args]
    shape = P.broadcast_shapes("broadcast_arrays",
                               [P.TensorType(tuple(a.shape), "f32") for a in args])
    return [a if tuple(a.shape) == shape else broadcast_to(a, shape) for a in args]


def broadcast_shapes(*shapes) -> tuple:
    return P.broadcast_shapes("broadcast_shapes", [P.TensorType(tuple(s), "f32")
                                                   for s in shapes])


def flip(m, axis=None):
    m = asarray(m)
    axes = normalize_axes(axis, m.ndim)
    return getitem(m, tuple(slice(None, None, -1) if i in axes else slice(None)
                             for i in range(m.ndim)))


def rot90(m, k=1, axes=(0, 1)):
    m = asarray(m)
    k %= 4
    a0, a1 = normalize_axes(axes[0], m.ndim)[0], normalize_axes(axes[1], m.ndim)[0]
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return transpose(flip(m, a1), perm) if k == 1 else flip(transpose(m, perm), a1)


def roll(a, shift, axis=None):
    a = asarray(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) != len(axes):
        shifts = shifts * len(axes) if len(shifts) == 1 else shifts
    for s, ax in zip(shifts, axes):
        ax = normalize_axes(ax, a.ndim)[0]
        n = a.shape[ax]
        s = int(s) % n if n else 0
        if s:
            lo = [slice(None)] * a.ndim
            hi = [slice(None)] * a.ndim
            lo[ax], hi[ax] = slice(n - s, n), slice(0, n - s)
            a = concatenate([getitem(a, tuple(lo)), getitem(a, tuple(hi))], ax)
    return a


def repeat(a, repeats, axis=None):
    a = asarray(a)
    if axis is None:
        a, axis = ravel(a), 0
    ax = normalize_axes(axis, a.ndim)[0]
    if is_int(repeats):
        r = int(repeats)
        if r < 0:
            raise ShapeError(f"repeat: repeats is {r}; it counts copies and must be >= 0",
                             source=user_source())
        x = expand_dims(a, ax + 1)
        x = broadcast_to(x, a.shape[:ax + 1] + (r,) + a.shape[ax + 1:])
        return reshape(x, a.shape[:ax] + (a.shape[ax] * r,) + a.shape[ax + 1:])
    if isinstance(repeats, Tracer):
        raise concretization_error(repeats, "vnp.repeat with per-element counts (the result's "
                                   "shape depends on them)", "pass the counts as a numpy "
                                   "array or list")
    counts = _np.broadcast_to(_np.asarray(repeats), (a.shape[ax],))
    return P.take(a, _np.repeat(_np.arange(a.shape[ax]), counts).astype(_np.int32), ax)


def tile(A, reps):
    A = asarray(A)
    reps = (reps,) if is_int(reps) else tuple(reps)
    nd = builtins.max(A.ndim, len(reps))
    A = reshape(A, (1,) * (nd - A.ndim) + tuple(A.shape))
    reps = (1,) * (nd - len(reps)) + reps
    x = reshape(A, [d for s in A.shape for d in (1, s)])
    x = broadcast_to(x, [d for r, s in zip(reps, A.shape) for d in (r, s)])
    return reshape(x, [r * s for r, s in zip(reps, A.shape)])


def array_split(ary, indices_or_sections, axis=0):
    a = asarray(ary)
    ax = normalize_axes(axis, a.ndim)[0]
    n = a.shape[ax]
    if is_int(indices_or_sections):
        k = int(indices_or_sections)
        if k <= 0:
            raise ArgumentError("number of sections must be larger than 0",
                                source=user_source())
        each, extra = builtins.divmod(n, k)
        sizes = [each + 1] * extra + [each] * (k - extra)
        bounds = [0] + list(_np.cumsum(sizes))
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i) + (n if i < 0 else 0), 0), n)
                        for i in indices_or_sections] + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        key = [slice(None)] * a.ndim
        key[ax] = slice(int(lo), builtins.max(int(hi), int(lo)))
        out.append(getitem(a, tuple(key)))
    return out


def split(ary, indices_or_sections, axis=0):
    a = asarray(ary)
    n = a.shape[normalize_axes(axis, a.ndim)[0]]
    if is_int(indices_or_sections) and n % indices_or_sections:
        raise ShapeError(f"split: {type_string(a)} does not divide into {indices_or_sections} "
                         f"equal parts along axis {axis} (vnp.array_split allows unequal ones)",
                         source=user_source())
    return array_split(a, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 0 if asarray(ary).ndim == 1 else 1)


def pad(array, pad_width, mode="constant", constant_values=0):
    """numpy's pad, modes 'constant', 'edge' and 'reflect' (what people use for images and
    sequences; the others are refused by name)."""
    a = asarray(array)
    pw = _np.broadcast_to(_np.asarray(pad_width, dtype=_np.int64), (a.ndim, 2)).tolist()
    if builtins.any(p < 0 for row in pw for p in row):
        raise ArgumentError("pad: pad widths must be non-negative", source=user_source())
    if mode == "constant":
        return _pad_constant(a, pw, constant_values)
    if mode not in ("edge", "reflect"):
        raise ArgumentError(f"pad(mode={mode!r}): vkgrad pads in modes 'constant', 'edge' and "
                            "'reflect'", source=user_source())
    for ax, (lo, hi) in enumerate(pw):
        n = a.shape[ax]
        if (lo or hi) and n == 0:
            raise ShapeError(f"pad: cannot pad an empty axis {ax} in mode {mode!r}",
                             source=user_source())
        before, after = _pad_sources(n, lo, hi, mode)
        if before or after:
            idx = _np.asarray(before + list(range(n)) + after, _np.int32)
            a = P.take(a, idx, ax)
    return a


def _pad_constant(a, pw, constant_values):
    """The pad primitive (zeros), then a select per axis where the constants are not 0."""
    cv = _np.broadcast_to(_np.asarray(constant_values), (a.ndim, 2))
    r = P.pad(a, [lo for lo, _ in pw], [hi for _, hi in pw])
    if not cv.any():
        return r
    for ax, ((lo, hi), (vlo, vhi)) in enumerate(zip(pw, cv.tolist())):
        idx = P.iota(r.shape, ax, "i32")
        inside = logical_and(greater_equal(idx, lo), less(idx, r.shape[ax] - hi))
        before = less(idx, lo)
        r = where(inside, r, where(before, vlo, vhi))
    return astype(r, dtype_of(a))


def _pad_sources(n, lo, hi, mode) -> tuple:
    """Which positions of an axis of size n the lo padded ones before it and the hi after it
    copy: the edge, or the mirror image without the edge repeated ('reflect')."""
    if mode == "edge":
        return [0] * lo, [n - 1] * hi
    if n == 1:
        return [0] * lo, [0] * hi
    period = 2 * (n - 1)

    def refl(i):
        i %= period
        return i if i < n else period - i
    return [refl(-i) for i in range(lo, 0, -1)], [refl(n - 1 + i) for i in range(1, hi + 1)]


def concat(arrays, /, *, axis=0):
    """The array API's concatenate (jnp.concat); axis None concatenates the flattened arrays."""
    if axis is None:
        return concatenate([ravel(asarray(a)) for a in arrays], axis=0)
    return concatenate(arrays, axis)


def permute_dims(a, /, axes):
    """The array API's transpose (jnp.permute_dims): axes is required."""
    return transpose(a, axes)


def matrix_transpose(x, /):
    """x with its last two axes swapped (jnp.matrix_transpose, x.mT); x needs 2 axes or more."""
    x = asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"matrix_transpose needs an array of 2 or more dimensions, got "
                         f"{type_string(x)}", source=user_source())
    return swapaxes(x, -1, -2)


def unstack(x, /, *, axis=0):
    """The slices of x along axis, as a tuple (jnp.unstack)."""
    x = asarray(x)
    if x.ndim == 0:
        raise ShapeError("unstack needs an array of 1 or more dimensions, got a 0-d "
                         f"{type_string(x)}", source=user_source())
    ax = normalize_axes(axis, x.ndim)[0]
    return tuple(squeeze(s, ax) for s in split(x, x.shape[ax], ax)) if x.shape[ax] else ()


__all__ += ["concat", "permute_dims", "matrix_transpose", "unstack"]


def resize(a, new_shape):
    """An array of new_shape filled with a's flattened elements, repeated as needed (numpy's
    and JAX's; zeros if a or the new shape is empty)."""
    a = asarray(a)
    shape = (new_shape,) if is_int(new_shape) else tuple(new_shape)
    if builtins.any(not is_int(d) or d < 0 for d in shape):
        raise ShapeError(f"resize: new_shape must be non-negative ints, got {new_shape!r}",
                         source=user_source())
    flat = ravel(a)
    n, m = flat.shape[0], math.prod(shape)
    if n == 0 or m == 0:
        return P.broadcast_to(_np.zeros((), _np.dtype(a.dtype)), shape)
    return reshape(tile(flat, -(-m // n))[:m], shape)


def block(arrays):
    """numpy's block: nested lists of arrays joined, the innermost lists along the last axis,
    the next ones along the one before, and so on (every array at least as many dimensions
    as the nesting is deep)."""
    def depth(x):
        if isinstance(x, list):
            if not x:
                raise ShapeError("block: empty lists are not allowed", source=user_source())
            ds = {depth(v) for v in x}
            if len(ds) != 1:
                raise ShapeError("block: list depths are mismatched", source=user_source())
            return ds.pop() + 1
        if isinstance(x, tuple):
            raise ArgumentError("block: the nesting is of lists (tuples are not lists, as "
                                "numpy's block says)", source=user_source())
        return 0
    d = depth(arrays)
    ndim = builtins.max([asarray(v).ndim for v in _leaves(arrays)] + [d])

    def join(x, level):
        if not isinstance(x, list):
            x = asarray(x)
            return reshape(x, (1,) * (ndim - x.ndim) + tuple(x.shape))
        return concatenate([join(v, level + 1) for v in x], axis=ndim - d + level)
    return join(arrays, 0)


def _leaves(x):
    if isinstance(x, list):
        for v in x:
            yield from _leaves(v)
    else:
        yield x


__all__ += ["resize", "block"]
