"""jnp's polynomial functions on coefficient arrays, highest power first (numpy's and JAX's
convention): polyval, polyadd, polysub, polymul, polydiv, polyder, polyint, polyfit, poly;
roots is refused (its values are complex). Compositions of vnp's functions: Horner's rule, long
division, a running product of the factors, and for polyfit vnp.linalg.lstsq of the scaled
Vandermonde matrix (JAX's construction)."""

from __future__ import annotations

import numpy as _np

from vkgrad.errors import ArgumentError, DTypeError, ShapeError
from vkgrad.numpy.contractions import convolve, matmul
from vkgrad.numpy.creation import arange, full, ones, vander, zeros
from vkgrad.numpy.decompositions import linalg
from vkgrad.numpy.dtypes import asarray, promote, promoted_dtype
from vkgrad.numpy.reductions import sum
from vkgrad.numpy.shapes import (broadcast_to, concatenate, expand_dims, reshape, stack,
                                 swapaxes)
from vkgrad.numpy.ufuncs import negative, sqrt
from vkgrad.numpy.util import nonnegative_int, type_string
from vkgrad.primitives import dtype_of
from vkgrad.tracer.core import concrete_value, concretization_error, user_source


def _coefficients(p, name, what="p"):
    p = asarray(p)
    if p.ndim != 1:
        raise ShapeError(f"{name}: {what} must be a 1-D array of coefficients, got "
                         f"{type_string(p)}", source=user_source())
    return p


def _inexact(*xs):
    """xs promoted together, integers and bools to float32 (JAX's promote_dtypes_inexact)."""
    dt = promoted_dtype(*xs)
    dt = dt if dt in ("f32", "f64") else "f32"
    return [promote(asarray(x), dt) for x in xs]


def polyval(p, x, *, unroll=16):
    """p[0] x^(n-1) + ... + p[n-1] by Horner's rule (jnp.polyval, in a float dtype): p's
    leading axis holds the coefficients, its other axes broadcast against x; `unroll` is
    accepted (JAX's scan's unrolling: here the loop is always written out)."""
    p, x = _inexact(p, x)
    if p.ndim < 1:
        raise ShapeError(f"polyval: p must have at least one axis, got {type_string(p)}",
                         source=user_source())
    y = zeros(_np.broadcast_shapes(p.shape[1:], x.shape), dtype_of(x))
    for i in range(p.shape[0]):
        y = y * x + p[i]
    return y


def polyadd(a1, a2):
    """The coefficients of a1 + a2 (jnp.polyadd): the one with fewer rows (leading axis) added
    into the other's last rows, so its trailing axes broadcast into the other's; integers stay
    integers."""
    a1, a2 = asarray(a1), asarray(a2)
    for a, what in ((a1, "a1"), (a2, "a2")):
        if a.ndim < 1:
            raise ShapeError(f"polyadd: {what} must have at least one axis of coefficients, got "
                             f"{type_string(a)}", source=user_source())
    dt = promoted_dtype(a1, a2)
    long, short = (a1, a2) if a2.shape[0] <= a1.shape[0] else (a2, a1)
    n = short.shape[0]
    rows = (n,) + tuple(long.shape[1:])
    if len(short.shape) > len(rows) or _np.broadcast_shapes(short.shape, rows) != rows:
        raise ShapeError(f"polyadd: {type_string(short)} does not broadcast into the last {n} "
                         f"coefficient rows of {type_string(long)}", source=user_source())
    long, short = promote(long, dt), promote(short, dt)
    pad = zeros((long.shape[0] - n,) + rows[1:], dt)
    return long + concatenate([pad, broadcast_to(short, rows)])


def polysub(a1, a2):
    """The coefficients of a1 - a2 (jnp.polysub)."""
    return polyadd(a1, negative(asarray(a2)))


def _trim_leading_zeros(a, name, tol=0.0):
    """a without its leading entries of magnitude <= tol (concrete values only: the result's
    length depends on them)."""
    v = concrete_value(a)
    if v is None:
        raise concretization_error(a, f"{name}(trim_leading_zeros=True)",
                                   "pass trim_leading_zeros=False (the result's length would "
                                   "depend on the data)")
    big = _np.flatnonzero(_np.abs(v) > tol)
    return a[int(big[0]):] if big.size else a[:0]


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The coefficients of a1 * a2, their full convolution (jnp.polymul, in a float dtype);
    trim_leading_zeros (concrete coefficients only: it changes the length) drops each input's
    leading zeros first."""
    a1, a2 = _inexact(_coefficients(a1, "polymul", "a1"), _coefficients(a2, "polymul", "a2"))
    if trim_leading_zeros and (a1.shape[0] > 1 or a2.shape[0] > 1):
        a1, a2 = (_trim_leading_zeros(a, "polymul") for a in (a1, a2))
    a1 = a1 if a1.shape[0] else zeros((1,), dtype_of(a2))
    a2 = a2 if a2.shape[0] else zeros((1,), dtype_of(a1))
    return convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros=False):
    """(quotient, remainder) of u / v (jnp.polydiv, in a float dtype): long division, one
    quotient coefficient a step; the remainder keeps u's length (its leading entries 0), or
    with trim_leading_zeros (concrete inputs only) loses those below sqrt(eps), as JAX's."""
    u, v = _inexact(_coefficients(u, "polydiv", "u"), _coefficients(v, "polydiv", "v"))
    m, n = u.shape[0] - 1, v.shape[0] - 1
    if n < 0:
        raise ShapeError("polydiv: the divisor v has no coefficients", source=user_source())
    scale = 1.0 / v[0]
    q = []
    for k in range(m - n + 1):
        d = scale * u[k]
        q.append(d)
        u = u.at[k:k + n + 1].add(-d * v)
    q = stack(q) if q else zeros((1,), dtype_of(u))
    if trim_leading_zeros:
        u = _trim_leading_zeros(u, "polydiv", float(_np.sqrt(_np.finfo(_np.dtype(u.dtype)).eps)))
    return q, u


def polyder(p, m=1):
    """The coefficients of p's m-th derivative (jnp.polyder, in a float dtype): the power k's
    coefficient times k (k - 1) ... (k - m + 1); empty where m >= len(p)."""
    (p,) = _inexact(_coefficients(p, "polyder"))
    m = nonnegative_int(m, "polyder", "m")
    if m == 0:
        return p
    n = p.shape[0]
    powers = _np.arange(n - 1, m - 1, -1)                   # the kept terms' powers
    coeff = _np.prod(powers[None, :] - _np.arange(m)[:, None], axis=0)
    return p[:max(n - m, 0)] * asarray(coeff.astype(_np.dtype(p.dtype)))


def polyint(p, m=1, k=None):
    """The coefficients of p integrated m times (jnp.polyint, in a float dtype); k the
    integration constants: a scalar for all m, or m of them, k[0] the first integration's."""
    m = nonnegative_int(m, "polyint", "m")
    p, k = _inexact(_coefficients(p, "polyint"), 0.0 if k is None else k)
    k = reshape(k, (-1,)) if k.ndim <= 1 else k
    if k.ndim != 1 or k.shape[0] not in (1, m):
        raise ShapeError(f"polyint: k must be a scalar or a 1-D array of length 1 or m = {m}, "
                         f"got {type_string(k)}", source=user_source())
    if m == 0:
        return p
    k = full((m,), k[0], dtype_of(k)) if k.shape[0] == 1 else k
    n = p.shape[0]
    # the coefficient at index i of the result (power n + m - 1 - i) is divided by
    # power (power - 1) ... (power - m + 1), the constants by the integrations after theirs
    powers = _np.arange(n + m - 1, -1, -1)
    coeff = _np.prod(_np.maximum(1, powers[None, :] - _np.arange(m)[:, None]), axis=0)
    return concatenate([p, k]) / asarray(coeff.astype(_np.dtype(p.dtype)))


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree deg through (x, y) (jnp.polyfit, JAX's
    construction): the Vandermonde matrix's columns scaled to unit norm, vnp.linalg.lstsq
    (rcond default len(x) eps), the coefficients unscaled. y 1-D, or 2-D with one fit per column;
    w weights each point's residual; full=True returns (coefficients, residuals, rank, singular
    values, rcond), cov=True (1-D y) or 'unscaled' the coefficients' covariance too."""
    deg = nonnegative_int(deg, "polyfit", "deg", truncate=True)
    x, y = asarray(x), asarray(y)
    # JAX raises TypeErrors for these, and so ArgumentError (a TypeError)
    if x.ndim != 1 or x.shape[0] == 0:
        raise ArgumentError(f"polyfit: x must be a non-empty 1-D array, got {type_string(x)}",
                            source=user_source())
    if y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ArgumentError(f"polyfit: y must be 1-D or 2-D with one row per x ({x.shape[0]}), "
                            f"got {type_string(y)}", source=user_source())
    if cov is True and y.ndim == 2 and not full:
        raise ArgumentError("polyfit: cov=True with a 2-D y is not supported: JAX scales every "
                            "column's covariance by the first column's residuals (numpy by "
                            "each column's own); fit the columns one at a time, or pass "
                            "cov='unscaled'", source=user_source())
    order = deg + 1
    x, y = _inexact(x, y)
    if rcond is None:
        rcond = x.shape[0] * float(_np.finfo(_np.dtype(x.dtype)).eps)
    lhs, rhs = vander(x, order), y
    if w is not None:
        (w,) = _inexact(w)
        if w.ndim != 1 or w.shape[0] != x.shape[0]:
            raise ArgumentError(f"polyfit: w must be 1-D with one weight per x ({x.shape[0]}), "
                                f"got {type_string(w)}", source=user_source())
        lhs = lhs * expand_dims(w, 1)
        rhs = rhs * (expand_dims(w, 1) if rhs.ndim == 2 else w)
    scale = sqrt(sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = c / (scale if c.ndim == 1 else expand_dims(scale, 1))
    if full:
        return c, resids, rank, s, asarray(rcond, dtype_of(x))
    if not cov:
        return c
    vbase = linalg.inv(matmul(swapaxes(lhs, 0, 1), lhs)) / (expand_dims(scale, 1) * scale)
    if cov == "unscaled":
        fac = 1.0
    else:
        if x.shape[0] <= order:
            raise ShapeError("polyfit: the number of data points must exceed order = deg + 1 "
                             "to scale the covariance matrix (or pass cov='unscaled')",
                             source=user_source())
        fac = resids[0] / (x.shape[0] - order)
    return c, (vbase * fac if y.ndim == 1 else expand_dims(vbase, 2) * fac)


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given real roots (jnp.poly):
    (x - z_0) (x - z_1) ..., one factor at a time; 1.0 for none. A square matrix's
    characteristic polynomial needs its eigenvalues, which may be complex: refused."""
    (z,) = _inexact(seq_of_zeros)
    z = reshape(z, (1,)) if z.ndim == 0 else z          # JAX's: a scalar is one root
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        raise DTypeError("poly: a square matrix's characteristic polynomial needs its "
                         "eigenvalues, which may be complex (vkgrad has no complex dtype and no "
                         "eig: docs/numpy.md); pass its real eigenvalues as a 1-D array",
                         source=user_source())
    if z.ndim != 1:
        raise ShapeError(f"poly: the input must be a 1-D array of roots or a non-empty square "
                         f"matrix, got {type_string(z)}", source=user_source())
    dt = dtype_of(z)
    a = ones((1,), dt)
    zero = zeros((1,), dt)
    for i in range(z.shape[0]):     # a(x) (x - z_i): shift up, minus z_i times a
        a = concatenate([a, zero]) - z[i] * concatenate([zero, a])
    return ones((), dt) if z.shape[0] == 0 else a


def roots(p, *, strip_zeros=True):
    """Refused: the roots of a real polynomial are complex in general, and vkgrad has no complex
    dtype (JAX computes them as the companion matrix's eigenvalues)."""
    raise DTypeError("roots: the roots of a polynomial are complex in general and vkgrad has "
                     "no complex dtype (docs/numpy.md, 'What it refuses'); for a real-rooted "
                     "quadratic or a fit, compute them from the coefficients directly",
                     source=user_source())

__all__ = ["poly", "polyadd", "polyder", "polydiv", "polyfit", "polyint", "polymul", "polysub",
           "polyval", "roots"]
