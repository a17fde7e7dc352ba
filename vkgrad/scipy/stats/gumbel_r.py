"""The right-skewed Gumbel distribution (jax.scipy.stats.gumbel_r, of maxima): z = (x - loc) /
scale, cdf exp(-e^-z); nan where scale <= 0, and ppf nan outside 0 < p < 1 (JAX's)."""

import vkgrad.numpy as vnp
from vkgrad import nn
from vkgrad.scipy.stats._common import nan_where, standardize


def logpdf(x, loc=0.0, scale=1.0):
    z = standardize(x, loc, scale)
    return nan_where(vnp.asarray(scale) <= 0, -(z + vnp.exp(-z)) - vnp.log(scale))


def pdf(x, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0.0, scale=1.0):
    z = standardize(x, loc, scale)
    return nan_where(vnp.asarray(scale) <= 0, -vnp.exp(-z))


def cdf(x, loc=0.0, scale=1.0):
    return vnp.exp(logcdf(x, loc, scale))


def sf(x, loc=0.0, scale=1.0):
    """-expm1(-e^-z): JAX's 1 - exp(-e^-z), its upper tail kept."""
    z = standardize(x, loc, scale)
    return nan_where(vnp.asarray(scale) <= 0, -vnp.expm1(-vnp.exp(-z)))


def logsf(x, loc=0.0, scale=1.0):
    """log1mexp(e^-z) (vg.nn.log1mexp, as JAX's)."""
    z = standardize(x, loc, scale)
    return nan_where(vnp.asarray(scale) <= 0, nn.log1mexp(vnp.exp(-z)))


def ppf(p, loc=0.0, scale=1.0):
    """loc - scale log(-log p)."""
    p = vnp.asarray(p)
    return nan_where(~((p > 0) & (p < 1)), loc - scale * vnp.log(-vnp.log(p)))


__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]
