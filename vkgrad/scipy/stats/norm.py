"""The normal distribution (jax.scipy.stats.norm): z = (x - loc) / scale."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import log_ndtr, ndtr, ndtri

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def logpdf(x, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    return -0.5 * z * z - vnp.log(scale) - _LOG_SQRT_2PI


def pdf(x, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    return ndtr((x - loc) / scale)


def logcdf(x, loc=0.0, scale=1.0):
    return log_ndtr((x - loc) / scale)


def sf(x, loc=0.0, scale=1.0):
    return ndtr((loc - x) / scale)


def logsf(x, loc=0.0, scale=1.0):
    return log_ndtr((loc - x) / scale)


def ppf(q, loc=0.0, scale=1.0):
    return ndtri(q) * scale + loc


def isf(q, loc=0.0, scale=1.0):
    """ppf(1 - q)."""
    return ppf(1.0 - vnp.asarray(q), loc, scale)


__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]
