"""The multinomial distribution (jax.scipy.stats.multinomial): integer counts x (..., K) of n
draws with probabilities p (K,); -inf where the counts do not add up to n.
One difference from JAX: each row of a batch of x is checked against n by its own sum (as
scipy's); JAX's compares the sum of the whole batch."""

import math

import vkgrad.numpy as vnp
from vkgrad.errors import DTypeError
from vkgrad.numpy.dtypes import as_float, dtype_of
from vkgrad.scipy.special import gammaln, xlogy
from vkgrad.tracer.core import user_source


def logpmf(x, n, p):
    x, n, p = vnp.asarray(x), vnp.asarray(n), as_float(p)
    if dtype_of(x) != "i32" or dtype_of(n) != "i32":
        raise DTypeError(f"multinomial.logpmf: x and n must be of integer type, got x "
                         f"{x.dtype}, n {n.dtype}", source=user_source())
    total = vnp.sum(x, axis=-1)
    x, n = vnp.astype(x, dtype_of(p)), vnp.astype(n, dtype_of(p))
    logp = gammaln(n + 1.0) + vnp.sum(xlogy(x, p) - gammaln(x + 1.0), axis=-1)
    return vnp.where(total == n, logp, -math.inf)


def pmf(x, n, p):
    return vnp.exp(logpmf(x, n, p))


__all__ = ["logpmf", "pmf"]
