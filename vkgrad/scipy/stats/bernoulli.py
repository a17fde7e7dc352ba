"""The Bernoulli distribution (jax.scipy.stats.bernoulli): P(k - loc = 1) = p; logpmf -inf
outside 0 <= k - loc <= 1 (between 0 and 1 the formula's value, as JAX's)."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import xlog1py, xlogy
from vkgrad.scipy.stats._common import nan_where, not_probability


def logpmf(k, p, loc=0):
    x = vnp.asarray(k) - loc
    return vnp.where((x < 0) | (x > 1), -math.inf, xlogy(x, p) + xlog1py(1.0 - x, -p))


def pmf(k, p, loc=0):
    return vnp.exp(logpmf(k, p, loc))


def cdf(k, p):
    """0 below 0, 1 - p on [0, 1), 1 from 1; nan for a nan k or a p outside [0, 1]."""
    k, p = vnp.asarray(k), vnp.asarray(p)
    value = vnp.where(k < 0, 0.0, vnp.where(k < 1, 1.0 - p, 1.0))
    return nan_where(vnp.isnan(k) | not_probability(p), value)


def ppf(q, p):
    """0 for q <= 1 - p, else 1; nan for q or p outside [0, 1]."""
    q, p = vnp.asarray(q), vnp.asarray(p)
    return nan_where(not_probability(q) | not_probability(p), vnp.where(q <= 1.0 - p, 0.0, 1.0))


__all__ = ["cdf", "logpmf", "pmf", "ppf"]
