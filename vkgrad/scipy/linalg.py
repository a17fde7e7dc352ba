"""vg.scipy.linalg: jax.scipy.linalg's Cholesky family (cholesky, cho_factor, cho_solve,
solve_triangular: vkgrad/numpy/linalg.py computes them), LU family (lu_factor, lu_solve, lu,
det, inv, solve: vkgrad/numpy/decompositions.py), qr, eigh and svd; the others (sqrtm, expm,
schur, ...) are not supported: docs/numpy.md."""

from __future__ import annotations

import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.numpy import decompositions as D
from vkgrad.numpy.linalg import cholesky_lower, solve_triangular as _solve
from vkgrad.numpy.util import type_string
from vkgrad.tracer.core import user_source

__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "eigh", "inv", "lu", "lu_factor",
           "lu_solve", "qr", "solve", "solve_triangular", "svd"]


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy's cholesky: the upper-triangular U with U^T U = a (lower=True: L with L L^T = a)."""
    c = cholesky_lower(a)
    return c if lower else vnp.swapaxes(c, -1, -2)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower): cholesky(a, lower) and which triangle it is, for cho_solve."""
    return cholesky(a, lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a x = b, from a's cho_factor: two triangular solves."""
    c, lower = c_and_lower
    lo = c if lower else vnp.swapaxes(c, -1, -2)      # L with L L^T = a
    return _solve(vnp.swapaxes(lo, -1, -2), _solve(lo, b, lower=True), lower=False)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """scipy's solve_triangular: x with a x = b (trans 0 or 'N'), a^T x = b (1, 'T' or 'C'),
    reading only a's lower (lower=True) or upper triangle."""
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise ArgumentError(f"solve_triangular: trans is 0, 1, 2, 'N', 'T' or 'C', not {trans!r}",
                            source=user_source())
    if trans not in (0, "N"):
        a, lower = vnp.swapaxes(vnp.asarray(a), -1, -2), not lower
    return _solve(a, b, lower=lower, unit_diagonal=unit_diagonal)


def lu_factor(a, overwrite_a=False, check_finite=True):
    """(lu, piv): L (unit diagonal, below) and U (on and above the diagonal) in one matrix, and
    LAPACK's pivots (row j was swapped with row piv[j], int32), for lu_solve."""
    lu, piv, _ = D.lu_factor(a)
    return lu, piv


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """x with a x = b (trans 0) or a^T x = b (1 or 2), from a's lu_factor. b is (..., n) when
    it has one dimension less than lu, else (..., n, k) (JAX's rule)."""
    lu, piv = lu_and_piv
    lu = vnp.asarray(lu)
    if trans not in (0, 1, 2):
        raise ArgumentError(f"lu_solve: trans is 0, 1 or 2, not {trans!r}", source=user_source())
    b = vnp.asarray(b)
    vec = b.ndim == lu.ndim - 1
    bm = vnp.expand_dims(b, -1) if vec else b
    n = lu.shape[-1]
    if bm.ndim < 2 or bm.shape[-2] != n:
        raise ShapeError(f"lu_solve: b {type_string(b)} does not have {n} rows for the {n}x{n} "
                         "factorization", source=user_source())
    x = D.lu_solve_factored(lu, D.permutation_from_pivots(vnp.asarray(piv), n),
                            vnp.astype(bm, lu.dtype), trans=trans != 0)
    return x[..., 0] if vec else x


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """(p, l, u) with a = p @ l @ u for a (..., m, n): p a permutation matrix, l (m, k) unit
    lower triangular, u (k, n) upper, k = min(m, n); permute_l=True: (p @ l, u)."""
    f, _, perm = D.lu_factor(a)
    m, n = f.shape[-2:]
    k = min(m, n)
    low = vnp.tril(f[..., :, :k], -1) + vnp.eye(m, k, dtype=f.dtype)
    up = vnp.triu(f[..., :k, :])
    p = vnp.swapaxes(D.permutation_matrix(perm, f.dtype), -1, -2)   # a = P^T L U
    return (vnp.matmul(p, low), up) if permute_l else (p, low, up)


def det(a, overwrite_a=False, check_finite=True):
    """The determinant of a (..., n, n) (vnp.linalg.det)."""
    return D.det(a)


def inv(a, overwrite_a=False, check_finite=True):
    """The inverse of a (..., n, n) (vnp.linalg.inv)."""
    return D.inv(a)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    """x with a x = b: by LU (assume_a 'gen', 'sym', 'her'; vnp.linalg.solve's shapes) or, for
    assume_a='pos', by the Cholesky factorization of a's lower (lower=True) or upper triangle."""
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ArgumentError(f"solve: assume_a is 'gen', 'sym', 'her' or 'pos', not {assume_a!r}",
                            source=user_source())
    if assume_a != "pos":
        return D.solve(a, b)
    a = vnp.asarray(a)
    c = cholesky(a if lower else vnp.swapaxes(a, -1, -2), lower=True)   # reads one triangle
    return cho_solve((c, True), b)


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """scipy's qr: (Q, R) with a = Q R; mode 'full' (Q (..., m, m)), 'economic' (Q (..., m, k),
    k = min(m, n)) or 'r' (the tuple (R,), as scipy's)."""
    if pivoting:
        raise ArgumentError("qr: pivoting=True (QR with column pivoting) is not supported",
                            source=user_source())
    if mode not in ("full", "economic", "r"):
        raise ArgumentError(f"qr: mode is 'full', 'economic' or 'r', not {mode!r} ('raw' is not "
                            "supported)", source=user_source())
    q, r = D.qr(a, "reduced" if mode == "economic" else "complete")
    return (r,) if mode == "r" else (q, r)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True, subset_by_index=None):
    """scipy's eigh of a symmetric a: (w ascending, v), reading a's lower (lower=True) or upper
    triangle; eigvals_only: w. The generalized problem (b) is not supported."""
    if b is not None or eigvals is not None or subset_by_index is not None:
        raise ArgumentError("eigh: b (the generalized problem), eigvals and subset_by_index "
                            "are not supported", source=user_source())
    w, v = D.eigh(a, "L" if lower else "U", symmetrize_input=False)
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """scipy's svd: (U, s, Vh) with a = U diag(s) Vh, s descending (compute_uv=False: s)."""
    r = D.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(r) if compute_uv else r
