"""Student's t distribution (jax.scipy.stats.t): z = (x - loc) / scale, df degrees of freedom."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import _broadcast_float, betainc, gammaln
from vkgrad.transforms import custom_jvp, jvp


def logpdf(x, df, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    return (gammaln((df + 1.0) / 2.0) - gammaln(df / 2.0) - 0.5 * vnp.log(df * math.pi)
            - vnp.log(scale) - (df + 1.0) / 2.0 * vnp.log1p(z * z / df))


def pdf(x, df, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, df, loc, scale))


def _cdf_standard(z, df):
    """1 - I_(df / (df + z^2))(df / 2, 1 / 2) / 2 for z >= 0, the mirror image below: each
    tail from the incomplete beta directly (its relative precision kept)."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + z * z))
    return vnp.where(z < 0, tail, 1.0 - tail)


@custom_jvp
def _cdf(z, df):
    return _cdf_standard(z, df)


# d/dz is the pdf (the chain rule through betainc's x would meet inf * 0 at z = 0); d/d df
# differentiates the composition
_cdf.defjvps(lambda t, out, z, df: t * vnp.exp(logpdf(z, df)),
             lambda t, out, z, df: jvp(lambda d: _cdf_standard(z, d), (df,), (t,))[1])


def cdf(x, df, loc=0.0, scale=1.0):
    return _cdf(*_broadcast_float((x - loc) / scale, df))


__all__ = ["cdf", "logpdf", "pdf"]
