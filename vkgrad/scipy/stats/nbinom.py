"""The negative binomial distribution (jax.scipy.stats.nbinom): failures y = k - loc before
the n-th success of probability p; -inf below loc."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import gammaln, xlogy


def logpmf(k, n, p, loc=0):
    k = vnp.asarray(k)
    inside = k >= loc
    y = vnp.where(inside, k - loc, 0.0)   # the branch not taken stays finite (no nan gradient)
    comb = gammaln(y + n) - gammaln(n) - gammaln(y + 1.0)
    return vnp.where(inside, comb + xlogy(n, p) + xlogy(y, 1.0 - vnp.asarray(p)), -math.inf)


def pmf(k, n, p, loc=0):
    return vnp.exp(logpmf(k, n, p, loc))


__all__ = ["logpmf", "pmf"]
