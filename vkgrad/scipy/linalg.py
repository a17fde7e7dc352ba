"""vg.scipy.linalg: jax.scipy.linalg's Cholesky family (cholesky, cho_factor, cho_solve,
solve_triangular: vkgrad/numpy/linalg.py computes them), LU family (lu_factor, lu_solve, lu,
det, inv, solve: vkgrad/numpy/decompositions.py), qr and qr_multiply, eigh and
eigh_tridiagonal, svd, hessenberg and the real Schur form (decompositions.py's), and from them
polar, expm (JAX's scaling and squaring with Pade approximants), expm_frechet, sqrtm (real:
Denman-Beavers), funm (real eigenvalues), solve_sylvester (a Kronecker solve); the special
matrices (toeplitz, hankel, circulant, block_diag, pascal, ...). dft and rsf2csf are refused
(complex): docs/numpy.md."""

from __future__ import annotations

import math

import numpy as np

import vkgrad.numpy as vnp
from vkgrad.control_flow import scan
from vkgrad.errors import ArgumentError, DTypeError, ShapeError
from vkgrad.numpy import decompositions as D
from vkgrad.numpy.linalg import cholesky_lower, solve_triangular as _solve
from vkgrad.numpy.util import type_string
from vkgrad.tracer.core import user_source

__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "eigh", "inv", "lu", "lu_factor",
           "lu_solve", "qr", "solve", "solve_triangular", "svd", "polar", "expm",
           "expm_frechet", "qr_multiply", "hessenberg", "schur", "sqrtm", "solve_sylvester",
           "eigh_tridiagonal", "funm", "block_diag", "circulant", "companion",
           "convolution_matrix", "fiedler", "fiedler_companion", "hadamard", "hankel", "helmert",
           "hilbert", "invhilbert", "invpascal", "leslie", "pascal", "toeplitz", "dft", "rsf2csf"]


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


def expm_frechet(A, E, *, method=None, compute_expm=True):
    """(expm(A), L(A, E)): the Frechet derivative of expm at A in the direction E, from the
    expm of the block matrix [[A, E], [0, A]] (its upper right block is L(A, E); JAX takes
    expm's jvp: the same values to rounding). compute_expm=False: L(A, E) alone."""
    a, e = vnp.asarray(A), vnp.asarray(E)
    for name, x in (("A", a), ("E", e)):
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise ShapeError(f"expm_frechet: {name} must be a (batched) square matrix, got "
                             f"{type_string(x)}", source=user_source())
    if a.shape != e.shape:
        raise ShapeError(f"expm_frechet: A {type_string(a)} and E {type_string(e)} must have "
                         "the same shape", source=user_source())
    n = a.shape[-1]
    top = vnp.concatenate([a, e], -1)
    big = expm(vnp.concatenate([top, vnp.concatenate([vnp.zeros_like(a), a], -1)], -2))
    frechet = big[..., :n, n:]
    return (big[..., :n, :n], frechet) if compute_expm else frechet


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False):
    """(Q c, R) (mode 'left') or (c Q, R) ('right') with Q, R a's reduced QR (Q (..., m, k),
    R (..., k, n), k = min(m, n)); a 1-D c is a column ('left') or a row ('right') and the
    product is 1-D. conjugate: no effect (real arrays); pivoting is not supported."""
    if pivoting:
        raise ArgumentError("qr_multiply: pivoting=True (QR with column pivoting) is not "
                            "supported", source=user_source())
    if mode not in ("right", "left"):
        raise ArgumentError(f"qr_multiply: mode is 'right' or 'left', not {mode!r}",
                            source=user_source())
    a, c = vnp.asarray(a), vnp.asarray(c)
    dt = vnp.result_type(a, c, vnp.float32)
    a, c = a.astype(dt), c.astype(dt)
    if a.ndim < 2:
        raise ShapeError(f"qr_multiply takes a matrix a (..., m, n), got {type_string(a)}",
                         source=user_source())
    onedim = c.ndim == 1
    if onedim:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = a.shape[-2:]
    k = min(m, n)
    if (c.shape[-2] if mode == "left" else c.shape[-1]) != (k if mode == "left" else m):
        side = f"c's rows for Q @ c ({k})" if mode == "left" else f"c's columns for c @ Q ({m})"
        raise ShapeError(f"qr_multiply: a {type_string(a)} and c {type_string(c)} do not fit: "
                         f"{side}", source=user_source())
    q, r = D.qr(a, "reduced")
    out = vnp.matmul(q, c) if mode == "left" else vnp.matmul(c, q)
    return (vnp.ravel(out) if onedim else out), r


def hessenberg(a, *, calc_q=False, overwrite_a=False, check_finite=True):
    """H (calc_q: (H, Q)) with a = Q H Q^T, H zero below its first subdiagonal: Householder
    reflections with LAPACK's signs (scipy's H and Q)."""
    h, q = D.hessenberg(a)
    return (h, q) if calc_q else h


def schur(a, output="real"):
    """(T, Z) with a = Z T Z^T for a real square a (..., n, n): T quasi upper triangular (the
    real Schur form, 2x2 blocks for complex eigenvalue pairs), Z orthogonal; a fixed count of
    shifted QR steps on the Hessenberg form (decompositions.real_schur says which; its 2x2
    blocks are not LAPACK's standardized ones, nor its eigenvalue order along the diagonal
    LAPACK's). output='complex' is refused: vkgrad has no complex dtype."""
    if output == "complex":
        raise DTypeError("schur(output='complex'): the complex Schur form is complex and vkgrad "
                         "has no complex dtype (docs/numpy.md, 'What it refuses'); "
                         "output='real' gives the real Schur form", source=user_source())
    if output != "real":
        raise ArgumentError(f"schur: output is 'real' or 'complex', not {output!r}",
                            source=user_source())
    return D.real_schur(_square_float(a, "schur"))


def _square_float(a, name):
    a = vnp.asarray(a)
    a = a if a.dtype.kind == "f" else vnp.astype(a, vnp.float32)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{name} takes square matrices (..., n, n), got {type_string(a)}",
                         source=user_source())
    return a


def sqrtm(A, blocksize=1):
    """The principal square root X (X @ X = A, its eigenvalues in the right half plane) of a
    square A (..., n, n), REAL: the scaled Denman-Beavers iteration (Y <- (g Y + (g Z)^-1) / 2,
    Z <- (g Z + (g Y)^-1) / 2, g = |det Y det Z|^(-1/2n)), 16 steps in a lax.scan. JAX's
    returns a complex array, the complex Schur method's; here the real principal root, which
    exists where A has no eigenvalue on the closed negative real axis: where it does not (a
    negative real eigenvalue) or A is singular, the iteration does not converge and the
    result is nan (|X X - A| above sqrt(eps) |X|^2)."""
    if blocksize != 1:
        raise ArgumentError("sqrtm: blocksize > 1 (the blocked method) is not supported",
                            source=user_source())
    a = _square_float(A, "sqrtm")
    n = a.shape[-1]
    eye = vnp.broadcast_to(vnp.eye(n, dtype=a.dtype), a.shape)

    def step(carry, _):
        y, z = carry
        g = vnp.abs(D.det(y) * D.det(z)) ** (-0.5 / n)
        g = vnp.expand_dims(g, (-2, -1))
        return (0.5 * (g * y + D.inv(g * z)), 0.5 * (g * z + D.inv(g * y))), None

    (x, _), _ = scan(step, (a, eye), np.arange(16, dtype=np.float32))
    res = vnp.linalg.norm(x @ x - a, axis=(-2, -1))
    tol = float(np.sqrt(np.finfo(np.dtype(str(a.dtype))).eps))
    ok = res <= tol * vnp.sum(x * x, (-2, -1))
    return vnp.where(vnp.expand_dims(ok, (-2, -1)), x, np.nan)


def solve_sylvester(A, B, C, *, method="schur", tol=1e-8):
    """X with A X + X B = C for A (..., m, m), B (..., n, n), C (..., m, n) (batch dims
    broadcast): the Kronecker system (I_n (x) A + B^T (x) I_m) vec(X) = vec(C), one LU solve of
    size m n (either method: JAX's 'schur' and 'eigen' give the same X); sized for small
    matrices, m n up to a few dozen (the LU is unrolled over m n columns). nan where the
    system is singular to tol (some pivot of its LU below tol in magnitude: A and -B share an
    eigenvalue, JAX's condition)."""
    if method not in ("schur", "eigen"):
        raise ArgumentError(f"solve_sylvester: method is 'schur' or 'eigen', not {method!r}",
                            source=user_source())
    a, b, c = (vnp.asarray(x) for x in (A, B, C))
    dt = vnp.result_type(a, b, c, vnp.float32)
    a, b, c = a.astype(dt), b.astype(dt), c.astype(dt)
    if c.ndim < 2 or a.ndim < 2 or b.ndim < 2:
        raise ShapeError("solve_sylvester takes matrices A (..., m, m), B (..., n, n), C "
                         f"(..., m, n), got {type_string(a)}, {type_string(b)}, "
                         f"{type_string(c)}", source=user_source())
    m, n = c.shape[-2:]
    if a.shape[-2:] != (m, m) or b.shape[-2:] != (n, n):
        raise ShapeError(f"solve_sylvester: incompatible shapes A {type_string(a)}, B "
                         f"{type_string(b)}, C {type_string(c)} (A (m, m), B (n, n), C (m, n))",
                         source=user_source())
    batch = vnp.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    # K[(j, i), (l, k)] = delta_jl A_ik + B_lj delta_ik: vec(X) column by column, index j m + i
    k = (vnp.eye(n, dtype=dt)[:, None, :, None] * a[..., None, :, None, :]
         + vnp.swapaxes(b, -1, -2)[..., :, None, :, None] * vnp.eye(m, dtype=dt)[:, None, :])
    k = vnp.broadcast_to(vnp.reshape(k, k.shape[:-4] + (m * n, m * n)), batch + (m * n, m * n))
    rhs = vnp.broadcast_to(vnp.reshape(vnp.swapaxes(c, -1, -2), c.shape[:-2] + (m * n, 1)),
                           batch + (m * n, 1))
    lu, _, perm = D.lu_factor(k)
    x = D.lu_solve_factored(lu, perm, rhs)
    x = vnp.swapaxes(vnp.reshape(x, batch + (n, m)), -1, -2)
    singular = vnp.min(vnp.abs(vnp.linalg.diagonal(lu)), -1) < tol
    return vnp.where(vnp.expand_dims(singular, (-2, -1)), np.nan, x)


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None, tol=None,
                     key=None):
    """The eigenvalues w (ascending; eigvals_only=False: (w, v), the eigenvectors as v's
    columns) of the symmetric tridiagonal matrix with diagonal d (n,) and off-diagonal e
    (n - 1,): eigh (Jacobi) of that matrix (JAX bisects a Sturm sequence and finds the
    eigenvectors by inverse iteration: the same eigenvalues to rounding, the eigenvectors up
    to sign; tol and key are not used). select 'a' (all) or 'i' (indices select_range[0] to
    select_range[1], inclusive); 'v' is not supported, as in JAX."""
    d, e = vnp.asarray(d), vnp.asarray(e)
    if d.dtype != e.dtype or d.dtype.kind != "f":
        raise DTypeError("eigh_tridiagonal: d and e must be floating arrays of the same dtype, "
                         f"got {type_string(d)} and {type_string(e)}", source=user_source())
    if d.ndim != 1 or e.shape != (max(d.shape[0] - 1, 0),):
        raise ShapeError(f"eigh_tridiagonal: d (n,) and e (n - 1,), got {type_string(d)} and "
                         f"{type_string(e)}", source=user_source())
    n = d.shape[0]
    if select == "a":
        lo, hi = 0, n - 1
    elif select == "i":
        if select_range is None or select_range[0] > select_range[1]:
            raise ArgumentError("eigh_tridiagonal(select='i'): select_range must be (lo, hi) "
                                f"with lo <= hi, got {select_range!r}", source=user_source())
        lo, hi = int(select_range[0]), int(select_range[1])
    elif select == "v":
        raise ArgumentError("eigh_tridiagonal(select='v') is not supported (its result's "
                            "size depends on the data; JAX does not implement it either)",
                            source=user_source())
    else:
        raise ArgumentError(f"eigh_tridiagonal: select is 'a', 'i' or 'v', not {select!r}",
                            source=user_source())
    t = vnp.diag(d) + vnp.diag(e, 1) + vnp.diag(e, -1)
    w, v = D.eigh(t)
    w, v = w[lo:hi + 1], v[:, lo:hi + 1]
    return w if eigvals_only else (w, v)


# ------------------------------------------------------------------------- special matrices

def _vectors(*xs):
    """xs as arrays, at least 1-D, their batch dimensions (all but the last) broadcast."""
    xs = [vnp.atleast_1d(vnp.asarray(x)) for x in xs]
    batch = vnp.broadcast_shapes(*(x.shape[:-1] for x in xs))
    dt = vnp.result_type(*xs)
    return [vnp.broadcast_to(x, batch + x.shape[-1:]).astype(dt) for x in xs]


def _gathered(v, index):
    """v[..., index] for a static (rows, cols) index array: each entry one element of v."""
    return vnp.reshape(vnp.take(v, np.asarray(index, np.int32).ravel(), axis=-1),
                       v.shape[:-1] + np.shape(index))


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column c (..., m) and first row r (..., n) (r[0] not
    used; default c): A[i, j] = c[i - j] for i >= j, r[j - i] above; batch dims broadcast."""
    c, r = _vectors(c, c if r is None else r)
    m, n = c.shape[-1], r.shape[-1]
    elems = vnp.concatenate([vnp.flip(c, -1), r[..., 1:]], -1)      # c[m-1] .. c[0], r[1:]
    return _gathered(elems, m - 1 - np.arange(m)[:, None] + np.arange(n)[None, :])


def hankel(c, r=None):
    """The Hankel matrix with first column c (..., m) and last row r (..., n) (r[0] not used;
    default zeros): H[i, j] = concatenate(c, r[1:])[i + j]."""
    c = vnp.asarray(c)
    if c.ndim == 0 or (r is not None and vnp.ndim(r) == 0):
        raise ShapeError("hankel: c and r must be at least 1-dimensional", source=user_source())
    c, r = _vectors(c, vnp.zeros_like(c) if r is None else r)
    m, n = c.shape[-1], r.shape[-1]
    return _gathered(vnp.concatenate([c, r[..., 1:]], -1), np.arange(m)[:, None] + np.arange(n))


def circulant(c):
    """The circulant matrix with first column c (..., n): A[i, j] = c[(i - j) mod n]."""
    (c,) = _vectors(c)
    n = c.shape[-1]
    return _gathered(c, (np.arange(n)[:, None] - np.arange(n)) % n)


def _first_row_on(sub, row):
    """sub (..., n, n) with its first row replaced by row (..., n)."""
    first = np.arange(sub.shape[-2])[:, None] == 0
    return vnp.where(first, vnp.expand_dims(row, -2), sub)


def leslie(f, s):
    """The Leslie matrix: fecundities f (..., n) its first row, survivals s (..., n - 1) its
    first subdiagonal, zeros elsewhere (n >= 2)."""
    f, s = _vectors(f, s)
    n = f.shape[-1]
    if n < 2 or s.shape[-1] != n - 1:
        raise ShapeError(f"leslie: f (..., n) with n >= 2 and s (..., n - 1), got f "
                         f"{type_string(f)} and s {type_string(s)}", source=user_source())
    sub = np.eye(n, k=-1, dtype=bool)                  # s[j] at (j + 1, j)
    below = vnp.where(sub, _gathered(s, np.broadcast_to(np.minimum(np.arange(n), n - 2), (n, n))),
                      0)
    return _first_row_on(below, f)


def companion(a):
    """The companion matrix of the polynomial a (..., n), n >= 2 (inexact dtype): first row
    -a[1:] / a[0], ones on the first subdiagonal (inf or nan where a[0] is 0, as JAX's)."""
    (a,) = _vectors(a)
    a = a if a.dtype.kind == "f" else a.astype(vnp.float32)
    if a.shape[-1] < 2:
        raise ShapeError(f"companion: a's last axis must have length >= 2, got {type_string(a)}",
                         source=user_source())
    m = a.shape[-1] - 1
    first = -a[..., 1:] / a[..., :1]
    return _first_row_on(vnp.broadcast_to(vnp.eye(m, k=-1, dtype=a.dtype), a.shape[:-1] + (m, m)),
                         first)


def fiedler(a):
    """The symmetric Fiedler matrix F[i, j] = |a[i] - a[j]| of a (..., n)."""
    (a,) = _vectors(a)
    return vnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a):
    """The Fiedler companion matrix of the polynomial a (..., n) (inexact dtype; (n-1, n-1),
    pentadiagonal, its eigenvalues a's roots): JAX's layout, a scaled by a[0]."""
    (a,) = _vectors(a)
    a = a if a.dtype.kind == "f" else a.astype(vnp.float32)
    if a.shape[-1] == 0:
        raise ShapeError("fiedler_companion: a's last axis must have nonzero length, got "
                         f"{type_string(a)}", source=user_source())
    n = a.shape[-1] - 1
    if n == 0:
        return vnp.zeros(a.shape[:-1] + (0, 0), a.dtype)
    a = a / a[..., :1]
    if n == 1:
        return -a[..., 1:, None]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    even = i % 2 == 0
    # JAX's layout: -a[1] at (0, 0), 1 at (1, 0); for even i, -a[i + 2] at (i, i + 1) and 1 at
    # (i, i + 2); -a[i + 1] at (i, i - 1) for even i >= 2; 1 at (i, i - 2) for odd i >= 3
    first, sup, sub = (i == 0) & (j == 0), (j == i + 1) & even, (j == i - 1) & even & (i >= 2)
    ones = ((i == 1) & (j == 0)) | ((j == i + 2) & even) | ((j == i - 2) & ~even & (i >= 3))
    index = np.where(first, 1, np.where(sup, np.minimum(i + 2, n), np.minimum(i + 1, n)))
    vals = vnp.where(first | sup | sub, _gathered(-a, index), 0.0)
    return vnp.where(ones, 1.0, vals).astype(a.dtype)


def convolution_matrix(a, n, mode="full"):
    """The matrix A (..., k, n) with A @ v = vnp.convolve(a, v, mode) for a (..., m): a
    Toeplitz matrix of a's shifts; k = m + n - 1 ('full'), max(m, n) ('same'), max(m, n) -
    min(m, n) + 1 ('valid')."""
    n = int(n)
    if n <= 0:
        raise ArgumentError(f"convolution_matrix: n must be a positive integer, got {n}",
                            source=user_source())
    a = vnp.asarray(a)
    if a.ndim == 0 or a.shape[-1] < 1:
        raise ShapeError(f"convolution_matrix: a must be (..., m) with m >= 1, got "
                         f"{type_string(a)}", source=user_source())
    if mode not in ("full", "valid", "same"):
        raise ArgumentError(f"convolution_matrix: mode is 'full', 'valid' or 'same', not "
                            f"{mode!r}", source=user_source())
    m = a.shape[-1]
    widths = [(0, 0)] * (a.ndim - 1) + [(0, n - 1)]
    az, raz = vnp.pad(a, widths), vnp.pad(vnp.flip(a, -1), widths)
    size = m + n - 1
    if mode == "same":
        tb = (min(n, m) - 1) // 2
        te = min(n, m) - 1 - tb
    else:
        tb = te = min(n, m) - 1 if mode == "valid" else 0
    return toeplitz(az[..., tb:size - te], raz[..., size - n - tb:size - tb])


def block_diag(*arrs):
    """The block diagonal matrix of arrs (each at most 2-D; a scalar is 1x1, a vector a row),
    their dtypes promoted; no arrays: a (1, 0) float32 matrix."""
    if not arrs:
        arrs = (np.zeros((1, 0), np.float32),)
    arrs = [vnp.atleast_2d(vnp.asarray(a)) for a in arrs]
    for i, a in enumerate(arrs):
        if a.ndim > 2:
            raise ShapeError(f"block_diag: its arguments have at most 2 dimensions, argument {i} "
                             f"is {type_string(a)}", source=user_source())
    dt = vnp.result_type(*arrs)
    cols = sum(a.shape[1] for a in arrs)
    rows, at = [], 0
    for a in arrs:
        rows.append(vnp.pad(a.astype(dt), [(0, 0), (at, cols - at - a.shape[1])]))
        at += a.shape[1]
    return vnp.concatenate(rows, 0)


def _default_float():
    return vnp.asarray(np.zeros((), np.float64)).dtype     # float32, or float64 under x64


def _constant(values, dt):
    """A matrix computed in float64 numpy at trace time (it depends on static n only), in dt."""
    return vnp.asarray(np.asarray(values).astype(np.dtype(str(dt))))


def hilbert(n):
    """The n x n Hilbert matrix 1 / (i + j + 1), in the default float dtype."""
    i = np.arange(n, dtype=np.float64)
    return _constant(1.0 / (i[:, None] + i[None, :] + 1.0), _default_float())


def _comb(n, k):
    return np.vectorize(lambda a, b: math.comb(int(a), int(b)) if 0 <= b <= a else 0,
                        otypes=[object])(n, k)


def invhilbert(n):
    """The inverse of the n x n Hilbert matrix, from its closed form in exact integers,
    rounded to the default float dtype (JAX's are lgamma-based: a few ulps off)."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    s = i + j
    exact = ((-1) ** s * (s + 1) * _comb(n + i, n - j - 1) * _comb(n + j, n - i - 1)
             * _comb(s, i) ** 2)
    return _constant(exact.astype(np.float64), _default_float())


def _pascal_kind(kind, name):
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ArgumentError(f"{name}: kind is 'symmetric', 'lower' or 'upper', not {kind!r}",
                            source=user_source())
    return kind


def _lower_pascal(n):
    return _comb(np.arange(n)[:, None], np.arange(n)[None, :]).astype(np.float64)


def pascal(n, kind=None):
    """The n x n Pascal matrix (kind 'symmetric', the default: C(i + j, i); 'lower': C(i, j);
    'upper' its transpose), float32 as JAX's (its values exact to float32; JAX's come from
    lgamma)."""
    kind = _pascal_kind(kind, "pascal")
    low = _lower_pascal(n)
    return _constant({"lower": low, "upper": low.T, "symmetric": low @ low.T}[kind], "float32")


def invpascal(n, kind=None):
    """The inverse of pascal(n, kind) ((-1)^(i-j) C(i, j) for 'lower'), in the default float
    dtype."""
    kind = _pascal_kind(kind, "invpascal")
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    low = np.where((i - j) % 2 == 0, 1.0, -1.0) * _lower_pascal(n)
    return _constant({"lower": low, "upper": low.T, "symmetric": low.T @ low}[kind],
                     _default_float())


def helmert(n, full=False):
    """The Helmert matrix: rows k - 1 = (1, ..., 1 (k times), -k, 0, ...) / sqrt(k (k + 1))
    for k = 1 .. n - 1 ((n - 1, n)); full: a first row of 1 / sqrt(n) ((n, n)). Default float
    dtype."""
    if n < 1:
        raise ArgumentError(f"helmert: n must be a positive integer, got {n}",
                            source=user_source())
    i, j = np.arange(n - 1)[:, None], np.arange(n)[None, :]
    k = i + 1.0
    h = np.where(j <= i, 1.0, np.where(j == k, -k, 0.0)) / np.sqrt(k * (k + 1))
    if full:
        h = np.concatenate([np.full((1, n), 1.0 / np.sqrt(n)), h], 0)
    return _constant(h, _default_float())


def hadamard(n, dtype=int):
    """The n x n Hadamard matrix (Sylvester's construction; n a power of 2), of dtype (int:
    int32)."""
    if n < 1 or not math.log2(n).is_integer():
        raise ArgumentError(f"hadamard: n must be a positive power of 2, got {n}",
                            source=user_source())
    h = np.ones((1, 1))
    for _ in range(int(math.log2(n))):
        h = np.block([[h, h], [h, -h]])
    return vnp.asarray(h, dtype=np.int32 if dtype is int else dtype)   # int: JAX's int32


def funm(A, func, disp=True):
    """func of the matrix A (n, n), func a vnp function of the eigenvalues: Parlett's
    recurrence (Golub and Van Loan's algorithm 11.1.1, JAX's) on the real Schur form T of A,
    Z func(T) Z^T. JAX's is complex (the complex Schur form); here real: A must have real
    eigenvalues (T triangular), and where it has a complex pair (a 2x2 block in T) the result
    is nan. A repeated eigenvalue leaves its entries undivided, as JAX's. disp=False: (F,
    err), JAX's error estimate."""
    a = _square_float(A, "funm")
    if a.ndim != 2:
        raise ShapeError(f"funm takes one square matrix (n, n), got {type_string(a)}",
                         source=user_source())
    t, z = D.real_schur(a)
    n = a.shape[-1]
    f = vnp.diag(func(vnp.linalg.diagonal(t)).astype(a.dtype))
    minden = vnp.abs(t[0, 0])
    for p in range(1, n):
        for i in range(n - p):
            j = i + p
            s = t[i, j] * (f[j, j] - f[i, i])
            if j > i + 1:
                s = s + vnp.sum(t[i, i + 1:j] * f[i + 1:j, j] - f[i, i + 1:j] * t[i + 1:j, j])
            den = t[j, j] - t[i, i]
            f = f.at[i, j].set(vnp.where(den != 0, s / vnp.where(den != 0, den, 1.0), s))
            minden = vnp.minimum(minden, vnp.abs(den))
    pair = vnp.any(vnp.linalg.diagonal(t, offset=-1) != 0)
    f = vnp.where(pair, np.nan, z @ f @ z.T)
    if disp:
        return f
    tol = float(np.finfo(np.dtype(str(a.dtype))).eps)
    minden = vnp.where(minden == 0.0, tol, minden)
    err = vnp.where(vnp.any(vnp.isinf(f)), np.inf, vnp.minimum(1.0, vnp.maximum(
        tol, (tol / minden) * vnp.linalg.norm(vnp.triu(t, 1), 1))))
    return f, err


def _complex_result(name, what):
    raise DTypeError(f"{name}: {what} is complex and vkgrad has no complex dtype (docs/numpy.md, "
                     "'What it refuses')", source=user_source())


def dft(n, scale=None, *, dtype=None):
    """Refused: the discrete Fourier transform matrix is complex."""
    _complex_result("dft", "the DFT matrix")


def rsf2csf(T, Z, check_finite=True):
    """Refused: the complex Schur form is complex (schur's real form is what vkgrad gives)."""
    _complex_result("rsf2csf", "the complex Schur form")
