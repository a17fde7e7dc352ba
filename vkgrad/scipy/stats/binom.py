"""The binomial distribution (jax.scipy.stats.binom): n trials of probability p, counts y =
k - loc; -inf outside 0 <= y < n + 1 (a non-integer y inside gets the gamma function's
interpolation, as JAX's)."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import gammaln, xlog1py, xlogy


def logpmf(k, n, p, loc=0):
    y = vnp.asarray(k) - loc
    inside = (y >= 0) & (y < n + 1)
    y = vnp.where(inside, y, 0.0)   # the branch not taken stays finite (no nan gradient)
    comb = gammaln(n + 1.0) - (gammaln(y + 1.0) + gammaln(n - y + 1.0))
    linear = xlogy(y, p) + xlog1py(n - y, -p)
    # a certain outcome (no trials, or p at 0 or 1 with y at its end) is exactly log 1
    logp = vnp.where(((y == 0) & (n == 0)) | (linear == 0), 0.0, comb + linear)
    return vnp.where(inside, logp, -math.inf)


def pmf(k, n, p, loc=0):
    return vnp.exp(logpmf(k, n, p, loc))


__all__ = ["logpmf", "pmf"]
