"""The gamma distribution (jax.scipy.stats.gamma): shape a, y = (x - loc) / scale; -inf
outside y >= 0."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import gammaln, xlogy


def logpdf(x, a, loc=0.0, scale=1.0):
    y = (x - loc) / scale
    inside = y >= 0
    y = vnp.where(inside, y, 1.0)   # the branch not taken stays finite (no nan gradient)
    return vnp.where(inside, xlogy(a - 1.0, y) - y - gammaln(a) - vnp.log(scale), -math.inf)


def pdf(x, a, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, a, loc, scale))


__all__ = ["logpdf", "pdf"]
