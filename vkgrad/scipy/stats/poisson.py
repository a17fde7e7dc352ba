"""The Poisson distribution (jax.scipy.stats.poisson): rate mu, counts k - loc; -inf where k -
loc is negative or not an integer."""

import math

import vkgrad.numpy as vnp
from vkgrad.numpy.dtypes import as_float
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


def _entropy_sum(mu, terms, upper):
    """-sum p log p over the first `terms` counts (those below `upper` kept)."""
    k = vnp.arange(terms, dtype=mu.dtype)[:, None]
    p = vnp.where(k < upper[None, :], pmf(k, mu[None, :]), 0.0)
    return -vnp.sum(xlogy(p, p), axis=0)


def entropy(mu, loc=0):
    """JAX's: the sum over 35 counts for mu < 10, 250 for mu < 100, the asymptotic
    log(2 pi e mu) / 2 - 1 / (12 mu) above; 0 at mu = 0. Shape: mu's and loc's broadcast (loc
    shifts nothing)."""
    mu = as_float(mu)
    shape = vnp.broadcast_shapes(mu.shape, vnp.shape(loc))
    m = vnp.ravel(mu)
    # each branch sees a safe mu where it is not taken (no nan gradient)
    small = vnp.where((m > 0) & (m < 10), m, 5.0)
    mid = vnp.where((m >= 10) & (m < 100), m, 50.0)
    big = vnp.where(m < 100, 100.0, m)
    result = vnp.where(
        m == 0, 0.0, vnp.where(
            m < 10, _entropy_sum(small, 35, vnp.ceil(small + 20.0)), vnp.where(
                m < 100, _entropy_sum(mid, 250, vnp.ceil(mid + 10.0 * vnp.sqrt(mid) + 20.0)),
                0.5 * vnp.log(2 * math.pi * math.e * big) - 1.0 / (12.0 * big))))
    return vnp.broadcast_to(vnp.reshape(result, mu.shape), shape)


__all__ = ["cdf", "entropy", "logpmf", "pmf"]
