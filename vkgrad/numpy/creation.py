"""Array creation: filled arrays, ranges, grids (meshgrid, indices, ix_, mgrid, ogrid), the
matrices eye / tri / tril / triu / vander, one_hot, numpy's r_ / c_, and arrays from numpy's
readers (load, frombuffer, fromstring, fromiter)."""

from __future__ import annotations

import builtins
import math
import operator

import numpy as _np

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.ir.core import np_dtype
from vkgrad.numpy.dtypes import (as_float, asarray, astype, dtype_name, dtype_of, float32,
                                 promote, promoted_dtype)
from vkgrad.numpy.shapes import (atleast_1d, broadcast_to, concatenate, expand_dims, moveaxis,
                                 ravel, reshape, shape, stack)
from vkgrad.numpy.ufuncs import add, divide, multiply, power, subtract, where
from vkgrad.numpy.util import define_wrappers
from vkgrad.tracer.core import (ArrayOps, Tracer, concrete_value, concretization_error,
                                user_source)


def _shape_arg(shape) -> tuple:
    """A shape argument as a tuple of non-negative integers; anything else is refused, as numpy
    refuses it."""
    dims = (shape,) if isinstance(shape, (int, _np.integer, Tracer)) else shape
    if not isinstance(dims, (tuple, list, _np.ndarray)):
        raise ShapeError(f"{shape!r} is not a shape: give an int or a tuple of ints",
                         source=user_source())
    # a traced dimension: its value when an eager transform knows it, else the
    # ConcretizationError explaining static arguments
    dims = [d.__index__() if isinstance(d, Tracer) else d for d in dims]
    for d in dims:
        if not isinstance(d, (int, _np.integer)) or d < 0:
            raise ShapeError(f"{shape!r} is not a shape: dimensions are non-negative ints, "
                             f"got {d!r}", source=user_source())
    return tuple(dims)


def full(shape, fill_value, dtype=None):
    """An array of `shape` holding fill_value (its dtype by the promotion rules, or `dtype`)."""
    shape = _shape_arg(shape)
    dt = dtype_name(dtype) if dtype is not None else promoted_dtype(fill_value)
    return P.broadcast_to(promote(fill_value, dt), shape)


def full_like(a, fill_value, dtype=None):
    """full with the shape of a, and its dtype unless `dtype` is given."""
    return full(shape(a), fill_value, dtype or dtype_of(asarray(a)))


def _filled(value):
    def filled(shape, dtype=float32):
        return full(shape, value, dtype)
    return filled


def _filled_like(value):
    def filled_like(a, dtype=None):
        return full_like(a, value, dtype)
    return filled_like


_FILLED = {   # name: (value, docstring)
    "zeros": (0, "An array of `shape` holding 0 (float32 unless `dtype` is given)."),
    "ones": (1, "An array of `shape` holding 1 (float32 unless `dtype` is given)."),
    "empty": (0, "zeros(shape, dtype): arrays are immutable, so an uninitialized one is 0."),
}
_FILLED_LIKE = {   # name: (value, docstring)
    "zeros_like": (0, "0s with the shape and dtype of a (or `dtype`)."),
    "ones_like": (1, "1s with the shape and dtype of a (or `dtype`)."),
    "empty_like": (0, "zeros_like(a, dtype): arrays are immutable, so an uninitialized one is 0."),
}

__all__ = (define_wrappers(globals(), _FILLED, _filled)
           + define_wrappers(globals(), _FILLED_LIKE, _filled_like)
           + ["full", "full_like", "arange", "linspace", "logspace", "geomspace", "meshgrid",
              "indices", "ix_",
              "eye", "identity", "tri", "tril", "triu", "vander", "one_hot", "r_", "c_"])


def arange(start, stop=None, step=1, dtype=None):
    if stop is None:
        start, stop = 0, start
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            v.__index__()   # raises the ConcretizationError explaining static arguments
    if step == 0:
        raise ArgumentError("arange: step is 0, so the range never reaches stop (numpy raises "
                            "too)", source=user_source())
    n = builtins.max(0, math.ceil((stop - start) / step))
    dt = dtype_name(dtype) if dtype is not None else (
        "i32" if builtins.all(isinstance(v, (int, _np.integer)) for v in (start, stop, step))
        else "f32")
    r = P.iota((n,), 0, dt)
    if step != 1:
        r = P.mul(r, step)
    return P.add(r, start) if start != 0 else r


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """Concrete ends: numpy's values (computed in float64, then cast). Traced ends (arrays):
    start + i * step, along a new axis `axis`."""
    num = int(num)
    div = (num - 1) if endpoint else num
    if not isinstance(start, ArrayOps) and not isinstance(stop, ArrayOps):
        # the ends' float dtype: float32, or float64 for float64 data with x64 on (JAX's)
        dt = (dtype_name(dtype) if dtype is not None
              else promoted_dtype(as_float(asarray(start)), as_float(asarray(stop))))
        r, step = _np.linspace(start, stop, num, endpoint=endpoint, retstep=True, axis=axis)
        r = asarray(r.astype(np_dtype(dt)))
        return (r, step) if retstep else r
    start, stop = as_float(start), as_float(stop)
    dt = dtype_name(dtype) if dtype is not None else promoted_dtype(start, stop)
    step = divide(subtract(stop, start), div) if div > 0 else multiply(subtract(stop, start), 0.0)
    shape = P.broadcast_shapes("linspace", [P.TensorType(tuple(start.shape), "f32"),
                                           P.TensorType(tuple(stop.shape), "f32")])
    i = P.iota((num,) + tuple(shape), 0, dtype_of(start))
    r = add(multiply(i, step), start)
    if endpoint and num > 1:
        r = concatenate([r[:-1], expand_dims(broadcast_to(stop, shape), 0)], 0)
    r = moveaxis(r, 0, axis) if axis != 0 else r
    r = astype(r, dt)
    return (r, step) if retstep else r


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    if not isinstance(start, ArrayOps) and not isinstance(stop, ArrayOps):
        r = _np.logspace(start, stop, num, endpoint, base, axis=axis)
        return asarray(r.astype(np_dtype(dtype_name(dtype) if dtype is not None else "f32")))
    r = power(base, linspace(start, stop, num, endpoint, axis=axis))
    return astype(r, dtype) if dtype is not None else r


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    return logspace(math.log10(start), math.log10(stop), num, endpoint, 10.0, dtype, axis)


def meshgrid(*xi, indexing="xy", sparse=False, copy=True):
    if indexing not in ("xy", "ij"):
        raise ArgumentError("meshgrid: indexing is 'xy' or 'ij'", source=user_source())
    xs = [ravel(x) for x in xi]
    nd = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and nd > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        ax = (1 if i == 0 else 0 if i == 1 else i) if indexing == "xy" and nd > 1 else i
        r = reshape(x, [x.shape[0] if j == ax else 1 for j in range(nd)])
        out.append(r if sparse else broadcast_to(r, shape))
    return out


def indices(dimensions, dtype=None, sparse=False):
    """jnp.indices: for each axis i of a grid of shape `dimensions`, every point's coordinate
    i (int32 unless `dtype`), stacked into one (len(dimensions), *dimensions) array, or with
    sparse=True a tuple of arrays of length 1 but on their own axis."""
    dims = _shape_arg(tuple(dimensions))
    dt = dtype_name(dtype) if dtype is not None else "i32"
    nd = len(dims)
    if sparse:
        return tuple(P.iota(tuple(d if j == i else 1 for j in range(nd)), i, dt)
                     for i, d in enumerate(dims))
    if nd == 0:
        return zeros((0,), dt)
    return P.concatenate([P.iota((1,) + dims, i + 1, dt) for i in range(nd)], 0)


def ix_(*args):
    """jnp.ix_: an open mesh from 1-D index arrays, the i-th reshaped to length 1 on every
    axis but axis i, so that x[ix_(rows, cols)] is the cross product (empty ones int32; bool
    masks are refused, as JAX refuses them)."""
    out = []
    for i, a in enumerate(args):
        a = asarray(a)
        if a.ndim != 1:
            raise ShapeError(f"ix_: arguments must be 1-dimensional, got shape "
                             f"{tuple(a.shape)} for argument {i}", source=user_source())
        if dtype_of(a) == "bool":
            raise ArgumentError("ix_ of a boolean mask is not supported (its length is "
                                "data): give the indices, vnp.nonzero(mask)[0]",
                                source=user_source())
        if a.shape[0] == 0:
            a = astype(a, "i32")
        out.append(reshape(a, [a.shape[0] if j == i else 1 for j in range(len(args))]))
    return tuple(out)


def _tri_mask(n, m, k):
    """bool[n, m]: j <= i + k."""
    return P.le(P.iota((n, m), 1, "i32"), P.add(P.iota((n, m), 0, "i32"), int(k)))


def tri(N, M=None, k=0, dtype=float32):
    return astype(_tri_mask(N, N if M is None else M, k), dtype)


def eye(N, M=None, k=0, dtype=float32):
    M = N if M is None else M
    return astype(P.eq(P.iota((N, M), 1, "i32"), P.add(P.iota((N, M), 0, "i32"), int(k))), dtype)


def identity(n, dtype=float32): return eye(n, dtype=dtype)


def vander(x, N=None, increasing=False):
    """jnp.vander: the columns x**(N-1), ..., x, 1 of the 1-D x (increasing: 1, x, ...), N
    defaulting to len(x). Each power is the one before times x, as numpy's multiply.accumulate
    (so its values are numpy's, exact for ints, and the gradient has no 0 * inf at x = 0)."""
    x = asarray(x)
    if x.ndim != 1:
        raise ShapeError(f"vander: x must be a one-dimensional array, got shape "
                         f"{tuple(x.shape)}", source=user_source())
    try:
        N = x.shape[0] if N is None else operator.index(N)
    except TypeError:
        raise ArgumentError(f"vander: N must be a Python int, got {N!r}",
                            source=user_source()) from None
    if N < 0:
        raise ShapeError(f"vander: N must be nonnegative, got {N}", source=user_source())
    cols = [full(x.shape, 1, dtype_of(x))][:N]
    while len(cols) < N:
        cols.append(multiply(cols[-1], x))
    if not cols:
        return zeros((x.shape[0], 0), dtype_of(x))
    m = stack(cols, axis=1)
    return m if increasing else m[:, ::-1]


def tril(m, k=0):
    m = asarray(m)
    return where(_tri_mask(m.shape[-2], m.shape[-1], k), m, zeros((), dtype_of(m)))


def triu(m, k=0):
    m = asarray(m)
    return where(_tri_mask(m.shape[-2], m.shape[-1], k - 1), zeros((), dtype_of(m)), m)


def one_hot(x, num_classes, dtype=float32):
    """one_hot(labels, n)[..., c] = (labels == c), as `dtype` (float32)."""
    x = asarray(x)
    hit = P.eq(expand_dims(x, -1), P.iota((int(num_classes),), 0, dtype_of(x)))
    return astype(hit, dtype)


class _IndexHelper:
    """numpy's r_ and c_: concatenate arrays, scalars and slices (an int step is arange, a
    complex step `1j * num` is linspace) along the first axis (r_) or as columns (c_)."""

    def __init__(self, columns: bool):
        self.columns = columns

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        parts = []
        for k in key:
            if isinstance(k, str):
                raise ArgumentError(f"{'c_' if self.columns else 'r_'}[{k!r}, ...]: the string "
                                    "directives of numpy's index helpers are not supported; "
                                    "use vnp.concatenate / vnp.stack", source=user_source())
            if isinstance(k, slice):
                parts.append(_slice_range(k))
            else:
                parts.append(atleast_1d(k))
        if self.columns:
            parts = [reshape(p, (-1, 1)) if p.ndim == 1 else p for p in parts]
            return concatenate(parts, -1)
        return concatenate(parts, 0)


r_ = _IndexHelper(columns=False)
c_ = _IndexHelper(columns=True)


def _slice_range(k):
    """A slice of an index helper as a range: an int step is arange, a complex step `1j *
    num` linspace with num points."""
    start = 0 if k.start is None else k.start
    step = 1 if k.step is None else k.step
    if isinstance(step, complex):
        return linspace(start, k.stop, int(builtins.abs(step)))
    return arange(start, k.stop, step)


class _GridHelper:
    """jnp's mgrid (dense) and ogrid (open): the grid of the slices' ranges (an int step is
    arange, a complex step `1j * num` linspace), meshgrid(..., indexing='ij'); dense grids
    stacked along a new first axis."""

    def __init__(self, sparse: bool):
        self.sparse = sparse

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _slice_range(key)
        ranges = [_slice_range(k) for k in key]
        if not ranges:
            return [] if self.sparse else arange(0)
        dt = promoted_dtype(*ranges)
        grids = meshgrid(*[astype(r, dt) for r in ranges], indexing="ij", sparse=self.sparse)
        return list(grids) if self.sparse else stack(grids, 0)


mgrid = _GridHelper(sparse=False)
ogrid = _GridHelper(sparse=True)


def copy(a, order=None):
    """a as a vkgrad array (a copy of numpy data; vkgrad arrays are immutable, so one of
    them is itself)."""
    return asarray(a)


def mask_indices(n, mask_func, k=0, *, size=None):
    """The (row, column) indices where mask_func(ones((n, n)), k) is nonzero (numpy's; e.g.
    mask_func=vnp.triu). The mask must be concrete; size= pads (with 0) or cuts the indices to
    that length, as JAX's nonzero(size=)."""
    m = mask_func(_np.ones((n, n), _np.float32), k)
    v = concrete_value(m)
    if v is None:
        raise concretization_error(m, "vnp.mask_indices (its result's length depends on the "
                                   "mask)", "call it outside the transformed function")
    i, j = _np.nonzero(_np.asarray(v))
    if size is not None:
        i, j = (_np.pad(x[:size], (0, builtins.max(0, size - x.size))) for x in (i, j))
    return _index_arrays(i, j)


def load(file, *args, **kwargs):
    """numpy's load: an array saved by vnp.save / np.save as a vkgrad array (bfloat16 data,
    which numpy saves as 2-byte voids, read back as bfloat16, as JAX does); an .npz archive as
    numpy's NpzFile."""
    out = _np.load(file, *args, **kwargs)
    if isinstance(out, _np.ndarray):
        if out.dtype == _np.dtype("V2"):
            out = out.view(np_dtype("bf16"))
        return asarray(out)
    return out


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """numpy's frombuffer, as a vkgrad array (by the dtype policy: float64 data is float32
    unless x64 is on)."""
    return asarray(_np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string, dtype=float, count=-1, *, sep):
    """numpy's fromstring of text (sep= is required, as numpy's binary mode is gone), as a
    vkgrad array."""
    return asarray(_np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromiter(iterable, dtype, count=-1):
    """numpy's fromiter, as a vkgrad array. It consumes the iterable when called, so under
    a transformation it runs once, at trace time (JAX refuses it for that reason)."""
    return asarray(_np.fromiter(iterable, dtype=dtype, count=count))


def fromfile(file, dtype=float, count=-1, sep="", offset=0):
    """numpy's fromfile, as a vkgrad array (JAX refuses it; a read from a file at trace time
    is the same as numpy's then)."""
    return asarray(_np.fromfile(file, dtype=dtype, count=count, sep=sep, offset=offset))


def from_dlpack(x, *, device=None, copy=None):
    """An array from any object with the DLPack protocol (__dlpack__: a torch tensor, a numpy
    array, ...), through numpy's from_dlpack: the data is copied to the host side first, so
    a GPU tensor of another library is refused there by numpy, with its message."""
    return asarray(_np.from_dlpack(x, copy=copy))


__all__ += ["mgrid", "ogrid", "copy", "mask_indices", "load", "frombuffer", "fromstring",
            "fromiter", "fromfile", "from_dlpack"]


def _index_arrays(rows, cols) -> tuple:
    return tuple(asarray(_np.asarray(v, _np.int32)) for v in (rows, cols))


def tril_indices(n, k=0, m=None):
    """The (row, column) indices of an (n, m) matrix's lower triangle at and below diagonal
    k, as int32 arrays (jnp.tril_indices; n, k and m are concrete)."""
    return _index_arrays(*_np.tril_indices(n, k, m))


def triu_indices(n, k=0, m=None):
    """The (row, column) indices of an (n, m) matrix's upper triangle at and above diagonal
    k (jnp.triu_indices)."""
    return _index_arrays(*_np.triu_indices(n, k, m))


def tril_indices_from(arr, k=0):
    """tril_indices of a 2-d array's shape."""
    n, m = _matrix_shape(arr, "tril_indices_from")
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    """triu_indices of a 2-d array's shape."""
    n, m = _matrix_shape(arr, "triu_indices_from")
    return triu_indices(n, k, m)


def _matrix_shape(arr, fn) -> tuple:
    shape = _np.shape(arr) if not isinstance(arr, (Tracer, ArrayOps)) else tuple(arr.shape)
    if len(shape) != 2:
        raise ShapeError(f"{fn} needs a 2-d array, got shape {shape}", source=user_source())
    return shape


def diag_indices(n, ndim=2):
    """The indices of an n x ... x n array's main diagonal: ndim copies of arange(n)."""
    i = asarray(_np.arange(n, dtype=_np.int32))
    return (i,) * ndim


def diag_indices_from(arr):
    """diag_indices of an array whose axes all have one length."""
    shape = tuple(arr.shape) if isinstance(arr, (Tracer, ArrayOps)) else _np.shape(arr)
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ShapeError(f"diag_indices_from needs an array of 2 or more dimensions of one "
                         f"length, got shape {shape}", source=user_source())
    return diag_indices(shape[0], len(shape))


__all__ += ["tril_indices", "triu_indices", "tril_indices_from", "triu_indices_from",
            "diag_indices", "diag_indices_from"]
