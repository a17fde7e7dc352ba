"""The Cauchy distribution (jax.scipy.stats.cauchy): z = (x - loc) / scale."""

import math

import vkgrad.numpy as vnp


def logpdf(x, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    return -(vnp.log(math.pi * vnp.asarray(scale)) + vnp.log1p(z * z))


def pdf(x, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    return 0.5 + vnp.arctan((x - loc) / scale) / math.pi


def logcdf(x, loc=0.0, scale=1.0):
    return vnp.log(cdf(x, loc, scale))


def sf(x, loc=0.0, scale=1.0):
    """cdf mirrored: cdf(-x, -loc, scale)."""
    return cdf(-vnp.asarray(x), -vnp.asarray(loc), scale)


def logsf(x, loc=0.0, scale=1.0):
    return logcdf(-vnp.asarray(x), -vnp.asarray(loc), scale)


def ppf(q, loc=0.0, scale=1.0):
    return vnp.tan(math.pi * vnp.asarray(q) - math.pi / 2) * scale + loc


def isf(q, loc=0.0, scale=1.0):
    return vnp.tan(math.pi / 2 - math.pi * vnp.asarray(q)) * scale + loc


__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]
