"""The chi-squared distribution (jax.scipy.stats.chi2): a gamma of shape df / 2, scale 2."""

from vkgrad.scipy.stats import gamma


def logpdf(x, df, loc=0.0, scale=1.0):
    return gamma.logpdf(x, df / 2.0, loc, 2.0 * scale)


def pdf(x, df, loc=0.0, scale=1.0):
    return gamma.pdf(x, df / 2.0, loc, 2.0 * scale)


def cdf(x, df, loc=0.0, scale=1.0):
    return gamma.cdf(x, df / 2.0, loc, 2.0 * scale)


def logcdf(x, df, loc=0.0, scale=1.0):
    return gamma.logcdf(x, df / 2.0, loc, 2.0 * scale)


def sf(x, df, loc=0.0, scale=1.0):
    return gamma.sf(x, df / 2.0, loc, 2.0 * scale)


def logsf(x, df, loc=0.0, scale=1.0):
    return gamma.logsf(x, df / 2.0, loc, 2.0 * scale)


__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]
