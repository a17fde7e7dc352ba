"""The geometric distribution (jax.scipy.stats.geom): the trial of the first success, k - loc
= 1, 2, ...; -inf for k - loc <= 0."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import xlog1py


def logpmf(k, p, loc=0):
    x = vnp.asarray(k) - loc
    return vnp.where(x <= 0, -math.inf, xlog1py(x - 1.0, -vnp.asarray(p)) + vnp.log(p))


def pmf(k, p, loc=0):
    return vnp.exp(logpmf(k, p, loc))


__all__ = ["logpmf", "pmf"]
