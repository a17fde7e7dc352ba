"""vnp.linalg (numpy.linalg's names): the factorizations and what is built on them, beside
norm and cholesky (vkgrad/numpy/linalg.py).

    LU with partial pivoting   solve, inv, det, slogdet (and vg.scipy.linalg's lu family)
    Householder QR             qr (and vg.scipy.linalg.qr, vg.random.orthogonal,
                               vg.nn.initializers.orthogonal)

Each factorization is a composition of vnp ops unrolled over the columns (n is static), so it
traces under jit with static shapes and reverse mode differentiates it as any composition.
The row swaps of partial pivoting are argmax and where: the pivot choice is piecewise constant
in a, so the composition's gradient is the analytic one (d det = det inv(a)^T; d inv =
-inv^T g inv^T); so are Householder's reflections (smooth but for the sign choice). Sized for small matrices (n up to a few dozen), not a fast n = 4096 kernel.
"""

from __future__ import annotations

import builtins
from collections import namedtuple

from numpy import inf

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.numpy.contractions import matmul
from vkgrad.numpy.creation import eye
from vkgrad.numpy.dtypes import as_float, astype, dtype_of, promoted_dtype
from vkgrad.numpy.linalg import _square, cholesky_lower, diagonal, solve_triangular
from vkgrad.numpy.reductions import argmax, max, min, prod, sum
from vkgrad.numpy.shapes import (broadcast_shapes, broadcast_to, expand_dims, reshape, squeeze,
                                 stack, swapaxes)
from vkgrad.numpy.ufuncs import (abs, divide, equal, log, logical_and, multiply, not_equal,
                                 power, sign, sqrt, subtract, where)
from vkgrad.numpy.util import is_int, normalize_axes, type_string
from vkgrad.tracer.core import user_source

__all__ = ["linalg"]

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])   # JAX's result types
QRResult = namedtuple("QRResult", ["Q", "R"])


# ------------------------------------------------------------------------------------------ LU

def lu_factor(a):
    """(lu, pivots, perm) of a (..., m, n): partial pivoting, column by column (LAPACK's getrf).
    lu holds L below the diagonal (unit diagonal, not stored) and U on and above it; pivots[j]
    is the row swapped with row j at step j (scipy's piv, int32); perm the rows of a in the
    order they end: a[perm] = L U. A zero pivot (a singular a) leaves its column's L zero, as
    LAPACK does, so U has a zero on its diagonal and det is 0."""
    a = as_float(a)
    if a.ndim < 2:
        raise ShapeError(f"lu takes matrices (..., m, n), got {type_string(a)}",
                         source=user_source())
    m, n = a.shape[-2:]
    rows, col_of = P.iota((m,), 0, "i32"), P.iota((1, n), 1, "i32")
    perm = broadcast_to(P.iota((m,), 0, "f32"), a.shape[:-2] + (m,))   # float: Vulkan sums floats
    pivots = []
    for j in range(builtins.min(m, n)):
        p = argmax(where(rows >= j, abs(a[..., :, j]), -1.0), -1)   # first largest |a_ij|, i >= j
        at_p, at_j = equal(rows, expand_dims(p, -1)), equal(rows, j)
        a = _swap(a, at_j, at_p, -2)
        perm = _swap(perm, at_j, at_p, -1)
        pivot = a[..., j, j]
        l = divide(a[..., :, j], expand_dims(where(equal(pivot, 0.0), 1.0, pivot), -1))
        l = where(rows > j, l, 0.0)                                    # (..., m)
        u = where(col_of[0] > j, a[..., j, :], 0.0)                    # (..., n)
        a = subtract(a, multiply(expand_dims(l, -1), expand_dims(u, -2)))
        a = where(logical_and(reshape(rows, (m, 1)) > j, equal(col_of, j)), expand_dims(l, -1), a)
        pivots.append(p)
    piv = stack(pivots, -1) if pivots else P.iota(a.shape[:-2] + (0,), a.ndim - 2, "i32")
    return a, piv, astype(perm, "i32")


def _swap(x, at_j, at_p, axis):
    """x with its entries (rows, for axis -2) j and p exchanged; at_j and at_p mark them
    (p is a traced index). Selects, not arithmetic, so the swap is exact."""
    if axis == -2:
        at_j, at_p = expand_dims(at_j, -1), expand_dims(at_p, -1)
    xj = expand_dims(sum(where(at_j, x, 0), axis), axis)
    xp = expand_dims(sum(where(at_p, x, 0), axis), axis)
    return where(at_j, xp, where(at_p, xj, x))


def permutation_from_pivots(piv, m):
    """perm (rows of a in their final order) from LAPACK's pivots: the swaps applied in turn."""
    rows = P.iota((m,), 0, "i32")
    perm = broadcast_to(P.iota((m,), 0, "f32"), piv.shape[:-1] + (m,))
    for j in range(piv.shape[-1]):
        perm = _swap(perm, equal(rows, j), equal(rows, expand_dims(piv[..., j], -1)), -1)
    return astype(perm, "i32")


def permutation_matrix(perm, dt):
    """P with P[i, k] = 1 where perm[i] == k: P @ a is a[perm] (one-hot rows, so exact)."""
    m = perm.shape[-1]
    return astype(equal(expand_dims(perm, -1), P.iota((1, m), 1, "i32")), dt)


def lu_solve_factored(lu, perm, b, trans=False):
    """x with a x = b (a^T x = b with trans) from a's lu and perm; b (..., n, k), its batch
    dims broadcast with lu's."""
    batch = broadcast_shapes(lu.shape[:-2], b.shape[:-2])
    lu = broadcast_to(lu, batch + lu.shape[-2:])
    b = broadcast_to(b, batch + b.shape[-2:])
    pm = permutation_matrix(perm, dtype_of(lu))
    if not trans:   # P a = L U
        y = solve_triangular(lu, matmul(pm, b), lower=True, unit_diagonal=True)
        return solve_triangular(lu, y, lower=False)
    lu_t = swapaxes(lu, -1, -2)   # a^T = U^T L^T P
    y = solve_triangular(lu_t, b, lower=True)
    return matmul(swapaxes(pm, -1, -2), solve_triangular(lu_t, y, lower=False,
                                                         unit_diagonal=True))


def _parity(piv):
    """+1 or -1: the sign of the permutation the pivots' swaps make."""
    return prod(where(not_equal(piv, P.iota(piv.shape, piv.ndim - 1, "i32")), -1.0, 1.0), -1)


def solve(a, b):
    """numpy's (2.x) and JAX's solve: x with a x = b. b is a vector (n,) when 1-D, else a stack
    of matrices (..., n, k) whose batch dims broadcast with a's (..., n, n)."""
    a, b = _square(a, "solve"), as_float(b)
    dt = promoted_dtype(a, b)
    a, b = astype(a, dt), astype(b, dt)
    n = a.shape[-1]
    vec = b.ndim == 1
    if b.ndim > 1 and a.ndim == b.ndim + 1 and b.shape[-1] == n and b.shape[-2] != n:
        raise ShapeError(f"solve: b {type_string(b)} for a {type_string(a)}: a b with one "
                         "dimension less than a is a stack of matrices (numpy 2, JAX), not of "
                         "vectors; use solve(a, b[..., None])[..., 0]", source=user_source())
    bm = expand_dims(b, -1) if vec else b
    if bm.shape[-2] != n:
        raise ShapeError(f"solve: b {type_string(b)} has {bm.shape[-2]} rows for a {n}x{n} "
                         "matrix (b is (n,) or (..., n, k))", source=user_source())
    lu, _, perm = lu_factor(a)
    x = lu_solve_factored(lu, perm, bm)
    return x[..., 0] if vec else x


def inv(a):
    """The inverse of a (..., n, n): solve(a, I)."""
    a = _square(a, "inv")
    return solve(a, broadcast_to(eye(a.shape[-1], dtype=dtype_of(a)), a.shape))


def det(a):
    """The determinant of a (..., n, n): the product of U's diagonal times the pivots' sign
    (0 for a singular a)."""
    lu, piv, _ = lu_factor(_square(a, "det"))
    return multiply(astype(_parity(piv), dtype_of(lu)), prod(diagonal(lu, 0, -2, -1), -1))


def slogdet(a):
    """(sign, logabsdet) of a (..., n, n): det = sign * exp(logabsdet); a singular a gives
    (0, -inf), as JAX's."""
    lu, piv, _ = lu_factor(_square(a, "slogdet"))
    d = diagonal(lu, 0, -2, -1)
    s = multiply(astype(_parity(piv), dtype_of(lu)), prod(sign(d), -1))
    return SlogdetResult(s, sum(log(abs(d)), -1))


# ------------------------------------------------------------------------------------------ QR

def householder_qr(a, complete=False):
    """(Q, R) of a (..., m, n) by k = min(m, n) Householder reflections (LAPACK's geqrf signs:
    R[j, j] = -sign(a_jj) |x| for the column x below; a column already zero below the diagonal
    is not reflected). Q is (..., m, k), R (..., k, n); complete: (..., m, m) and (..., m, n)."""
    a = as_float(a)
    m, n = a.shape[-2:]
    k = builtins.min(m, n)
    rows = P.iota((m,), 0, "i32")
    r = a
    q = broadcast_to(eye(m, dtype=dtype_of(a)), a.shape[:-2] + (m, m))
    for j in range(k):
        x = where(rows >= j, r[..., :, j], 0.0)                              # (..., m)
        below = sum(multiply(x, x), -1) - multiply(x[..., j], x[..., j])     # |x[j+1:]|^2
        norm_x = sqrt(sum(multiply(x, x), -1))
        alpha = multiply(where(x[..., j] < 0, 1.0, -1.0), norm_x)           # the new R[j, j]
        v = subtract(x, where(equal(rows, j), expand_dims(alpha, -1), 0.0))
        norm_v = sqrt(sum(multiply(v, v), -1))
        v = where(expand_dims(below > 0, -1),
                  divide(v, expand_dims(where(norm_v > 0, norm_v, 1.0), -1)), 0.0)
        # H = I - 2 v v^T: R <- H R, Q <- Q H
        r = subtract(r, multiply(2.0, multiply(expand_dims(v, -1),
                                               expand_dims(sum(multiply(expand_dims(v, -1), r),
                                                               -2), -2))))
        q = subtract(q, multiply(2.0, multiply(expand_dims(sum(multiply(q, expand_dims(v, -2)),
                                                               -1), -1), expand_dims(v, -2))))
    upper = P.iota((m, n), 0, "i32") <= P.iota((m, n), 1, "i32")
    r = where(upper, r, 0.0)                                               # exact zeros below
    return (q, r) if complete else (q[..., :, :k], r[..., :k, :])


def qr(a, mode="reduced"):
    """numpy's and JAX's qr: QRResult(Q, R) with a = Q R (mode 'reduced': Q (..., m, k), R
    (..., k, n), k = min(m, n); 'complete': (..., m, m) and (..., m, n)); mode 'r': R only."""
    if mode not in ("reduced", "complete", "r"):
        raise ArgumentError(f"qr: mode is 'reduced', 'complete' or 'r', not {mode!r} ('raw', "
                            "LAPACK's Householder vectors, is not supported)", source=user_source())
    a = as_float(a)
    if a.ndim < 2:
        raise ShapeError(f"qr takes matrices (..., m, n), got {type_string(a)}",
                         source=user_source())
    q, r = householder_qr(a, complete=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


# ----------------------------------------------------------------------------- the namespace

class _Linalg:
    """vnp.linalg: norm, cholesky, solve, inv, det, slogdet, qr (the module docstring says how
    each is computed; docs/numpy.md what is not supported)."""

    qr = staticmethod(qr)
    solve = staticmethod(solve)
    inv = staticmethod(inv)
    det = staticmethod(det)
    slogdet = staticmethod(slogdet)

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
