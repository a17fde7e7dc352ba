"""Hypergeometric functions (hyp1f1, hyp2f1), the inverses of the incomplete gamma and beta
functions (gammaincinv, betaincinv), and the refused complex-valued names (sph_harm_y, wofz).

Every series has a fixed number of terms and every iteration a fixed count, so each function is
one elementwise composition (it traces, fuses and runs under jit):

    hyp1f1       Kummer's transformation M(a, b, x) = e^x M(b - a, b, -x) below 0, then its
                 series (160 terms) up to x = 80 and the asymptotic series (24 terms) beyond
    hyp2f1       its series (160 terms) on [0, 0.8]; the 1 - x transformation (DLMF 15.8.4,
                 64 terms) on (0.8, 1) where c - a - b is not an integer, else the series in
                 256 terms (accurate to x ~ 0.9); Pfaff's x / (x - 1) below 0 (so x < -4 is
                 the transformation's, b - a in place of c - a - b); Gauss's sum at 1. The
                 transformation's two terms cancel where |c - a - b| or the parameters are
                 large (gammaln's 3e-6 absolute error times the cancellation)
    gammaincinv  Numerical Recipes' start (Wilson-Hilferty above a = 1), 5 Halley steps (on
                 Q = 1 - p above p = 1/2, so the upper tail stays relative)
    betaincinv   Numerical Recipes' start, 5 Halley steps (the upper half as
                 1 - betaincinv(b, a, 1 - p))
"""

from __future__ import annotations

import math

import vkgrad.numpy as vnp
from vkgrad.errors import DTypeError
from vkgrad.scipy.special._base import (_betainc_dx, _broadcast_float, _igamma_dx, _igamma_pq,
                                        betainc, gammainc, gammaln, gammasgn)
from vkgrad.tracer.core import user_source
from vkgrad.transforms import custom_jvp, jvp


def _is_pole(x):
    return (x <= 0) & (x == vnp.floor(x))


def _gamma_ratio(nums, dens):
    """prod Gamma(nums) / prod Gamma(dens), through gammaln and the signs; 0 where a
    denominator has a pole."""
    log, sign, zero = 0.0, 1.0, False
    for v in nums:
        log, sign = log + gammaln(v), sign * gammasgn(v)
    for v in dens:
        pole = _is_pole(v)
        vs = vnp.where(pole, 0.5, v)
        log, sign, zero = log - gammaln(vs), sign * gammasgn(vs), zero | pole
    return vnp.where(zero, 0.0, sign * vnp.exp(log))


# ----------------------------------------------------------------------------- hyp1f1

_M_SERIES = 160
_M_ASYMPTOTIC = 24
_M_SWITCH = 80.0


def _hyp1f1_pos(a, b, y):
    """M(a, b, y) for y >= 0: the series to y = 80 (its terms past k = 160 below float32's
    rounding), the asymptotic expansion (DLMF 13.7.2, both terms, the second's phase cos(pi a)
    for real y) beyond."""
    near = y <= _M_SWITCH
    ys = vnp.where(near, y, 0.0)
    term, total = vnp.ones_like(y), vnp.ones_like(y)
    for k in range(_M_SERIES):
        term = term * (a + k) / (b + k) * ys / (k + 1.0)
        total = total + term
    yf = vnp.where(near, 2 * _M_SWITCH, y)
    t1, s1 = vnp.ones_like(y), vnp.ones_like(y)
    t2, s2 = vnp.ones_like(y), vnp.ones_like(y)
    for k in range(_M_ASYMPTOTIC):
        t1 = t1 * (b - a + k) * (1.0 - a + k) / ((k + 1.0) * yf)
        t2 = t2 * (a + k) * (a - b + 1.0 + k) / ((k + 1.0) * -yf)
        s1, s2 = s1 + t1, s2 + t2
    grows = _gamma_ratio([b], [a]) * vnp.exp(yf + (a - b) * vnp.log(yf)) * s1
    power = _gamma_ratio([b], [b - a]) * vnp.cos(math.pi * a) * yf ** -a * s2
    return vnp.where(near, total, grows + power)


def hyp1f1(a, b, x):
    """The confluent hypergeometric function 1F1(a; b; x) = sum (a)_k / (b)_k x^k / k!
    (jax.scipy.special.hyp1f1, for b > 0): 1 at a = 0 (also at a = b = 0, JAX's convention),
    e^x at a = b, inf at b = 0. Large results (x of tens with a >> b) lose float32 precision
    as JAX's do."""
    a, b, x = _broadcast_float(a, b, x)
    neg = x < 0
    a2 = vnp.where(neg, b - a, a)
    m = _hyp1f1_pos(a2, b, vnp.abs(x))
    out = vnp.where(neg, vnp.exp(vnp.where(neg, x, 0.0)) * m, m)
    out = vnp.where(b == 0, math.inf, out)
    out = vnp.where((a == b) & (a != 0), vnp.exp(x), out)
    return vnp.where(a == 0, 1.0, out)


# ----------------------------------------------------------------------------- hyp2f1

_F_SERIES = 160         # x <= 0.8: 0.8^160 ~ 3e-16, with room for the terms' power of k
_F_TRANSFORMED = 64     # 1 - x < 0.2
_F_SLOW_SERIES = 256
_F_SWITCH = 0.8


def _series_2f1(a, b, c, x, terms: int):
    term, total = vnp.ones_like(x), vnp.ones_like(x)
    for k in range(terms):
        term = term * (a + k) * (b + k) / ((c + k) * (k + 1.0)) * x
        total = total + term
    return total


def _hyp2f1_unit(a, b, c, x):
    """2F1(a, b; c; x) for 0 <= x < 1."""
    near = x <= _F_SWITCH
    direct = _series_2f1(a, b, c, vnp.where(near, x, 0.0), _F_SERIES)
    d = c - a - b
    d_int = vnp.abs(d - vnp.rint(d)) < 1e-5
    transform = ~near & ~d_int
    s = vnp.where(transform, 1.0 - x, 0.1)
    ds = vnp.where(transform, d, 0.5)
    first = _gamma_ratio([c, ds], [c - a, c - b]) * _series_2f1(a, b, 1.0 - ds, s, _F_TRANSFORMED)
    second = s ** ds * _gamma_ratio([c, -ds], [a, b]) \
        * _series_2f1(c - a, c - b, 1.0 + ds, s, _F_TRANSFORMED)
    slow = _series_2f1(a, b, c, vnp.where(near | transform, 0.0, x), _F_SLOW_SERIES)
    return vnp.where(near, direct, vnp.where(transform, first + second, slow))


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function 2F1(a, b; c; x) (jax.scipy.special.hyp2f1) for
    x <= 1: JAX's values at the edges (1 at x = 0 or where a or b is 0; inf where c is 0 or
    a negative integer, at x = 1 with c - a - b <= 0, and for x > 1). Where c - a - b is an
    integer, x in (0.9, 1) is beyond the fixed series' reach (and b - a an integer, x < -9);
    large a, b, c, |x| lose float32 precision, as JAX's (docs/numpy.md)."""
    a, b, c, x = _broadcast_float(a, b, c, x)
    neg = x < 0
    xn = vnp.where(neg, x, -1.0)
    w = xn / (xn - 1.0)                                       # Pfaff: in (0, 1)
    pfaff = (1.0 - xn) ** -a * _hyp2f1_unit(a, c - b, c, w)
    xu = vnp.where((x >= 0) & (x < 1), x, 0.0)
    out = vnp.where(neg, pfaff, _hyp2f1_unit(a, b, c, xu))
    d = c - a - b
    dpos = d > 0
    gauss = _gamma_ratio([c, vnp.where(dpos, d, 1.0)], [c - a, c - b])
    out = vnp.where(x == 1, vnp.where(dpos, gauss, math.inf), out)
    out = vnp.where(x > 1, math.inf, out)
    out = vnp.where((c == 0) | _is_pole(c), math.inf, out)
    return vnp.where((x == 0) | (((a == 0) | (b == 0)) & (c != 0)), 1.0, out)


# ---------------------------------------------------------------- inverse incomplete gamma

_GAMMAINCINV_STEPS = 5
_BETAINCINV_STEPS = 5


def _normal_start(p):
    """Numerical Recipes' rough inverse normal at p (|error| < 3e-3), the sign for p < 0.5."""
    pp = vnp.where(p < 0.5, p, 1.0 - p)
    t = vnp.sqrt(-2.0 * vnp.log(vnp.clip(pp, 1e-37, 0.5)))
    z = (2.30753 + t * 0.27061) / (1.0 + t * (0.99229 + t * 0.04481)) - t
    return vnp.where(p < 0.5, -z, z)


def _igammainv(a, p):
    ok = (a > 0) & (p > 0) & (p < 1)
    a, p = vnp.where(ok, a, 1.0), vnp.where(ok, p, 0.5)
    big = a > 1.0
    ab = vnp.where(big, a, 2.0)
    wh = ab * (1.0 - 1.0 / (9.0 * ab) - _normal_start(p) / (3.0 * vnp.sqrt(ab))) ** 3
    t = 1.0 - a * (0.253 + a * 0.12)
    tail = p >= t
    small = vnp.where(tail, 1.0 - vnp.log1p(-vnp.where(tail, (p - t) / (1.0 - t), 0.0)),
                      (vnp.where(tail, 0.5, p) / t) ** (1.0 / a))
    x = vnp.where(big, vnp.maximum(wh, 1e-3), small)
    underflow = x == 0                                        # the answer is below float32's
    upper, q = p > 0.5, 1.0 - p                               # exact for p >= 0.5
    for _ in range(_GAMMAINCINV_STEPS):                       # Halley's method
        xs = vnp.maximum(x, 1e-37)
        lower_p, upper_q = _igamma_pq(a, xs)
        u = vnp.where(upper, q - upper_q, lower_p - p) / _igamma_dx(a, xs)
        step = u / (1.0 - 0.5 * vnp.minimum(1.0, u * ((a - 1.0) / xs - 1.0)))
        xn = xs - step
        x = vnp.where(xn <= 0, 0.5 * xs, xn)
    return vnp.where(underflow, 0.0, x)


def _gammaincinv_edges(a, p, x):
    x = vnp.where(p == 0, 0.0, vnp.where(p == 1, math.inf, x))
    return vnp.where((a <= 0) | (p < 0) | (p > 1) | vnp.isnan(a) | vnp.isnan(p), math.nan, x)


@custom_jvp
def _gammaincinv(a, p):
    return _gammaincinv_edges(a, p, _igammainv(a, p))


def _gammaincinv_jvp(primals, tangents):
    (a, p), (ta, tp) = primals, tangents
    x = _gammaincinv(a, p)
    dp = jvp(lambda v: gammainc(v, x), (a,), (ta,))[1]        # dP/da along ta, x held
    return x, (tp - dp) / _igamma_dx(a, x)


_gammaincinv.defjvp(_gammaincinv_jvp)


def gammaincinv(a, y):
    """The inverse of gammainc in x: gammainc(a, gammaincinv(a, y)) = y (scipy's
    gammaincinv; 0 at y = 0, inf at 1, nan for a <= 0 or y outside [0, 1]). Derivatives by
    the implicit function theorem (1 / gammainc's x-derivative in y)."""
    return _gammaincinv(*_broadcast_float(a, y))


def _ibetainv(a, b, p):
    ok = (a > 0) & (b > 0) & (p > 0) & (p < 1)
    a, b, p = vnp.where(ok, a, 2.0), vnp.where(ok, b, 2.0), vnp.where(ok, p, 0.5)
    both = (a >= 1) & (b >= 1)
    z = _normal_start(p)
    al = (z * z - 3.0) / 6.0
    ia = 1.0 / (2.0 * vnp.where(both, a, 2.0) - 1.0)
    ib = 1.0 / (2.0 * vnp.where(both, b, 2.0) - 1.0)
    h = 2.0 / (ia + ib)
    w = z * vnp.sqrt(al + h) / h - (ib - ia) * (al + 5.0 / 6.0 - 2.0 / (3.0 * h))
    x_both = a / (a + b * vnp.exp(2.0 * w))
    lna, lnb = vnp.log(a / (a + b)), vnp.log(b / (a + b))
    t, u = vnp.exp(a * lna) / a, vnp.exp(b * lnb) / b
    ws = t + u
    low = p < t / ws
    x_small = vnp.where(low, (a * ws * p) ** (1.0 / a), 1.0 - (b * ws * (1.0 - p)) ** (1.0 / b))
    x = vnp.where(both, x_both, x_small)
    underflow = x == 0                                        # the answer is below float32's
    x = vnp.clip(x, 1e-37, 1.0 - 6e-8)
    for _ in range(_BETAINCINV_STEPS):                        # Halley's method
        u = (betainc(a, b, x) - p) / _betainc_dx(a, b, x)
        step = u / (1.0 - 0.5 * vnp.minimum(1.0, u * ((a - 1.0) / x - (b - 1.0) / (1.0 - x))))
        xn = x - step
        x = vnp.where(xn <= 0, 0.5 * x, vnp.where(xn >= 1, 0.5 * (x + 1.0), xn))
    return vnp.where(underflow, 0.0, x)


def _betaincinv_edges(a, b, p, x):
    x = vnp.where(p == 0, 0.0, vnp.where(p == 1, 1.0, x))
    bad = (a <= 0) | (b <= 0) | (p < 0) | (p > 1) | vnp.isnan(a) | vnp.isnan(b) | vnp.isnan(p)
    return vnp.where(bad, math.nan, x)


@custom_jvp
def _betaincinv(a, b, p):
    upper = p > 0.5             # I_x(a, b) = p as I_(1-x)(b, a) = 1 - p (exact), so the upper
    y = _ibetainv(vnp.where(upper, b, a), vnp.where(upper, a, b), vnp.where(upper, 1.0 - p, p))
    return _betaincinv_edges(a, b, p, vnp.where(upper, 1.0 - y, y))     # tail stays relative


def _betaincinv_jvp(primals, tangents):
    (a, b, p), (ta, tb, tp) = primals, tangents
    x = _betaincinv(a, b, p)
    dp = jvp(lambda u, v: betainc(u, v, x), (a, b), (ta, tb))[1]
    return x, (tp - dp) / _betainc_dx(a, b, x)


_betaincinv.defjvp(_betaincinv_jvp)


def betaincinv(a, b, y):
    """The inverse of betainc in x: betainc(a, b, betaincinv(a, b, y)) = y (scipy's
    betaincinv; 0 at y = 0, 1 at 1, nan for a or b <= 0 or y outside [0, 1]); implicit
    derivatives."""
    return _betaincinv(*_broadcast_float(a, b, y))


# ------------------------------------------------------------------------------- refused

def _refuse(name: str, what: str):
    raise DTypeError(f"{name}: {what} are complex and vkgrad has no complex dtype (docs/numpy.md, "
                     "'What it refuses')", source=user_source())


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """Refused: the spherical harmonics are complex-valued."""
    _refuse("sph_harm_y", "the spherical harmonics Y_n^m(theta, phi)")


def wofz(z):
    """Refused: the Faddeeva function takes and returns complex numbers (for real x,
    erfcx(-i x) needs a complex argument too; vg.scipy.special.erfcx and dawsn are its real
    relatives)."""
    _refuse("wofz", "the Faddeeva function's argument and values")


__all__ = ["betaincinv", "gammaincinv", "hyp1f1", "hyp2f1", "sph_harm_y", "wofz"]
