"""Diagonals, trace, and the Cholesky factorization with triangular solves (vnp.linalg's
namespace, with LU, QR, eigh and SVD, is vkgrad/numpy/decompositions.py). The factorization and
the solves are unrolled compositions, one column or row per step (n steps of elementwise
products and sums, differentiable as any composition): sized for small matrices (covariances,
the n of a Gaussian), not for a fast n = 4096 kernel."""

from __future__ import annotations

import builtins

from vkgrad import primitives as P
from vkgrad.errors import ShapeError
from vkgrad.numpy.creation import zeros
from vkgrad.numpy.dtypes import as_float, asarray, dtype_of, no_out
from vkgrad.numpy.reductions import sum
from vkgrad.numpy.shapes import broadcast_shapes, expand_dims, reshape, transpose
from vkgrad.numpy.ufuncs import divide, equal, greater_equal, multiply, sqrt, subtract, where
from vkgrad.numpy.util import normalize_axes, type_string
from vkgrad.tracer.core import user_source

__all__ = ["diagonal", "trace", "diag"]


def diagonal(a, offset=0, axis1=0, axis2=1):
    """numpy's diagonal: the diagonal of axes (axis1, axis2), as a new LAST axis. A strided
    slice of the two axes flattened together (a layout op: no gather)."""
    a = asarray(a)
    i, j = normalize_axes(axis1, a.ndim)[0], normalize_axes(axis2, a.ndim)[0]
    if i == j:
        raise ShapeError("diagonal: axis1 and axis2 cannot be the same", source=user_source())
    rest = [d for d in range(a.ndim) if d not in (i, j)]
    x = transpose(a, rest + [i, j])
    n, m = x.shape[-2], x.shape[-1]
    if offset >= 0:
        x = x[..., :, builtins.min(offset, m):]
    else:
        x = x[..., builtins.min(-offset, n):, :]
    n, m = x.shape[-2], x.shape[-1]
    k = builtins.min(n, m)
    flat = reshape(x, x.shape[:-2] + (n * m,))
    if k == 0:
        return flat[..., :0]
    return flat[..., : (k - 1) * (m + 1) + 1: m + 1]


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    no_out(out)
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v, k=0):
    """1-D v: the square matrix with v on diagonal k; 2-D: its diagonal k."""
    v = asarray(v)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ShapeError(f"diag takes a 1-D or 2-D array, got {type_string(v)}",
                         source=user_source())
    n = v.shape[0] + builtins.abs(k)
    col = P.pad(v, (builtins.max(-k, 0),), (builtins.max(k, 0),)) if k else v
    return where(P.eq(P.iota((n, n), 1, "i32"), P.add(P.iota((n, n), 0, "i32"), int(k))),
                 reshape(col, (n, 1)), zeros((), dtype_of(v)))


def _square(a, name):
    a = as_float(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{name} takes square matrices (..., n, n), got {type_string(a)}",
                         source=user_source())
    return a


def cholesky_lower(a):
    """L, lower triangular, with L L^T = a: column j is (a[:, j] - L[:, :j] L[j, :j]) / L[j, j]
    below the diagonal, L[j, j] = sqrt(a[j, j] - |L[j, :j]|^2). L is kept in full, its columns
    filled in turn and kept in memory (P.save; in the backward their cotangents too), so each step's kernels bind a few buffers
    whatever n is (a stack of the columns found so far binds one each: past lavapipe's 32
    from n = 32; at n = 16 a cho_solve of stacks compiles in 17 s on lavapipe, this in 6 s)."""
    a = _square(a, "cholesky")
    n = a.shape[-1]
    idx = P.iota((n,), 0, "i32")                   # a row index, or (broadcast) a column's
    low = zeros(a.shape, dtype_of(a))
    for j in range(n):   # the columns of L past j are still 0: L L[j]^T sums over k < j
        col = subtract(a[..., :, j], sum(multiply(low, expand_dims(low[..., j, :], -2)), -1))
        col = where(greater_equal(idx, j), divide(col, expand_dims(sqrt(col[..., j]), -1)), 0.0)
        low = P.save(where(equal(idx, j), expand_dims(col, -1), low), True)
    return low


def solve_triangular(a, b, lower, unit_diagonal=False):
    """x with a x = b, a (..., n, n) triangular (its other half is not read), b (..., n) or
    (..., n, k): substitution row by row, from the top (lower) or the bottom."""
    a = _square(a, "solve_triangular")
    b = as_float(b)
    vec = b.ndim == a.ndim - 1
    b = expand_dims(b, -1) if vec else b
    n = a.shape[-1]
    if b.shape[-2] != n:
        raise ShapeError(f"solve_triangular: b {type_string(b)} has {b.shape[-2]} rows for a "
                         f"{n}x{n} matrix", source=user_source())
    # x in full, its rows filled in turn and kept in memory (P.save, with their cotangents): each step's sum reads
    # a's row, b's and x, so its kernel binds a few buffers whatever n is (a stack of the rows
    # found so far binds one each: past lavapipe's 32 at n = 16)
    rows = P.iota((n, 1), 0, "i32")
    x = zeros(broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], dtype_of(b))
    for i in (range(n) if lower else range(n - 1, -1, -1)):
        done = rows[:, 0] < i if lower else rows[:, 0] > i       # the rows of x found so far
        coef = where(done, a[..., i, :], 0.0)                    # a's other half is not read
        r = subtract(b[..., i, :], sum(multiply(expand_dims(coef, -1), x), -2))
        r = r if unit_diagonal else divide(r, expand_dims(a[..., i, i], -1))
        x = P.save(where(equal(rows, i), expand_dims(r, -2), x), True)
    return x[..., 0] if vec else x


def diagflat(v, k=0):
    """The square matrix with the flattened v on diagonal k."""
    return diag(reshape(asarray(v), (-1,)), k)


__all__ += ["diagflat"]
