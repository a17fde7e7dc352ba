"""The Dirichlet distribution (jax.scipy.stats.dirichlet): x on the simplex along axis 0 (shape
(K,) or (K, N)), concentrations alpha (K,); -inf off the simplex (a negative entry, or a sum
not close to 1)."""

import math

import numpy as np

import vkgrad.numpy as vnp
from vkgrad.errors import ShapeError
from vkgrad.scipy.special import gammaln, xlogy
from vkgrad.tracer.core import user_source


def logpdf(x, alpha):
    x, alpha = vnp.asarray(x), vnp.asarray(alpha)
    if alpha.ndim != 1 or x.shape[:1] != alpha.shape:
        raise ShapeError(f"dirichlet.logpdf: alpha must be 1-D and x's first axis as long as it "
                         f"(x {tuple(x.shape)}, alpha {tuple(alpha.shape)})",
                         source=user_source())
    a = alpha.reshape(alpha.shape + (1,) * (x.ndim - 1))
    norm = gammaln(vnp.sum(alpha)) - vnp.sum(gammaln(alpha))
    on = vnp.all(x >= 0, axis=0) & vnp.isclose(vnp.sum(x, axis=0), 1.0)
    return vnp.where(on, norm + vnp.sum(xlogy(a - 1.0, x), axis=0), -math.inf)


def pdf(x, alpha):
    return vnp.exp(logpdf(x, alpha))


def rvs(alpha, size=None, random_state=None):
    """scipy's (and autograd's) sampler, for input data: numpy draws on the host (a numpy
    array of shape size + alpha's). Inside a traced function use keys: vg.random."""
    rng = random_state if isinstance(random_state, np.random.RandomState) else \
        np.random.RandomState(random_state) if random_state is not None else np.random
    return rng.dirichlet(np.asarray(alpha, np.float64), size)


__all__ = ["logpdf", "pdf", "rvs"]
