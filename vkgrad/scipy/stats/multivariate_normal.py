"""The multivariate normal distribution (jax.scipy.stats.multivariate_normal): x (..., n), mean
(n,), cov (n, n) positive definite, through its Cholesky factor L: logpdf = -|L^-1 (x -
mean)|^2 / 2 - sum(log diag L) - n log(2 pi) / 2."""

import math

import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.numpy.linalg import cholesky_lower, solve_triangular
from vkgrad.tracer.core import user_source


def logpdf(x, mean, cov, allow_singular=None):
    if allow_singular:
        raise ArgumentError("multivariate_normal.logpdf: allow_singular=True is not supported "
                            "(as in JAX)", source=user_source())
    x, mean, cov = vnp.asarray(x), vnp.asarray(mean), vnp.asarray(cov)
    if mean.ndim != 1 or cov.shape != (mean.shape[0],) * 2 or x.shape[-1:] != mean.shape:
        raise ShapeError(f"multivariate_normal.logpdf: x (..., n), mean (n,) and cov (n, n), got "
                         f"{tuple(x.shape)}, {tuple(mean.shape)}, {tuple(cov.shape)}",
                         source=user_source())
    n = mean.shape[0]
    L = cholesky_lower(cov)
    d = vnp.reshape(x - mean, (-1, n)).T                       # (n, rows)
    y = solve_triangular(L, d, lower=True)
    quad = vnp.reshape(vnp.sum(y * y, axis=0), x.shape[:-1])
    return -0.5 * quad - vnp.sum(vnp.log(vnp.diagonal(L))) - 0.5 * n * math.log(2 * math.pi)


def pdf(x, mean, cov, allow_singular=None):
    return vnp.exp(logpdf(x, mean, cov, allow_singular))


__all__ = ["logpdf", "pdf"]
