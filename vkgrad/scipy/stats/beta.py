"""The beta distribution (jax.scipy.stats.beta): shapes a, b, y = (x - loc) / scale; -inf
outside 0 <= y <= 1."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import betaln, xlog1py, xlogy


def logpdf(x, a, b, loc=0.0, scale=1.0):
    y = (x - loc) / scale
    inside = (y >= 0) & (y <= 1)
    y = vnp.where(inside, y, 0.5)   # the branch not taken stays finite (no nan gradient)
    return vnp.where(inside, xlogy(a - 1.0, y) + xlog1py(b - 1.0, -y) - betaln(a, b)
                     - vnp.log(scale), -math.inf)


def pdf(x, a, b, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, a, b, loc, scale))


__all__ = ["logpdf", "pdf"]
