"""vg.scipy.linalg: jax.scipy.linalg's Cholesky family (cholesky, cho_factor, cho_solve,
solve_triangular: vkgrad/numpy/linalg.py computes them), LU family (lu_factor, lu_solve, lu,
det, inv, solve: vkgrad/numpy/decompositions.py), qr, eigh, svd, and from them polar and
expm (JAX's scaling and squaring with Pade approximants); the others (sqrtm, schur, ...) are
not supported: docs/numpy.md."""

from __future__ import annotations

import numpy as np

import vkgrad.numpy as vnp
from vkgrad.control_flow import scan
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.numpy import decompositions as D
from vkgrad.numpy.linalg import cholesky_lower, solve_triangular as _solve
from vkgrad.numpy.util import type_string
from vkgrad.tracer.core import user_source

__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "eigh", "inv", "lu", "lu_factor",
           "lu_solve", "qr", "solve", "solve_triangular", "svd", "polar", "expm"]


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


def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None):
    """(u, p): a = u p (side 'right') or p u ('left'), u with orthonormal columns, p symmetric
    positive semi-definite, from a's SVD (for either method: JAX's 'qdwh' iteration and its
    'svd' give the same factors)."""
    if side not in ("right", "left"):
        raise ArgumentError(f"polar: side is 'right' or 'left', not {side!r}", source=user_source())
    if method not in ("qdwh", "svd"):
        raise ArgumentError(f"polar: method is 'qdwh' or 'svd', not {method!r}",
                            source=user_source())
    u, s, vh = D.svd(a, full_matrices=False)
    if side == "right":
        return u @ vh, (vnp.swapaxes(vh, -1, -2) * s[..., None, :]) @ vh
    return u @ vh, (u * s[..., None, :]) @ vnp.swapaxes(u, -1, -2)


# Pade approximants of exp (Higham 2005): (numerator, denominator) = (U + V, V - U) with U the
# odd and V the even part; b the coefficients; float32 uses degrees 3, 5, 7, float64 up to 13
_PADE = {
    3: (120.0, 60.0, 12.0, 1.0),
    5: (30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0),
    7: (17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0),
    9: (17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0,
        110880.0, 3960.0, 90.0, 1.0),
    13: (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
         129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
         40840800.0, 960960.0, 16380.0, 182.0, 1.0),
}
# JAX's choice by |A|_1: the degrees and the norms below which each is used; the largest
# degree's bound, maxnorm, sets the squarings: |A / 2^s|_1 <= maxnorm
_EXPM_DEGREES = {"f32": ((3, 5, 7), (4.258730016922831e-01, 1.880152677804762e+00),
                         3.925724783138660),
                 "f64": ((3, 5, 7, 9, 13), (1.495585217958292e-02, 2.539398330063230e-01,
                                            9.504178996162932e-01, 2.097847961257068e+00),
                         5.371920351148152)}


def _pade(a, m):
    """(U, V) of the degree-m Pade approximant at a: U = a sum_odd b_k a^(k-1), V = sum_even."""
    b = _PADE[m]
    eye = vnp.broadcast_to(vnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    powers = {0: eye, 2: a @ a}
    for k in range(4, min(m, 6) + 1, 2):
        powers[k] = powers[k - 2] @ powers[2]
    if m == 9:
        powers[8] = powers[6] @ powers[2]
    if m == 13:   # b_13 A^12 + ... as A^6 (b_13 A^6 + b_11 A^4 + b_9 A^2) + the terms to A^6
        u = powers[6] @ sum(b[k] * powers[k - 7] for k in (13, 11, 9))
        v = powers[6] @ sum(b[k] * powers[k - 6] for k in (12, 10, 8))
        u = a @ (u + sum(b[k] * powers[k - 1] for k in (7, 5, 3, 1)))
        return u, v + sum(b[k] * powers[k] for k in (6, 4, 2, 0))
    return (a @ sum(b[k] * powers[k - 1] for k in range(1, m + 1, 2)),
            sum(b[k] * powers[k] for k in range(0, m, 2)))


def expm(A, *, upper_triangular=False, max_squarings=16):
    """The matrix exponential of A (..., n, n), as JAX's: A scaled by 2^-s so its 1-norm is
    at most maxnorm, the Pade approximant JAX picks by the 1-norm (degree 3, 5 or 7 in float32;
    up to 13 in float64), then squared s times (nan where s would exceed max_squarings).
    upper_triangular: the Pade quotient by a triangular solve."""
    a = vnp.asarray(A)
    a = a if a.dtype.kind == "f" else vnp.astype(a, vnp.float32)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"expm takes square matrices (..., n, n), got {type_string(a)}",
                         source=user_source())
    degrees, bounds, maxnorm = _EXPM_DEGREES["f64" if a.dtype == vnp.float64 else "f32"]
    norm = vnp.linalg.norm(a, 1, axis=(-2, -1))
    squarings = vnp.maximum(0.0, vnp.floor(vnp.log2(norm / maxnorm)))
    scaled = a / vnp.expand_dims(2.0 ** squarings, (-2, -1))
    which = vnp.expand_dims(vnp.digitize(norm, vnp.asarray(bounds, norm.dtype)), (-2, -1))
    u, v = _pade(scaled, degrees[-1])
    for k in range(len(degrees) - 2, -1, -1):   # JAX's lax.switch as selects
        uk, vk = _pade(scaled, degrees[k])
        u, v = vnp.where(which == k, uk, u), vnp.where(which == k, vk, v)
    if upper_triangular:
        r = _solve(v - u, u + v, lower=False)
    else:
        r = D.solve(v - u, u + v)

    def square(r, i):
        return vnp.where(vnp.expand_dims(i < squarings, (-2, -1)), r @ r, r), None

    r, _ = scan(square, r, np.arange(max_squarings, dtype=np.float32))
    return vnp.where(vnp.expand_dims(squarings > max_squarings, (-2, -1)), np.nan, r)
