"""The truncated normal distribution (jax.scipy.stats.truncnorm): a normal(loc, scale) kept to
a <= (x - loc) / scale <= b; -inf (cdf 0 or 1) outside, nan where a >= b. The mass between the
bounds is computed from whichever tail keeps its precision (JAX's and scipy's
_log_gauss_mass)."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import log_ndtr, logsumexp, ndtr
from vkgrad.scipy.stats import norm
from vkgrad.scipy.stats._common import nan_where, standardize


def _log_diff(x, y):
    """log(e^x - e^y)."""
    return logsumexp(vnp.stack([x, y]), b=vnp.stack([vnp.ones_like(x), -vnp.ones_like(y)]),
                     axis=0)


def _log_gauss_mass(a, b):
    """log(Phi(b) - Phi(a)): for both bounds left of 0 the difference of log_ndtr's, right of
    0 its mirror image, and log1p(-Phi(a) - Phi(-b)) around the centre."""
    a, b = vnp.broadcast_arrays(vnp.asarray(a), vnp.asarray(b))
    right = a > 0
    central = ~((b <= 0) | right)
    tail = _log_diff(log_ndtr(vnp.where(right, -a, b)), log_ndtr(vnp.where(right, -b, a)))
    return vnp.where(central, vnp.log1p(-ndtr(a) - ndtr(-b)), tail)


def logpdf(x, a, b, loc=0.0, scale=1.0):
    z = standardize(x, loc, scale)
    val = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    return nan_where(vnp.asarray(a) >= b, vnp.where((z < a) | (z > b), -math.inf, val))


def pdf(x, a, b, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, a, b, loc, scale))


def logcdf(x, a, b, loc=0.0, scale=1.0):
    """log of the mass from a to z over the whole mass; near 1 (above -0.1) from the mass
    above z instead."""
    x, a, b = vnp.broadcast_arrays(vnp.asarray(x), vnp.asarray(a), vnp.asarray(b))
    z = standardize(x, loc, scale)
    whole = _log_gauss_mass(a, b)
    below, above = _log_gauss_mass(a, z) - whole, _log_gauss_mass(z, b) - whole
    val = vnp.select([z >= b, z <= a, below > -0.1, z > a],
                     [0.0, -math.inf, vnp.log1p(-vnp.exp(above)), below])
    return nan_where(a >= b, val)


def cdf(x, a, b, loc=0.0, scale=1.0):
    return vnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0.0, scale=1.0):
    """logcdf mirrored: logcdf(-x, -b, -a, -loc, scale)."""
    return logcdf(-vnp.asarray(x), -vnp.asarray(b), -vnp.asarray(a), -vnp.asarray(loc), scale)


def sf(x, a, b, loc=0.0, scale=1.0):
    return vnp.exp(logsf(x, a, b, loc, scale))


__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]
