"""vg.scipy.stats: distributions as modules of functions, as jax.scipy.stats (each module JAX's
function list, loc and scale where JAX has them): continuous `beta cauchy chi2 expon gamma
gennorm gumbel_l gumbel_r laplace logistic norm pareto t truncnorm uniform vonmises wrapcauchy`
and `dirichlet multivariate_normal`, discrete `bernoulli betabinom binom geom multinomial nbinom
poisson`; `gaussian_kde`, and the sample functions `mode rankdata sem`."""

from vkgrad.scipy.stats import (bernoulli, beta, betabinom, binom, cauchy, chi2,  # noqa: F401
                                dirichlet, expon, gamma, gennorm, geom, gumbel_l, gumbel_r,
                                laplace, logistic, multinomial, multivariate_normal, nbinom,
                                norm, pareto, poisson, t, truncnorm, uniform, vonmises,
                                wrapcauchy)
from vkgrad.scipy.stats._core import ModeResult, mode, rankdata, sem  # noqa: F401
from vkgrad.scipy.stats.kde import gaussian_kde

__all__ = ["bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon",
           "gamma", "gaussian_kde", "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace",
           "logistic", "mode", "multinomial", "multivariate_normal", "nbinom", "norm", "pareto",
           "poisson", "rankdata", "sem", "t", "truncnorm", "uniform", "vonmises", "wrapcauchy"]
