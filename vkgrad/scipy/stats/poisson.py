"""The Poisson distribution (jax.scipy.stats.poisson): rate mu, counts k - loc; -inf where k -
loc is negative or not an integer."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import gammaincc, gammaln, xlogy


def logpmf(k, mu, loc=0):
    k = vnp.asarray(k) - loc
    inside = (k >= 0) & (k == vnp.floor(k))
    k = vnp.where(inside, k, 0.0)
    return vnp.where(inside, xlogy(k, mu) - gammaln(k + 1.0) - mu, -math.inf)


def pmf(k, mu, loc=0):
    return vnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """P(K <= k) = gammaincc(floor(k - loc) + 1, mu); 0 below loc (JAX's)."""
    k = vnp.asarray(k) - loc
    return vnp.where(k < 0, 0.0, gammaincc(vnp.floor(vnp.maximum(k, 0.0)) + 1.0, mu))


__all__ = ["cdf", "logpmf", "pmf"]
