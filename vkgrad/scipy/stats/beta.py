"""The beta distribution (jax.scipy.stats.beta): shapes a, b, y = (x - loc) / scale; -inf
outside 0 <= y <= 1."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import betainc, betaln, xlog1py, xlogy


def logpdf(x, a, b, loc=0.0, scale=1.0):
    y = (x - loc) / scale
    inside = (y >= 0) & (y <= 1)
    y = vnp.where(inside, y, 0.5)   # the branch not taken stays finite (no nan gradient)
    return vnp.where(inside, xlogy(a - 1.0, y) + xlog1py(b - 1.0, -y) - betaln(a, b)
                     - vnp.log(scale), -math.inf)


def pdf(x, a, b, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0.0, scale=1.0):
    """betainc(a, b, y), y clipped into [0, 1]."""
    return betainc(a, b, vnp.clip((x - loc) / scale, 0.0, 1.0))


def logcdf(x, a, b, loc=0.0, scale=1.0):
    return vnp.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0.0, scale=1.0):
    """I_(1-y)(b, a): the upper tail from its own fraction, not as 1 - cdf."""
    return betainc(b, a, 1.0 - vnp.clip((x - loc) / scale, 0.0, 1.0))


def logsf(x, a, b, loc=0.0, scale=1.0):
    return vnp.log(sf(x, a, b, loc, scale))


__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]
