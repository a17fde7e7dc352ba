"""Diagonals, trace, and vnp.linalg: norm, and the Cholesky factorization with triangular solves
(what vkgrad has of numpy.linalg; the other decompositions are not supported). The
factorization and the solves are unrolled compositions, one column or row per step (n steps of
elementwise products and sums, differentiable as any composition): sized for small matrices
(covariances, the n of a Gaussian), not for a fast n = 4096 kernel."""

from __future__ import annotations

import builtins

from numpy import inf

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.numpy.creation import zeros
from vkgrad.numpy.dtypes import as_float, asarray, astype, dtype_of, no_out
from vkgrad.numpy.reductions import max, min, sum
from vkgrad.numpy.shapes import expand_dims, reshape, squeeze, stack, swapaxes, transpose
from vkgrad.numpy.ufuncs import (abs, divide, greater_equal, multiply, not_equal, power, sqrt,
                                 subtract, where)
from vkgrad.numpy.util import is_int, normalize_axes, type_string
from vkgrad.tracer.core import user_source

__all__ = ["diagonal", "trace", "diag", "linalg"]


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


class _Linalg:
    """vnp.linalg: norm and cholesky (what vkgrad has of numpy.linalg; the other
    decompositions are not supported)."""

    @staticmethod
    def cholesky(a):
        """numpy's cholesky: the lower-triangular L with L @ L^T = a, for a (..., n, n)
        symmetric positive definite (nan where a is not, as JAX's; numpy raises)."""
        return cholesky_lower(a)

    @staticmethod
    def norm(x, ord=None, axis=None, keepdims=False):
        """Vector norms (ord None/2, 1, inf, -inf, 0, any p) over one axis; matrix norms
        (None/'fro', 1, -1, inf, -inf) over two; axis=None with ord=None: the 2-norm of the
        flattened array. ord=2 and 'nuc' on matrices need singular values: not supported."""
        x = as_float(x)
        if axis is None:
            if ord is None:
                r = sqrt(sum(multiply(x, x)))
                return reshape(r, (1,) * x.ndim) if keepdims else r
            if x.ndim not in (1, 2):
                raise ShapeError(f"norm(ord={ord!r}) of {type_string(x)}: give axis (numpy takes "
                                 "1-D or 2-D arrays here)", source=user_source())
            axis = tuple(range(x.ndim))
        ax = [normalize_axes(a, x.ndim)[0] for a in ((axis,) if is_int(axis) else tuple(axis))]
        if len(ax) == 1:
            return _vector_norm(x, ord, ax, keepdims)
        if len(ax) != 2 or ax[0] == ax[1]:
            raise ArgumentError(f"norm: axis={axis!r} must name one axis (a vector norm) or two "
                                "(a matrix norm)", source=user_source())
        return _matrix_norm(x, ord, ax, keepdims)


def _vector_norm(x, ord, ax, keepdims):
    a = abs(x)
    if ord is None or ord == 2:
        return sqrt(sum(multiply(x, x), ax, keepdims=keepdims))
    if isinstance(ord, str):
        raise ArgumentError(f"norm: ord={ord!r} is a matrix norm; give two axes",
                            source=user_source())
    if ord == inf:
        return max(a, ax, keepdims=keepdims)
    if ord == -inf:
        return min(a, ax, keepdims=keepdims)
    if ord == 0:
        return sum(astype(not_equal(x, 0), dtype_of(x)), ax, keepdims=keepdims)
    if ord == 1:
        return sum(a, ax, keepdims=keepdims)
    return power(sum(power(a, float(ord)), ax, keepdims=keepdims), 1.0 / ord)


def _matrix_norm(x, ord, ax, keepdims):
    row, col = ax
    if ord in (None, "fro"):
        return sqrt(sum(multiply(x, x), ax, keepdims=keepdims))
    if ord not in (1, -1, inf, -inf):
        raise ArgumentError(f"norm(ord={ord!r}) of a matrix needs its singular values (an "
                            "SVD), which vkgrad does not have; ord 'fro', 1, -1, inf and "
                            "-inf are supported", source=user_source())
    summed, chosen = (row, col) if ord in (1, -1) else (col, row)  # 1: largest column sum
    s = sum(abs(x), summed, keepdims=True)
    r = (max if ord > 0 else min)(s, chosen, keepdims=True)
    return r if keepdims else squeeze(r, (row, col))


linalg = _Linalg()


def _square(a, name):
    a = as_float(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{name} takes square matrices (..., n, n), got {type_string(a)}",
                         source=user_source())
    return a


def cholesky_lower(a):
    """L, lower triangular, with L L^T = a: column j is (a[:, j] - L[:, :j] L[j, :j]) / L[j, j]
    below the diagonal, L[j, j] = sqrt(a[j, j] - |L[j, :j]|^2)."""
    a = _square(a, "cholesky")
    n = a.shape[-1]
    below = [greater_equal(P.iota((n,), 0, "i32"), j) for j in range(n)]
    cols = []
    for j in range(n):
        col = a[..., :, j]
        if cols:
            prev = stack(cols, -1)                               # (..., n, j)
            col = subtract(col, sum(multiply(prev, expand_dims(prev[..., j, :], -2)), -1))
        d = sqrt(col[..., j])
        cols.append(where(below[j], divide(col, expand_dims(d, -1)), 0.0))
    return stack(cols, -1)


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
    rows: dict = {}
    for i in (range(n) if lower else range(n - 1, -1, -1)):
        r = b[..., i, :]
        done = sorted(rows)
        if done:   # minus the row of a times the rows of x found so far
            xs = stack([rows[k] for k in done], -2)               # (..., m, k)
            coef = a[..., i, done[0]:done[-1] + 1]                 # (..., m)
            r = subtract(r, sum(multiply(expand_dims(coef, -1), xs), -2))
        rows[i] = r if unit_diagonal else divide(r, expand_dims(a[..., i, i], -1))
    x = stack([rows[i] for i in range(n)], -2)
    return x[..., 0] if vec else x
