"""vg.scipy: JAX's jax.scipy names over vkgrad.numpy (compositions, so every function is
traceable, jit-able and differentiable).

    special   logsumexp, erf, erfc, erfinv, expit, logit, xlogy, xlog1py, gammaln, digamma,
              ndtr, ndtri, log_ndtr
    stats     stats.norm: pdf, logpdf, cdf, logcdf, sf, logsf, ppf
"""

from vkgrad.scipy import special, stats  # noqa: F401

__all__ = ["special", "stats"]
