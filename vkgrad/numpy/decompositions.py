"""vnp.linalg (numpy.linalg's names): the factorizations and what is built on them, beside
norm and cholesky (vkgrad/numpy/linalg.py).

    LU with partial pivoting   solve, inv, det, slogdet, cond(p not 2) (vg.scipy.linalg's
                               lu family), matrix_power(n < 0)
    Householder QR             qr (and vg.scipy.linalg.qr, vg.random.orthogonal,
                               vg.nn.initializers.orthogonal), svd's full_matrices completion
    cyclic Jacobi              eigh, eigvalsh (two-sided), svd, svdvals (one-sided), and from
                               the singular values pinv, matrix_rank, cond, norm ord 2/-2/'nuc'

Each factorization is a composition of vnp ops unrolled over the columns (n is static), so it
traces under jit with static shapes and reverse mode differentiates it as any composition.
The row swaps of partial pivoting are argmax and where: the pivot choice is piecewise constant
in a, so the composition's gradient is the analytic one (d det = det inv(a)^T; d inv =
-inv^T g inv^T); so are Householder's reflections (smooth but for the sign choice).

Jacobi iterates: its rotations run in one lax.scan over a fixed number of sweeps
(jacobi_sweeps: float32 convergence, measured up to n = 64), each sweep n - 1 steps that rotate
n/2 disjoint pairs at once with matmuls. Its derivative is not the iteration's: eigh and the
reduced svd are vg.custom_jvp functions with JAX's JVP rules (reverse mode transposes them;
jvp and hessian work too); a repeated eigenvalue (singular value) makes their eigenvector
(singular vector) derivatives inf or nan, as JAX's. Everything here is sized for small
matrices (n up to a few dozen), not a fast n = 4096 kernel.
"""

from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np
from numpy import inf

from vkgrad import primitives as P
from vkgrad.control_flow import scan
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.ir.core import np_dtype
from vkgrad.numpy.contractions import cross, matmul, outer, tensordot
from vkgrad.numpy.creation import eye, zeros
from vkgrad.numpy.dtypes import as_float, asarray, astype, dtype_of, promoted_dtype
from vkgrad.numpy.linalg import _square, cholesky_lower, diagonal, solve_triangular
from vkgrad.numpy.reductions import argmax, max, min, prod, sum
from vkgrad.numpy.shapes import (broadcast_shapes, broadcast_to, concatenate, expand_dims,
                                 matrix_transpose, moveaxis, pad, reshape, squeeze, stack,
                                 swapaxes, transpose)
from vkgrad.numpy.sorting import argsort, take_along_axis
from vkgrad.numpy.ufuncs import (abs, divide, equal, isnan, log, logical_and, logical_not,
                                 logical_or, multiply, negative, not_equal, power, sign, sqrt,
                                 subtract, where)
from vkgrad.numpy.util import is_int, normalize_axes, type_string
from vkgrad.tracer.core import user_source
from vkgrad.transforms.custom import custom_jvp

__all__ = ["linalg"]

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])   # JAX's result types
QRResult = namedtuple("QRResult", ["Q", "R"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


# Each column step of LU and QR keeps the matrices it updates in memory (P.save, the primitive
# of lax.optimization_barrier): fusion recomputes a cheap elementwise value wherever it is
# read, so without it step j's reductions would recompute every earlier step from a's buffer
# and the earlier steps' small results, binding 2j + 1 buffers (past lavapipe's 32 at n = 16:
# the program then runs on the interpreter). These saves keep their cotangents in memory too
# (save's `cotangent`, primitives/compiler.py): with a VJP that passed the cotangent on, the
# backward recomputed the cotangent chain in every reader, and on lavapipe the gradients of
# det, solve and cholesky ran on the interpreter from n = 8.

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
        a, perm = P.save(a, True), P.save(perm, True)   # in memory, and their cotangents
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

def _reflector(x, rows, j):
    """The unit v of the Householder reflection I - 2 v v^T taking x (..., m), zero above row
    j, to alpha e_j, alpha = -sign(x_j) |x| (LAPACK's dlarfg signs); v = 0 (no reflection)
    where x is already zero below row j."""
    below = sum(where(rows > j, multiply(x, x), 0.0), -1)                # |x[j+1:]|^2
    norm_x = sqrt(sum(multiply(x, x), -1))
    alpha = multiply(where(x[..., j] < 0, 1.0, -1.0), norm_x)
    v = subtract(x, where(equal(rows, j), expand_dims(alpha, -1), 0.0))
    norm_v = sqrt(sum(multiply(v, v), -1))
    return where(expand_dims(below > 0, -1),
                 divide(v, expand_dims(where(norm_v > 0, norm_v, 1.0), -1)), 0.0)


def _reflect_rows(r, v):
    """(I - 2 v v^T) r for r (..., m, n), v (..., m)."""
    return subtract(r, multiply(2.0, multiply(expand_dims(v, -1),
                                              expand_dims(sum(multiply(expand_dims(v, -1), r),
                                                              -2), -2))))


def _reflect_columns(q, v):
    """q (I - 2 v v^T) for q (..., m, n), v (..., n)."""
    return subtract(q, multiply(2.0, multiply(expand_dims(sum(multiply(q, expand_dims(v, -2)),
                                                              -1), -1), expand_dims(v, -2))))


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
        v = _reflector(where(rows >= j, r[..., :, j], 0.0), rows, j)
        r, q = _reflect_rows(r, v), _reflect_columns(q, v)     # R <- H R, Q <- Q H
        r, q = P.save(r, True), P.save(q, True)   # (the note above lu_factor)
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


# ---------------------------------------------------------------- Hessenberg and real Schur

def hessenberg(a):
    """(H, Q) with a = Q H Q^T for a square a (..., n, n): H zero below its first subdiagonal,
    by n - 2 Householder reflections from both sides (LAPACK's gehrd signs, so scipy's H and
    Q)."""
    a = _square(a, "hessenberg")
    n = a.shape[-1]
    rows = P.iota((n,), 0, "i32")
    h, q = a, broadcast_to(eye(n, dtype=dtype_of(a)), a.shape)
    for j in range(n - 2):
        v = _reflector(where(rows > j, h[..., :, j], 0.0), rows, j + 1)
        h = P.save(_reflect_columns(_reflect_rows(h, v), v), True)
        q = P.save(_reflect_columns(q, v), True)
    return where(P.iota((n, n), 0, "i32") <= P.iota((n, n), 1, "i32") + 1, h, 0.0), q


def schur_iterations(n: int) -> int:
    """Shifted QR steps real_schur takes for an n x n matrix: 12 n (an eigenvalue or a pair
    typically deflates in 2 to 5 steps; the rest is margin, measured on random normal
    matrices to n = 8)."""
    return 12 * n


def _entry(x, r, c, rows, cols):
    """x[..., r, c] at traced indices r, c (..., ) (float, as rows and cols): a masked sum."""
    at = logical_and(equal(rows, expand_dims(r, (-1, -2))), equal(cols, expand_dims(c, (-1, -2))))
    return sum(where(at, x, 0.0), (-2, -1))


def real_schur(a):
    """(T, Z) with a = Z T Z^T, Z orthogonal and T quasi upper triangular (the real Schur
    form: 1x1 blocks for the real eigenvalues, 2x2 blocks for the complex pairs), for a square
    a (..., n, n): the Hessenberg form, then schur_iterations(n) steps of shifted QR in one
    lax.scan, on the leading p x p block not yet deflated (p a traced count, the blocks masks):
    a Wilkinson single shift where the block's last 2x2 has real eigenvalues, else Francis's
    double shift (implicit: the bulge of H^2 - tr H + det I's first column chased down by
    reflections, real arithmetic throughout), an exceptional double shift every
    eleventh step (LAPACK's dlahqr), deflating 1 (or a complex pair, 2) when the subdiagonal
    entry is below eps times the neighbouring diagonal (or n eps |a|). The 2x2 blocks are not
    LAPACK's standardized ones, and the order of the eigenvalues along T's diagonal may
    differ from LAPACK's."""
    h, z = hessenberg(a)
    n, dt = a.shape[-1], dtype_of(a)
    if n < 2:
        return h, z
    eps = float(np.finfo(np_dtype(dt)).eps)
    rows, cols = P.iota((n, n), 0, "f32"), P.iota((n, n), 1, "f32")
    vec = P.iota((n,), 0, "f32")
    floor = multiply(n * eps, sqrt(sum(multiply(a, a), (-2, -1))))           # n eps |a|_F

    def small(h, k):   # |h[k, k-1]| negligible (k >= 1)
        sub = abs(_entry(h, k, k - 1, rows, cols))
        diag = abs(_entry(h, k, k, rows, cols)) + abs(_entry(h, k - 1, k - 1, rows, cols))
        return logical_and(k >= 1, logical_or(sub <= multiply(eps, diag), sub <= floor))

    def step(carry, exceptional):
        h, z, p = carry
        a11, a12 = _entry(h, p - 2, p - 2, rows, cols), _entry(h, p - 2, p - 1, rows, cols)
        a21, a22 = _entry(h, p - 1, p - 2, rows, cols), _entry(h, p - 1, p - 1, rows, cols)
        half = multiply(0.5, subtract(a22, a11))
        disc = multiply(half, half) + multiply(a12, a21)
        pair = disc < 0                                  # the last 2x2: a complex pair
        real = logical_and(logical_not(pair), logical_not(exceptional))   # a single shift
        sign_half = where(half < 0, -1.0, 1.0)                              # mu: the root
        mu = multiply(0.5, a11 + a22) + multiply(sign_half, sqrt(where(real, disc, 0.0)))
        s = abs(a21) + abs(_entry(h, p - 2, p - 3, rows, cols))             # dlahqr's shift
        tr = where(exceptional, multiply(2.0, multiply(0.75, s) + a22), a11 + a22)
        det_ = where(exceptional, multiply(multiply(0.75, s) + a22, multiply(0.75, s) + a22) +
                    multiply(0.4375, multiply(s, s)),
                    subtract(multiply(a11, a22), multiply(a12, a21)))
        # one implicit QR step: the first column of (H - mu I) or of (H^2 - tr H + det I)
        # (rows 0-2), then the bulge chased down the active block by reflections of 2 or 3
        # rows (every reflection is of the whole of H, so T's rows and columns past p follow)
        h00, h01, h10, h11 = h[..., 0, 0], h[..., 0, 1], h[..., 1, 0], h[..., 1, 1]
        h21 = h[..., 2, 1] if n > 2 else zeros(h00.shape, dt)
        x0 = where(real, subtract(h00, mu),
                   multiply(h00, h00) + multiply(h01, h10) - multiply(tr, h00) + det_)
        x1 = where(real, h10, multiply(h10, h00 + h11 - tr))
        x2 = where(real, 0.0, multiply(h10, h21))
        width = expand_dims(where(real, 2.0, 3.0), -1)
        for k in range(n - 1):
            if k == 0:
                x = where(equal(vec, 0), expand_dims(x0, -1), where(equal(vec, 1),
                          expand_dims(x1, -1), where(equal(vec, 2), expand_dims(x2, -1), 0.0)))
            else:
                x = h[..., :, k - 1]
            keep = logical_and(logical_and(vec >= k, vec < k + width), vec < expand_dims(p, -1))
            v = _reflector(where(keep, x, 0.0), vec, k)
            h, z = _reflect_columns(_reflect_rows(h, v), v), _reflect_columns(z, v)
        h = where(rows <= cols + 1, h, 0.0)       # Hessenberg again (roundoff below)
        e = lambda x: expand_dims(x, (-1, -2))                             # noqa: E731
        one, two = small(h, p - 1), logical_and(small(h, p - 2), pair)
        done_pair = logical_and(equal(p, 2.0), pair)                        # the last 2x2 pair
        cut = where(one, p - 1, where(two, p - 2, -1.0))                    # the entry deflated
        h = where(logical_and(equal(rows, e(cut)), equal(cols, e(cut) - 1)), 0.0, h)
        p = where(p < 2, p, where(done_pair, 0.0, where(one, p - 1, where(two, p - 2, p))))
        return (P.save(h, True), P.save(z, True), p), None

    p = zeros(a.shape[:-2], dt) + float(n)
    flags = np.arange(schur_iterations(n)) % 11 == 10
    (h, z, _), _ = scan(step, (h, z, p), flags)
    return h, z


# ------------------------------------------------------------------------ Jacobi: eigh, svd

def jacobi_sweeps(n: int) -> int:
    """Sweeps of cyclic Jacobi for an n x n matrix in float32: ceil(log2 n) + 2, at least 3.
    Measured on random symmetric normal matrices (eigenvalues against LAPACK's in float64):
    the error stops falling (at float32's floor, 4e-7 for n = 4, 1e-4 for n = 64) after 2
    sweeps at n = 4, 3 at 8, 4 at 16, 5 at 32 and 6 at 64; this is that plus one or two. The
    convergence is quadratic, so the same sweeps reach float64's floor too (eigenvalues and
    singular values within 2e-13 of LAPACK's at n = 64 under enable_x64)."""
    return builtins.max(3, math.ceil(math.log2(builtins.max(n, 2))) + 2)


def _round_robin(n: int):
    """The n - 1 rounds of a round-robin tournament of n (even) indices: each round n/2
    disjoint pairs (p, q) that one step rotates at once, every pair once in all (Brent and
    Luk's parallel ordering). (ps, qs): int32 (n - 1, n/2)."""
    players, ps, qs = list(range(n)), [], []
    for _ in range(n - 1):
        ps.append(players[: n // 2])
        qs.append(players[n // 2:][::-1])
        players = [players[0], players[-1]] + players[1:-1]
    return np.array(ps, np.int32), np.array(qs, np.int32)


def _rotation(app, aqq, apq):
    """(c, s) of the rotation J (J_pp = J_qq = c, J_pq = s, J_qp = -s) with (J^T A J)_pq = 0
    for A = [[app, apq], [apq, aqq]]: t = s / c the smaller root of t^2 + 2 theta t - 1 = 0,
    theta = (aqq - app) / (2 apq); none where apq is 0."""
    none = equal(apq, 0.0)
    theta = divide(subtract(aqq, app), multiply(2.0, where(none, 1.0, apq)))
    t = divide(where(theta < 0, -1.0, 1.0), abs(theta) + sqrt(multiply(theta, theta) + 1.0))
    c = divide(1.0, sqrt(multiply(t, t) + 1.0))
    return where(none, 1.0, c), where(none, 0.0, multiply(t, c))


def jacobi(x, two_sided: bool):
    """Cyclic Jacobi on x (..., m, n), n even, in a scan over jacobi_sweeps(n) sweeps of n - 1
    steps, each rotating n/2 disjoint index pairs: two-sided (x symmetric; x <- J^T x J, which
    tends to the diagonal of eigenvalues) or one-sided (Hestenes: x <- x J, whose columns tend
    to orthogonal, their norms the singular values). (x, v): v the product of the Js."""
    n, dt = x.shape[-1], dtype_of(x)
    ps, qs = _round_robin(n)
    sweeps = jacobi_sweeps(n)
    at = P.iota((n, 1), 0, "i32")

    def step(carry, pq):
        x, v = carry
        mp, mq = (astype(equal(at, expand_dims(i, 0)), dt) for i in pq)   # (n, n/2) one-hot
        xp, xq = matmul(x, mp), matmul(x, mq)                              # columns p and q
        if two_sided:
            app, aqq, apq = (sum(multiply(m, y), -2) for m, y in ((mp, xp), (mq, xq), (mp, xq)))
        else:
            app, aqq, apq = (sum(multiply(y, z), -2) for y, z in ((xp, xp), (xq, xq), (xp, xq)))
        c, s = (expand_dims(r, -2) for r in _rotation(app, aqq, apq))
        j = matmul(concatenate([subtract(multiply(mp, c), multiply(mq, s)),
                                multiply(mp, s) + multiply(mq, c)], -1),
                   swapaxes(concatenate([mp, mq], -1), -1, -2))
        x = matmul(x, j)
        if two_sided:
            x = matmul(swapaxes(j, -1, -2), x)
        return (x, matmul(v, j)), None

    v = broadcast_to(eye(n, dtype=dt), x.shape[:-2] + (n, n))
    (x, v), _ = scan(step, (x, v), (np.tile(ps, (sweeps, 1)), np.tile(qs, (sweeps, 1))))
    return x, v


def _pad_even(x, both: bool):
    """x with a zero last column (and row, both) where its n is odd: an index no rotation
    touches (its products with the others stay 0), dropped afterwards."""
    if x.shape[-1] % 2 == 0:
        return x
    return pad(x, [(0, 0)] * (x.ndim - 2) + [(0, 1 if both else 0), (0, 1)])


def _order(w, descending):
    return argsort(negative(w) if descending else w, -1)


def _columns(v, order):
    """v's columns (..., :, j) in the order given (per batch element)."""
    return take_along_axis(v, broadcast_to(expand_dims(order, -2), v.shape), -1)


def _eigh(a):
    """(w ascending, v) of a symmetric a (..., n, n) by two-sided Jacobi."""
    n = a.shape[-1]
    x, v = jacobi(_pad_even(a, True), two_sided=True)
    w = diagonal(x, 0, -2, -1)[..., :n]
    order = _order(w, descending=False)
    return take_along_axis(w, order, -1), _columns(v[..., :n, :n], order)


def _eigh_jvp(primals, tangents):
    """JAX's eigh JVP: with v^T da v = dS, dw = diag(dS), dv = v (F * dS), F_ij = 1 / (w_j -
    w_i) off the diagonal, 0 on it (inf or nan for a repeated eigenvalue, as JAX's: the
    eigenvectors of a degenerate eigenvalue are not differentiable)."""
    (a,), (da,) = primals, tangents
    w, v = _eigh_custom(a)
    n = a.shape[-1]
    on = eye(n, dtype=dtype_of(a))
    f = subtract(divide(1.0, on + subtract(expand_dims(w, -2), expand_dims(w, -1))), on)
    ds = matmul(swapaxes(v, -1, -2), matmul(da, v))
    return (w, v), (diagonal(ds, 0, -2, -1), matmul(v, multiply(f, ds)))


def _svd_reduced(a):
    """(u (..., m, k), s (..., k) descending, vt (..., k, n)) of a (..., m, n), k = min(m, n):
    one-sided Jacobi on the columns of a (of a^T where m < n)."""
    m, n = a.shape[-2:]
    if m < n:
        u, s, vt = _svd_reduced(swapaxes(a, -1, -2))
        return swapaxes(vt, -1, -2), s, swapaxes(u, -1, -2)
    x, v = jacobi(_pad_even(a, False), two_sided=False)
    x, v = x[..., :n], v[..., :n, :n]
    s = sqrt(sum(multiply(x, x), -2))
    order = _order(s, descending=True)
    x, s, v = _columns(x, order), take_along_axis(s, order, -1), _columns(v, order)
    # u = x / s, orthonormal: a zero column (a zero singular value) has no direction, so u's
    # columns are the Q of x's QR times the signs of R's diagonal (which is +-s)
    q, r = householder_qr(x)
    u = multiply(q, expand_dims(where(diagonal(r, 0, -2, -1) < 0, -1.0, 1.0), -2))
    return u, s, swapaxes(v, -1, -2)


def _svd_jvp(primals, tangents):
    """JAX's svd JVP (reduced matrices): dS = u^T da v, ds = diag(dS); dU and dV from F_ij =
    1 / (s_j^2 - s_i^2) off the diagonal, with the parts outside u's (v's) span for a
    rectangular a. Repeated singular values: not differentiable (inf or nan), as JAX's."""
    (a,), (da,) = primals, tangents
    u, s, vt = _svd_custom(a)
    ut, v = swapaxes(u, -1, -2), swapaxes(vt, -1, -2)
    k = s.shape[-1]
    on = eye(k, dtype=dtype_of(a))
    s_row = expand_dims(s, -2)
    s_col = swapaxes(s_row, -1, -2)
    f = subtract(divide(1.0, multiply(s_row + s_col, subtract(s_row, s_col)) + on), on)
    ds_mat = matmul(ut, matmul(da, v))
    dss, sds = multiply(s_row, ds_mat), multiply(s_col, ds_mat)
    s_inv = where(equal(s, 0.0), 0.0, divide(1.0, where(equal(s, 0.0), 1.0, s)))
    du = matmul(u, multiply(f, dss + swapaxes(dss, -1, -2))
                + multiply(multiply(0.5, subtract(ds_mat, swapaxes(ds_mat, -1, -2))),
                           multiply(on, expand_dims(s_inv, -2))))
    dv = matmul(v, multiply(f, sds + swapaxes(sds, -1, -2)))
    m, n = a.shape[-2:]
    if m > n:
        dav = matmul(da, v)
        du = du + divide(subtract(dav, matmul(u, matmul(ut, dav))), s_row)
    if n > m:
        dau = matmul(swapaxes(da, -1, -2), u)
        dv = dv + divide(subtract(dau, matmul(v, matmul(vt, dau))), s_row)
    return (u, s, vt), (du, diagonal(ds_mat, 0, -2, -1), swapaxes(dv, -1, -2))


_eigh_custom = custom_jvp(_eigh)
_eigh_custom.defjvp(_eigh_jvp)
_svd_custom = custom_jvp(_svd_reduced)
_svd_custom.defjvp(_svd_jvp)


def eigh(a, UPLO=None, symmetrize_input=True):
    """JAX's eigh: EighResult(eigenvalues ascending, eigenvectors as columns) of a symmetric a
    (..., n, n). symmetrize_input: of (a + a^T) / 2 (JAX's default, so the gradient is
    symmetric); else of the triangle UPLO ('L', the default, or 'U')."""
    a = _symmetric(a, UPLO, symmetrize_input, "eigh")
    return EighResult(*_eigh_custom(a))


def eigvalsh(a, UPLO=None, *, symmetrize_input=True):
    """The eigenvalues of a symmetric a (..., n, n), ascending (eigh's first result)."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def _symmetric(a, uplo, symmetrize_input, name):
    a = _square(a, name)
    if uplo not in (None, "L", "U"):
        raise ArgumentError(f"{name}: UPLO is 'L' or 'U', not {uplo!r}", source=user_source())
    at = swapaxes(a, -1, -2)
    if symmetrize_input:
        return multiply(0.5, a + at)
    n = a.shape[-1]
    lower = P.iota((n, n), 0, "i32") >= P.iota((n, n), 1, "i32")
    return where(lower, a, at) if uplo in (None, "L") else where(lower, at, a)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    """JAX's svd: SVDResult(U, S, Vh) with a = U diag(S) Vh, S descending (compute_uv=False: S
    alone), for a (..., m, n): one-sided Jacobi (hermitian=True: from eigh). full_matrices: U
    (..., m, m) and Vh (..., n, n), the extra columns an orthonormal completion (from a QR;
    the gradient is JAX's for full_matrices=False)."""
    a = as_float(a)
    if a.ndim < 2:
        raise ShapeError(f"svd takes matrices (..., m, n), got {type_string(a)}",
                         source=user_source())
    if subset_by_index is not None:
        raise ArgumentError("svd: subset_by_index is not supported (take S[..., i:j] of the "
                            "whole decomposition)", source=user_source())
    if hermitian:
        w, v = eigh(a)
        order = _order(abs(w), descending=True)
        s, u = take_along_axis(abs(w), order, -1), _columns(v, order)
        if not compute_uv:
            return s
        vt = swapaxes(multiply(u, expand_dims(sign(take_along_axis(w, order, -1)), -2)), -1, -2)
        return SVDResult(u, s, vt)
    u, s, vt = _svd_custom(a)
    if not compute_uv:
        return s
    m, n = a.shape[-2:]
    if full_matrices and m != n:
        if m > n:
            u = concatenate([u, householder_qr(u, complete=True)[0][..., n:]], -1)
        else:
            vt = concatenate([vt, swapaxes(householder_qr(swapaxes(vt, -1, -2), complete=True)
                                           [0][..., m:], -1, -2)], -2)
    return SVDResult(u, s, vt)


def svdvals(x):
    """The singular values of x (..., m, n), descending (svd(x, compute_uv=False))."""
    return svd(x, compute_uv=False)


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse of a (..., m, n), from its SVD: singular values at most
    rtol times the largest (rtol default 10 max(m, n) eps, JAX's; rcond its old name) count
    as zero."""
    rtol = _alias(rtol, rcond, "pinv", "rcond")
    a = as_float(a)
    if a.ndim < 2:
        raise ShapeError(f"pinv takes matrices (..., m, n), got {type_string(a)}",
                         source=user_source())
    u, s, vt = svd(a, full_matrices=False, hermitian=hermitian)
    if rtol is None:
        rtol = 10.0 * builtins.max(a.shape[-2:]) * float(np.finfo(np_dtype(dtype_of(a))).eps)
    cut = multiply(rtol, s[..., :1])
    s = where(s > cut, s, inf)
    return matmul(swapaxes(vt, -1, -2), divide(swapaxes(u, -1, -2), expand_dims(s, -1)))


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):
    """The number of singular values of M (..., m, n) above rtol times the largest (rtol
    default max(m, n) eps, JAX's; tol its old name); int32. A 1-D M: 1 unless it is all
    zeros."""
    rtol = _alias(rtol, tol, "matrix_rank", "tol")
    M = as_float(M)
    if M.ndim < 2:
        return astype(max(astype(not_equal(M, 0.0), "f32")), "i32")
    s = svd(M, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        rtol = builtins.max(M.shape[-2:]) * float(np.finfo(np_dtype(dtype_of(M))).eps)
    above = s > multiply(expand_dims(rtol, -1) if not isinstance(rtol, (int, float)) else rtol,
                         s[..., :1])
    return astype(sum(astype(above, "f32"), -1), "i32")   # a float sum: Vulkan sums floats


def _alias(rtol, old, fn, old_name):
    if old is not None and rtol is not None:
        raise ArgumentError(f"{fn}: give rtol or its alias {old_name}, not both",
                            source=user_source())
    return rtol if old is None else old


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """JAX's lstsq: (x, residuals, rank, s) with x minimising |a x - b| (the least-norm one),
    from a's SVD, a (m, n), b (m,) or (m, k): singular values below rcond times the largest
    (default max(m, n) eps; a negative rcond: eps) count as zero; residuals |b - a x|^2 per
    column, always (JAX's numpy_resid=False: numpy's empty ones depend on the rank's value)."""
    a, b = as_float(a), as_float(b)
    dt = promoted_dtype(a, b)
    a, b = astype(a, dt), astype(b, dt)
    if a.ndim != 2 or b.ndim not in (1, 2):
        raise ShapeError(f"lstsq takes a 2-D a and a 1-D or 2-D b, got {type_string(a)} and "
                         f"{type_string(b)}", source=user_source())
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"lstsq: the leading dimensions of a {type_string(a)} and b "
                         f"{type_string(b)} must match", source=user_source())
    if numpy_resid:
        raise ArgumentError("lstsq: numpy_resid=True (residuals whose shape depends on the "
                            "rank's value) is not supported", source=user_source())
    eps = float(np.finfo(np_dtype(dt)).eps)
    rcond = eps * builtins.max(a.shape) if rcond is None else where(rcond < 0, eps, rcond)
    bm = expand_dims(b, -1) if b.ndim == 1 else b
    u, s, vt = svd(a, full_matrices=False)
    keep = s >= multiply(rcond, s[..., :1])
    s_inv = where(keep, divide(1.0, where(keep, s, 1.0)), 0.0)
    x = matmul(swapaxes(vt, -1, -2), multiply(expand_dims(s_inv, -1),
                                              matmul(swapaxes(u, -1, -2), bm)))
    r = subtract(bm, matmul(a, x))
    rank = astype(sum(astype(keep, "f32")), "i32")    # a float sum: Vulkan sums floats
    return (x[..., 0] if b.ndim == 1 else x), sum(multiply(r, r), 0), rank, s


def tensorinv(a, ind=2):
    """The inverse of a as a linear map from its first ind axes' tensors to the others':
    inv of a reshaped to a square matrix, reshaped to a.shape[ind:] + a.shape[:ind]."""
    a = as_float(a)
    if not is_int(ind) or ind <= 0:
        raise ArgumentError(f"tensorinv: ind must be a positive integer, got {ind!r}",
                            source=user_source())
    rows, cols = math.prod(a.shape[:ind]), math.prod(a.shape[ind:])
    if rows != cols:
        raise ShapeError(f"tensorinv of {type_string(a)} with ind={ind}: the product of the "
                         f"first ind dimensions ({rows}) must equal that of the others ({cols})",
                         source=user_source())
    return reshape(inv(reshape(a, (rows, cols))), a.shape[ind:] + a.shape[:ind])


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) = b: solve of a reshaped to (b.size, x.size); axes: a's
    axes moved to the end first."""
    a, b = as_float(a), as_float(b)
    if axes is not None:
        axes = [normalize_axes(k, a.ndim)[0] for k in axes]
        a = transpose(a, [k for k in range(a.ndim) if k not in axes] + axes)
    out_shape = a.shape[b.ndim:]
    if a.shape[:b.ndim] != b.shape or math.prod(b.shape) != math.prod(out_shape):
        raise ShapeError(f"tensorsolve: a {type_string(a)} must be b's shape {b.shape} then "
                         f"the solution's, of as many elements as b", source=user_source())
    n = math.prod(b.shape)
    return reshape(solve(reshape(a, (n, n)), reshape(b, (n,))), out_shape)


def cond(x, p=None):
    """The condition number of x (..., m, n) in norm p: None or 2 (s_max / s_min, from the
    singular values), -2, or any of norm's matrix norms (square x: |x| |inv(x)|); inf where
    that is nan (a singular x) and x has no nan, as JAX's."""
    x = as_float(x)
    if x.ndim < 2:
        raise ShapeError(f"cond takes matrices (..., m, n), got {type_string(x)}",
                         source=user_source())
    if p is None or p == 2:
        s = svdvals(x)
        return divide(s[..., 0], s[..., -1])
    if p == -2:
        s = svdvals(x)
        r = divide(s[..., -1], s[..., 0])
    else:
        x = _square(x, f"cond(p={p!r})")
        r = multiply(linalg.norm(x, p, (-2, -1)), linalg.norm(inv(x), p, (-2, -1)))
    has_nan = max(astype(isnan(x), "f32"), (-2, -1)) > 0
    return where(logical_and(isnan(r), logical_not(has_nan)), inf, r)


def matrix_power(a, n):
    """a (..., m, m) to the integer power n by repeated squaring (n < 0: of inv(a); n = 0: the
    identity)."""
    a = _square(a, "matrix_power")
    if not is_int(n):
        raise ArgumentError(f"matrix_power: n must be an integer, got {n!r}",
                            source=user_source())
    n = int(n)
    if n < 0:
        a, n = inv(a), -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else matmul(result, a)
        n >>= 1
        if n:
            a = matmul(a, a)
    return broadcast_to(eye(a.shape[-1], dtype=dtype_of(a)), a.shape) if result is None else result


def multi_dot(arrays, *, precision=None):
    """arrays[0] @ arrays[1] @ ... (the first may be 1-D, a row; the last 1-D, a column), left
    to right (JAX chooses the cheapest order; the values agree up to rounding)."""
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ArgumentError(f"multi_dot: expecting at least 2 arrays, got {len(arrays)}",
                            source=user_source())
    out = arrays[0]
    for b in arrays[1:]:
        out = matmul(out, b)
    return out


# ----------------------------------------------------------------------------- the namespace

class _Linalg:
    """vnp.linalg: norm, cholesky, solve, inv, det, slogdet, qr, eigh, eigvalsh, svd, svdvals,
    pinv, matrix_rank, lstsq, tensorinv, tensorsolve, cond, matrix_power, multi_dot, and the
    array API's matmul, matrix_transpose, tensordot, outer, cross, vecdot, diagonal, trace,
    vector_norm, matrix_norm (the module docstring says how each is computed; docs/numpy.md
    what is not supported)."""

    solve, inv, det, slogdet = map(staticmethod, (solve, inv, det, slogdet))
    qr, eigh, eigvalsh, svd, svdvals = map(staticmethod, (qr, eigh, eigvalsh, svd, svdvals))
    pinv, matrix_rank, lstsq = map(staticmethod, (pinv, matrix_rank, lstsq))
    tensorinv, tensorsolve = map(staticmethod, (tensorinv, tensorsolve))
    cond, matrix_power, multi_dot = map(staticmethod, (cond, matrix_power, multi_dot))
    matmul, matrix_transpose = map(staticmethod, (matmul, matrix_transpose))

    def __getattr__(self, name):
        if name in ("eig", "eigvals"):
            raise AttributeError(f"vnp.linalg.{name} is not supported: a general matrix's "
                                 "eigenvalues are complex, and vkgrad has no complex dtype "
                                 "(eigh and eigvalsh take symmetric matrices)")
        raise AttributeError(f"vnp.linalg has no {name!r} (docs/numpy.md lists what it has)")

    @staticmethod
    def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
        """tensordot with axes keyword-only (the array API's signature)."""
        return tensordot(x1, x2, axes, precision=precision,
                         preferred_element_type=preferred_element_type)

    @staticmethod
    def cholesky(a, *, upper=False, symmetrize_input=True):
        """JAX's cholesky: the lower-triangular L with L @ L^T = a (upper: U = L^T with U^T U =
        a), for a (..., n, n) symmetric positive definite (nan where a is not, as JAX's; numpy
        raises). symmetrize_input: of (a + a^T) / 2 (so the gradient is symmetric), else of
        a's lower triangle."""
        a = _square(a, "cholesky")
        c = cholesky_lower(multiply(0.5, a + swapaxes(a, -1, -2)) if symmetrize_input else a)
        return swapaxes(c, -1, -2) if upper else c

    @staticmethod
    def outer(x1, x2, /):
        """The outer product of two vectors (1-D only, as the array API's)."""
        x1, x2 = asarray(x1), asarray(x2)
        if x1.ndim != 1 or x2.ndim != 1:
            raise ShapeError(f"linalg.outer takes 1-D vectors, got {type_string(x1)} and "
                             f"{type_string(x2)}", source=user_source())
        return outer(x1, x2)

    @staticmethod
    def cross(x1, x2, /, *, axis=-1):
        """The cross product of 3-vectors along axis."""
        return cross(x1, x2, axis=axis)

    @staticmethod
    def vecdot(x1, x2, /, *, axis=-1):
        """sum(x1 * x2, axis): dot products of the vectors along axis (broadcast)."""
        return sum(multiply(x1, x2), axis)

    @staticmethod
    def diagonal(x, /, *, offset=0):
        """The diagonals of the matrices in the last two axes."""
        return diagonal(x, offset, -2, -1)

    @staticmethod
    def trace(x, /, *, offset=0, dtype=None):
        """The traces of the matrices in the last two axes."""
        return sum(diagonal(x, offset, -2, -1), -1, dtype=dtype)

    @staticmethod
    def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
        """The vector norm over axis (None: of all of x, flattened)."""
        x = as_float(x)
        if axis is None:
            r = _vector_norm(reshape(x, (-1,)), ord, [0], False)
            return reshape(r, (1,) * x.ndim) if keepdims else r
        axes = [normalize_axes(a, x.ndim)[0] for a in ((axis,) if is_int(axis) else axis)]
        return _vector_norm(x, ord, axes, keepdims)

    @staticmethod
    def matrix_norm(x, /, *, keepdims=False, ord="fro"):
        """The matrix norm of the matrices in the last two axes."""
        x = as_float(x)
        return _matrix_norm(x, ord, [x.ndim - 2, x.ndim - 1], keepdims)

    @staticmethod
    def norm(x, ord=None, axis=None, keepdims=False):
        """Vector norms (ord None/2, 1, inf, -inf, 0, any p) over one axis; matrix norms
        (None/'fro', 1, -1, inf, -inf, and from the singular values 2, -2, 'nuc') over two;
        axis=None with ord=None: the 2-norm of the flattened array."""
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
    if ord in (2, -2, "nuc"):
        s = svdvals(moveaxis(x, (row, col), (-2, -1)))
        r = sum(s, -1) if ord == "nuc" else s[..., 0] if ord == 2 else s[..., -1]
        return expand_dims(r, tuple(sorted((row, col)))) if keepdims else r
    if ord not in (1, -1, inf, -inf):
        raise ArgumentError(f"norm(ord={ord!r}) of a matrix: ord is None, 'fro', 'nuc', 1, -1, "
                            "2, -2, inf or -inf", source=user_source())
    summed, chosen = (row, col) if ord in (1, -1) else (col, row)  # 1: largest column sum
    s = sum(abs(x), summed, keepdims=True)
    r = (max if ord > 0 else min)(s, chosen, keepdims=True)
    return r if keepdims else squeeze(r, (row, col))


linalg = _Linalg()
