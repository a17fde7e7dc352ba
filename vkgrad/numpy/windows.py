"""jnp's window functions: hanning, hamming, blackman, bartlett, kaiser, each M points (an int;
a float is truncated, as JAX's int(M)) in float32, symmetric, 1 at the centre; compositions of
cos over n = 1 - M, 3 - M, ..., M - 1 (numpy's and JAX's formulas), kaiser of I0, which is here
too as jnp.i0 (beside kaiser, as in JAX's lax_numpy), with vg.scipy.special's i0e, i1 and i1e."""

from __future__ import annotations

import math

from vkgrad.numpy.creation import arange, ones
from vkgrad.numpy.dtypes import as_float
from vkgrad.numpy.ufuncs import abs as _abs
from vkgrad.numpy.ufuncs import cos, exp, maximum, sign, sqrt, where
from vkgrad.numpy.util import horner, nonnegative_int


def _cosine_window(M, name, coeffs):
    """sum over k of coeffs[k] cos(k pi n / (M - 1)), n = 1 - M, 3 - M, ..., M - 1."""
    M = nonnegative_int(M, name, "M", truncate=True)
    if M <= 1:
        return ones((M,))
    t = arange(1 - M, M, 2.0) * (math.pi / (M - 1))
    out = coeffs[0]
    for k, c in enumerate(coeffs[1:], start=1):
        out = out + c * cos(k * t)
    return out


def hanning(M):
    """The Hann window 0.5 + 0.5 cos(pi n / (M - 1)) (jnp.hanning)."""
    return _cosine_window(M, "hanning", (0.5, 0.5))


def hamming(M):
    """The Hamming window 0.54 + 0.46 cos(pi n / (M - 1)) (jnp.hamming)."""
    return _cosine_window(M, "hamming", (0.54, 0.46))


def blackman(M):
    """The Blackman window 0.42 + 0.5 cos(pi n / (M - 1)) + 0.08 cos(2 pi n / (M - 1))
    (jnp.blackman)."""
    return _cosine_window(M, "blackman", (0.42, 0.5, 0.08))


def bartlett(M):
    """The triangular window 1 - |n| / (M - 1) (jnp.bartlett)."""
    M = nonnegative_int(M, "bartlett", "M", truncate=True)
    if M <= 1:
        return ones((M,))
    return 1.0 - _abs(arange(1 - M, M, 2.0)) / (M - 1)


def kaiser(M, beta):
    """The Kaiser window I0(beta sqrt(1 - (2k / (M - 1) - 1)^2)) / I0(beta), k = 0 ... M - 1
    (jnp.kaiser; beta may be traced): as i0e(u) / i0e(beta) exp(u - beta), which does not
    overflow for a large beta."""
    M = nonnegative_int(M, "kaiser", "M", truncate=True)
    if M <= 1:
        return ones((M,))
    beta = as_float(beta)
    alpha = 0.5 * (M - 1)
    r = (arange(0.0, M) - alpha) / alpha              # exactly -1 and 1 at the ends
    u = beta * sqrt(maximum(1.0 - r * r, 0.0))   # r * r may round above 1 at the ends
    return i0e(u) / i0e(beta) * exp(_abs(u) - _abs(beta))


# ----------------------------------------------- modified Bessel functions (vg.scipy.special's)

# Abramowitz & Stegun 9.8.1-9.8.4, t = x / 3.75: the series in t^2 below 3.75 (absolute error
# < 1.6e-7 for I0, < 8e-9 for I1 / x), and sqrt(x) exp(-x) I(x) in 1 / t above it (< 2.2e-7)
_I0_SMALL = (0.0045813, 0.0360768, 0.2659732, 1.2067492, 3.0899424, 3.5156229, 1.0)
_I0_LARGE = (0.00392377, -0.01647633, 0.02635537, -0.02057706, 0.00916281, -0.00157565,
             0.00225319, 0.01328592, 0.39894228)
_I1_SMALL = (0.00032411, 0.00301532, 0.02658733, 0.15084934, 0.51498869, 0.87890594, 0.5)
_I1_LARGE = (-0.00420059, 0.01787654, -0.02895312, 0.02282967, -0.01031555, 0.00163801,
             -0.00362018, -0.03988024, 0.39894228)


def _bessel_i(x, small, large, odd):
    """exp(-|x|) I(x) for I0 (odd False) or I1 (odd True), each branch fed a value in its
    domain (the one not taken stays finite)."""
    x = as_float(x)
    ax = _abs(x)
    near = ax <= 3.75
    ts = where(near, ax, 0.0) / 3.75
    s = horner(small, ts * ts) * exp(-ax)
    if odd:
        s = s * where(near, x, 0.0)
    far = where(near, 3.75, ax)
    big = horner(large, 3.75 / far) / sqrt(far)
    if odd:
        big = sign(x) * big
    return where(near, s, big)


def i0e(x):
    """exp(-|x|) I0(x), the modified Bessel function of order 0 scaled."""
    return _bessel_i(x, _I0_SMALL, _I0_LARGE, False)


def i0(x):
    """I0(x), the modified Bessel function of the first kind of order 0 (jnp.i0, and
    vg.scipy.special.i0), in a float dtype."""
    return i0e(x) * exp(_abs(as_float(x)))


def i1e(x):
    """exp(-|x|) I1(x), the modified Bessel function of order 1 scaled."""
    return _bessel_i(x, _I1_SMALL, _I1_LARGE, True)


def i1(x):
    """I1(x), the modified Bessel function of the first kind of order 1."""
    return i1e(x) * exp(_abs(as_float(x)))


__all__ = ["bartlett", "blackman", "hamming", "hanning", "i0", "kaiser"]
