"""The wrapped Cauchy distribution (jax.scipy.stats.wrapcauchy) on [0, 2 pi]: density
(1 - c^2) / (2 pi (1 + c^2 - 2 c cos x)); -inf outside [0, 2 pi], nan unless 0 < c < 1."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.stats._common import nan_where


def logpdf(x, c):
    x, c = vnp.asarray(x), vnp.asarray(c)
    val = (vnp.log(1.0 - c * c) - math.log(2 * math.pi)
           - vnp.log(1.0 + c * c - 2.0 * c * vnp.cos(x)))
    inside = (x >= 0) & (x <= 2 * math.pi)
    return nan_where(~((c > 0) & (c < 1)), vnp.where(inside, val, -math.inf))


def pdf(x, c):
    return vnp.exp(logpdf(x, c))


__all__ = ["logpdf", "pdf"]
