"""The von Mises distribution (jax.scipy.stats.vonmises) on the circle: density exp(kappa
cos x) / (2 pi I0(kappa)), written with i0e so it does not overflow; nan where kappa <= 0
(JAX's; scipy's kappa = 0 is the uniform)."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import i0e
from vkgrad.scipy.stats._common import nan_where


def logpdf(x, kappa):
    kappa = vnp.asarray(kappa)
    return nan_where(kappa <= 0, kappa * (vnp.cos(x) - 1.0) - vnp.log(2 * math.pi * i0e(kappa)))


def pdf(x, kappa):
    return vnp.exp(logpdf(x, kappa))


__all__ = ["logpdf", "pdf"]
