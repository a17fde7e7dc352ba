"""vg.scipy.stats: distributions as modules of functions, as jax.scipy.stats: norm (pdf, logpdf,
cdf, logcdf, sf, logsf, ppf), t, gamma, beta, chi2, dirichlet (pdf, logpdf), poisson (pmf,
logpmf)."""

from vkgrad.scipy.stats import beta, chi2, dirichlet, gamma, norm, poisson, t  # noqa: F401

__all__ = ["beta", "chi2", "dirichlet", "gamma", "norm", "poisson", "t"]
