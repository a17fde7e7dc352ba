"""The gamma distribution (jax.scipy.stats.gamma): shape a, y = (x - loc) / scale; -inf
outside y >= 0."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import gammainc, gammaincc, gammaln, xlogy


def logpdf(x, a, loc=0.0, scale=1.0):
    y = (x - loc) / scale
    inside = y >= 0
    y = vnp.where(inside, y, 1.0)   # the branch not taken stays finite (no nan gradient)
    return vnp.where(inside, xlogy(a - 1.0, y) - y - gammaln(a) - vnp.log(scale), -math.inf)


def pdf(x, a, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0.0, scale=1.0):
    """gammainc(a, y), y clipped at 0 (0 below the support)."""
    return gammainc(a, vnp.maximum((x - loc) / scale, 0.0))


def logcdf(x, a, loc=0.0, scale=1.0):
    return vnp.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0.0, scale=1.0):
    """gammaincc(a, y), computed directly (its upper tail keeps its relative precision)."""
    return gammaincc(a, vnp.maximum((x - loc) / scale, 0.0))


def logsf(x, a, loc=0.0, scale=1.0):
    return vnp.log(sf(x, a, loc, scale))


__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]
