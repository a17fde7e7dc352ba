"""Student's t distribution (jax.scipy.stats.t): z = (x - loc) / scale, df degrees of freedom."""

import math

import vkgrad.numpy as vnp
from vkgrad.scipy.special import _betainc, _broadcast_float, _jvp_rule, gammaln
from vkgrad.transforms import custom_jvp


def logpdf(x, df, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    return (gammaln((df + 1.0) / 2.0) - gammaln(df / 2.0) - 0.5 * vnp.log(df * math.pi)
            - vnp.log(scale) - (df + 1.0) / 2.0 * vnp.log1p(z * z / df))


def pdf(x, df, loc=0.0, scale=1.0):
    return vnp.exp(logpdf(x, df, loc, scale))


def _cdf_standard(z, df):
    """1 - I_(df / (df + z^2))(df / 2, 1 / 2) / 2 for z >= 0, the mirror image below: each
    tail from the incomplete beta directly (its relative precision kept); betainc's
    composition, without its derivative rule (_cdf's rule differentiates this in df)."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + z * z))
    return vnp.where(z < 0, tail, 1.0 - tail)


@custom_jvp
def _cdf(df, z):
    return _cdf_standard(z, df)


# d/dz is the pdf (the chain rule through betainc's x would meet inf * 0 at z = 0)
_cdf.defjvp(_jvp_rule(lambda df, z: _cdf_standard(z, df), lambda df, z: vnp.exp(logpdf(z, df))))


def cdf(x, df, loc=0.0, scale=1.0):
    return _cdf(*_broadcast_float(df, (x - loc) / scale))


__all__ = ["cdf", "logpdf", "pdf"]
