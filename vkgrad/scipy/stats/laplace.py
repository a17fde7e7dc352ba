"""The Laplace distribution (jax.scipy.stats.laplace): density exp(-|x - loc| / scale) /
(2 scale)."""

import vkgrad.numpy as vnp


def logpdf(x, loc=0.0, scale=1.0):
    return -(vnp.abs(vnp.asarray(x) - loc) / scale + vnp.log(2.0 * vnp.asarray(scale)))


def pdf(x, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    """e^z / 2 for z <= 0, 1 - e^-z / 2 above (each exp of -|z|, so neither overflows)."""
    z = (vnp.asarray(x) - loc) / scale
    half_tail = 0.5 * vnp.exp(-vnp.abs(z))
    return vnp.where(z <= 0, half_tail, 1.0 - half_tail)


__all__ = ["cdf", "logpdf", "pdf"]
