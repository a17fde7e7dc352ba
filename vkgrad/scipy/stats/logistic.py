"""The logistic distribution (jax.scipy.stats.logistic): z = (x - loc) / scale, cdf
expit(z)."""

import vkgrad.numpy as vnp
from vkgrad.scipy.special import expit, logit
from vkgrad.scipy.stats._common import standardize


def logpdf(x, loc=0.0, scale=1.0):
    """-2 logaddexp(z / 2, -z / 2) - log scale (no overflow for large |z|)."""
    half = standardize(x, loc, scale) / 2.0
    return -2.0 * vnp.logaddexp(half, -half) - vnp.log(scale)


def pdf(x, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    return expit(standardize(x, loc, scale))


def sf(x, loc=0.0, scale=1.0):
    return expit(-standardize(x, loc, scale))


def ppf(x, loc=0.0, scale=1.0):
    return logit(x) * scale + loc


def isf(x, loc=0.0, scale=1.0):
    return -logit(x) * scale + loc


__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]
