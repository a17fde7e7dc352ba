"""The beta-binomial distribution (jax.scipy.stats.betabinom): n trials, beta(a, b) success
probability, counts y = floor(k) - loc; -inf outside 0 <= y <= n, nan for n < 0, a <= 0 or
b <= 0."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import betaln
from vkgrad.scipy.stats._common import nan_where


def logpmf(k, n, a, b, loc=0):
    y = vnp.floor(vnp.asarray(k)) - loc
    inside = (y >= 0) & (y <= n) & (y + a > 0)
    y = vnp.where(inside, y, 0.0)   # the branch not taken stays finite (no nan gradient)
    comb = -(vnp.log1p(n) + betaln(n - y + 1.0, y + 1.0))
    logp = vnp.where((y == 0) & (n == 0), 0.0, comb + betaln(y + a, n - y + b) - betaln(a, b))
    return nan_where((n < 0) | (a <= 0) | (b <= 0), vnp.where(inside, logp, -math.inf))


def pmf(k, n, a, b, loc=0):
    return vnp.exp(logpmf(k, n, a, b, loc))


__all__ = ["logpmf", "pmf"]
