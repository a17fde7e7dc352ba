"""The exponential distribution (jax.scipy.stats.expon): rate 1 / scale from loc; -inf
logpdf below loc."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.stats._common import nan_where, not_probability


def logpdf(x, loc=0.0, scale=1.0):
    x = vnp.asarray(x)
    return vnp.where(x < loc, -math.inf, -((x - loc) / scale + vnp.log(scale)))


def pdf(x, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    """-expm1(-(x - loc) / scale), 0 below loc."""
    x = vnp.asarray(x)
    return vnp.where(x < loc, 0.0, -vnp.expm1((loc - x) / scale))


def logcdf(x, loc=0.0, scale=1.0):
    return vnp.log1p(-sf(x, loc, scale))


def logsf(x, loc=0.0, scale=1.0):
    x = vnp.asarray(x)
    return vnp.where(x < loc, 0.0, (loc - x) / scale)


def sf(x, loc=0.0, scale=1.0):
    return vnp.exp(logsf(x, loc, scale))


def ppf(q, loc=0.0, scale=1.0):
    """loc - scale log1p(-q); nan for q outside [0, 1]."""
    return nan_where(not_probability(q), loc - scale * vnp.log1p(-vnp.asarray(q)))


__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]
