"""The generalized normal distribution (jax.scipy.stats.gennorm): density beta / (2
Gamma(1 / beta)) exp(-|x|^beta); no loc or scale (JAX's)."""

import vkgrad.numpy as vnp
from vkgrad.scipy.special import gammainc, gammaln


def logpdf(x, beta):
    return vnp.log(0.5 * vnp.asarray(beta)) - gammaln(1.0 / beta) - vnp.abs(x) ** beta


def pdf(x, beta):
    return vnp.exp(logpdf(x, beta))


def cdf(x, beta):
    """(1 + sign(x) P(1 / beta, |x|^beta)) / 2, P the regularized lower incomplete gamma."""
    x = vnp.asarray(x)
    return 0.5 * (1.0 + vnp.sign(x) * gammainc(1.0 / beta, vnp.abs(x) ** beta))


__all__ = ["cdf", "logpdf", "pdf"]
