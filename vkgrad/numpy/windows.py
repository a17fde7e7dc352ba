"""jnp's window functions: hanning, hamming, blackman, bartlett, kaiser, each M points (an int;
a float is truncated, as JAX's int(M)) in float32, symmetric, 1 at the centre; compositions of
cos over n = 1 - M, 3 - M, ..., M - 1 (numpy's and JAX's formulas), kaiser of I0, which is here
too as jnp.i0 (beside kaiser, as in JAX's lax_numpy)."""

from __future__ import annotations

import math

from vkgrad.numpy.creation import arange, ones
from vkgrad.numpy.dtypes import as_float
from vkgrad.numpy.ufuncs import abs as _abs
from vkgrad.numpy.ufuncs import cos, exp, sqrt
from vkgrad.numpy.util import nonnegative_int


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


def i0(x):
    """I0(x), the modified Bessel function of the first kind of order 0 (jnp.i0, in a float
    dtype): vg.scipy.special.i0's composition, exp(|x|) i0e(x)."""
    from vkgrad.scipy.special import i0 as _i0     # vg.scipy.special is built on this package
    return _i0(as_float(x))


def kaiser(M, beta):
    """The Kaiser window I0(beta sqrt(1 - (2k / (M - 1) - 1)^2)) / I0(beta), k = 0 ... M - 1
    (jnp.kaiser; beta may be traced): as i0e(u) / i0e(beta) exp(u - beta), which does not
    overflow for a large beta."""
    from vkgrad.scipy.special import i0e     # vg.scipy.special is built on this package
    M = nonnegative_int(M, "kaiser", "M", truncate=True)
    if M <= 1:
        return ones((M,))
    beta = as_float(beta)
    alpha = 0.5 * (M - 1)
    r = (arange(0.0, M) - alpha) / alpha              # exactly -1 and 1 at the ends
    u = beta * sqrt(1.0 - r * r)
    return i0e(u) / i0e(beta) * exp(_abs(u) - _abs(beta))


__all__ = ["bartlett", "blackman", "hamming", "hanning", "i0", "kaiser"]
