"""Student's t distribution (jax.scipy.stats.t): z = (x - loc) / scale, df degrees of freedom."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import gammaln


def logpdf(x, df, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    return (gammaln((df + 1.0) / 2.0) - gammaln(df / 2.0) - 0.5 * vnp.log(df * math.pi)
            - vnp.log(scale) - (df + 1.0) / 2.0 * vnp.log1p(z * z / df))


def pdf(x, df, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, df, loc, scale))


__all__ = ["logpdf", "pdf"]
