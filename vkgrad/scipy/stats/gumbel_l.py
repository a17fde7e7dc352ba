"""The left-skewed Gumbel distribution (jax.scipy.stats.gumbel_l, of minima): z = (x - loc) /
scale, cdf 1 - exp(-e^z); nan where scale <= 0, and ppf nan outside 0 < p < 1 (JAX's)."""

import vkgrad.numpy as vnp
from vkgrad.scipy.stats._common import nan_where, standardize


def logpdf(x, loc=0.0, scale=1.0):
    z = standardize(x, loc, scale)
    return nan_where(vnp.asarray(scale) <= 0, z - vnp.exp(z) - vnp.log(scale))


def pdf(x, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0.0, scale=1.0):
    z = standardize(x, loc, scale)
    return nan_where(vnp.asarray(scale) <= 0, vnp.log(-vnp.expm1(-vnp.exp(z))))


def cdf(x, loc=0.0, scale=1.0):
    return vnp.exp(logcdf(x, loc, scale))


def logsf(x, loc=0.0, scale=1.0):
    z = standardize(x, loc, scale)
    return nan_where(vnp.asarray(scale) <= 0, -vnp.exp(z))


def sf(x, loc=0.0, scale=1.0):
    return vnp.exp(logsf(x, loc, scale))


def ppf(p, loc=0.0, scale=1.0):
    """loc + scale log(-log1p(-p))."""
    p = vnp.asarray(p)
    return nan_where(~((p > 0) & (p < 1)), loc + scale * vnp.log(-vnp.log1p(-p)))


__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]
