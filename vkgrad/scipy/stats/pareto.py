"""The Pareto distribution (jax.scipy.stats.pareto): shape b, y = (x - loc) / scale >= 1;
logpdf -inf (cdf 0, sf 1) below loc + scale."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.stats._common import nan_where, not_probability, standardize


def _log_y(x, loc, scale):
    """(inside the support, log y), log y kept finite outside (no nan gradient)."""
    inside = ~(vnp.asarray(x) < loc + vnp.asarray(scale))
    return inside, vnp.log(vnp.where(inside, standardize(x, loc, scale), 1.0))


def logpdf(x, b, loc=0.0, scale=1.0):
    inside, log_y = _log_y(x, loc, scale)
    return vnp.where(inside, -(vnp.log(scale / vnp.asarray(b)) + (b + 1.0) * log_y), -math.inf)


def pdf(x, b, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, b, loc, scale))


def cdf(x, b, loc=0.0, scale=1.0):
    """1 - y^-b."""
    inside, log_y = _log_y(x, loc, scale)
    return vnp.where(inside, -vnp.expm1(-vnp.asarray(b) * log_y), 0.0)


def logcdf(x, b, loc=0.0, scale=1.0):
    inside, log_y = _log_y(x, loc, scale)
    return vnp.where(inside, vnp.log1p(-vnp.exp(-vnp.asarray(b) * log_y)), -math.inf)


def logsf(x, b, loc=0.0, scale=1.0):
    inside, log_y = _log_y(x, loc, scale)
    return vnp.where(inside, -vnp.asarray(b) * log_y, 0.0)


def sf(x, b, loc=0.0, scale=1.0):
    return vnp.exp(logsf(x, b, loc, scale))


def ppf(q, b, loc=0.0, scale=1.0):
    """loc + scale (1 - q)^(-1 / b); nan for q outside [0, 1]."""
    q = vnp.asarray(q)
    return nan_where(not_probability(q), loc + scale * (1.0 - q) ** (-1.0 / vnp.asarray(b)))


__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]
