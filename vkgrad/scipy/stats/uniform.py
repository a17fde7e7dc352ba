"""The uniform distribution (jax.scipy.stats.uniform) on [loc, loc + scale]; logpdf -inf
outside it."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.stats._common import nan_where, not_probability


def logpdf(x, loc=0.0, scale=1.0):
    x = vnp.asarray(x)
    outside = (x > loc + vnp.asarray(scale)) | (x < loc)
    return vnp.where(outside, -math.inf, -vnp.log(scale))


def pdf(x, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    """0 below loc, 1 above loc + scale, (x - loc) / scale between (and 0 at a nan x, as
    JAX's select of no true case)."""
    x = vnp.asarray(x)
    top = loc + vnp.asarray(scale)
    return vnp.select([x < loc, x > top, (x >= loc) & (x <= top)],
                      [0.0, 1.0, (x - loc) / scale])


def ppf(q, loc=0.0, scale=1.0):
    """loc + scale q; nan for q outside [0, 1]."""
    return nan_where(not_probability(q), loc + scale * vnp.asarray(q))


__all__ = ["cdf", "logpdf", "pdf", "ppf"]
