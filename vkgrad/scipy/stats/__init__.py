"""vg.scipy.stats: distributions as modules of functions, as jax.scipy.stats: norm (pdf, logpdf,
cdf, logcdf, sf, logsf, ppf), gamma, beta, chi2 (pdf, logpdf, cdf, logcdf, sf, logsf), t (pdf,
logpdf, cdf), dirichlet (pdf, logpdf), poisson (pmf, logpmf, cdf), multivariate_normal (pdf,
logpdf)."""

from vkgrad.scipy.stats import (beta, chi2, dirichlet, gamma, multivariate_normal,  # noqa: F401
                                norm, poisson, t)

__all__ = ["beta", "chi2", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"]
