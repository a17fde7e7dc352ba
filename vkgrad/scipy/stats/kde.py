"""Gaussian kernel density estimation (jax.scipy.stats.gaussian_kde): a pytree of the dataset
(d, n), its weights, the effective sample size neff and the kernel's covariance (the data's,
times the bandwidth factor squared) and its inverse. Real data only (as JAX's)."""

import math

import vkgrad.numpy as vnp
import vkgrad.random as vr
from vkgrad.errors import ArgumentError, DTypeError, ShapeError
from vkgrad.numpy.dtypes import as_float
from vkgrad.numpy.linalg import cholesky_lower
from vkgrad.scipy.linalg import cho_factor, cho_solve
from vkgrad.scipy.special import logsumexp, ndtr
from vkgrad.tracer.core import user_source
from vkgrad.tree_util import register_pytree_node_class

_FIELDS = ("neff", "dataset", "weights", "covariance", "inv_cov")


def _real(x, name):
    x = vnp.asarray(x)
    if "complex" in str(x.dtype):
        raise DTypeError(f"gaussian_kde.{name}: complex data is not supported (as in JAX)",
                         source=user_source())
    return as_float(x)


@register_pytree_node_class
class gaussian_kde:  # noqa: N801  (JAX's name)
    """gaussian_kde(dataset, bw_method=None, weights=None): dataset (d, n) (a 1-D one is d =
    1); bw_method 'scott' (the default: neff^(-1 / (d + 4))), 'silverman', a scalar factor, or
    a callable of the kde giving one; weights (n,), normalized to sum 1."""

    __slots__ = _FIELDS

    def __init__(self, dataset, bw_method=None, weights=None):
        dataset = vnp.atleast_2d(_real(dataset, "__init__"))
        if not dataset.size > 1:
            raise ShapeError("gaussian_kde: the dataset must have more than one element",
                             source=user_source())
        d, n = dataset.shape
        if weights is None:
            weights = vnp.full((n,), 1.0 / n, dtype=dataset.dtype)
        else:
            weights = vnp.atleast_1d(_real(weights, "__init__"))
            if weights.shape != (n,):
                raise ShapeError(f"gaussian_kde: weights must be 1-D with one weight per data "
                                 f"point ({n}), got shape {tuple(weights.shape)}",
                                 source=user_source())
            weights = weights / vnp.sum(weights)
        self.dataset, self.weights = dataset, weights
        self.neff = 1.0 / vnp.sum(weights ** 2)
        if bw_method is None or bw_method == "scott":
            factor = self.neff ** (-1.0 / (d + 4))
        elif bw_method == "silverman":
            factor = (self.neff * (d + 2) / 4.0) ** (-1.0 / (d + 4))
        elif callable(bw_method):
            factor = bw_method(self)
        elif not isinstance(bw_method, str) and vnp.ndim(bw_method) == 0:
            factor = bw_method
        else:
            raise ArgumentError("gaussian_kde: bw_method should be 'scott', 'silverman', a "
                                "scalar, or a callable", source=user_source())
        data_cov = vnp.atleast_2d(vnp.cov(dataset, rowvar=True, bias=False, aweights=weights))
        self.covariance = data_cov * factor ** 2
        self.inv_cov = vnp.linalg.inv(data_cov) / factor ** 2

    def tree_flatten(self):
        return tuple(getattr(self, f) for f in _FIELDS), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        kde = cls.__new__(cls)
        for f, c in zip(_FIELDS, children):
            setattr(kde, f, c)
        return kde

    @property
    def d(self):
        return self.dataset.shape[0]

    @property
    def n(self):
        return self.dataset.shape[1]

    def _points(self, points, name):
        """points as (d, m): a (d, m) array, or one point of d coordinates."""
        points = vnp.atleast_2d(_real(points, name))
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return vnp.reshape(points, (self.d, 1))
            raise ShapeError(f"gaussian_kde.{name}: points have dimension {d}, the dataset "
                             f"has dimension {self.d}", source=user_source())
        return points

    def _log_kernels(self, points, name):
        """(m, n): log of the kernel of each data point at each point, without the weights."""
        white = cholesky_lower(self.inv_cov)                    # inv_cov = W W^T
        data = vnp.matmul(self.dataset.T, white)                # (n, d)
        xi = vnp.matmul(self._points(points, name).T, white)    # (m, d)
        log_norm = vnp.sum(vnp.log(vnp.diagonal(white))) - 0.5 * self.d * math.log(2 * math.pi)
        diff = xi[:, None, :] - data[None, :, :]
        return log_norm - 0.5 * vnp.sum(diff * diff, axis=-1)

    def evaluate(self, points):
        """The density at points (d, m) (or one point): shape (m,)."""
        return vnp.sum(self.weights * vnp.exp(self._log_kernels(points, "evaluate")), axis=1)

    __call__ = pdf = evaluate

    def logpdf(self, x):
        """log of the density, as a logsumexp over the data points."""
        return logsumexp(vnp.log(self.weights) + self._log_kernels(x, "logpdf"), axis=1)

    def _convolve(self, cov, mean):
        """The integral of this kde times a normal(mean (d, k), cov): shape (k,)."""
        chol = cho_factor(self.covariance + cov)
        norm = 1.0 / (math.sqrt(2 * math.pi) ** self.d * vnp.prod(vnp.diagonal(chol[0])))
        diff = self.dataset[:, :, None] - mean[:, None, :]      # (d, n, k)
        flat = vnp.reshape(diff, (self.d, -1))
        arg = 0.5 * vnp.reshape(vnp.sum(flat * cho_solve(chol, flat), axis=0), diff.shape[1:])
        return norm * vnp.sum(vnp.exp(-arg) * self.weights[:, None], axis=0)

    def integrate_gaussian(self, mean, cov):
        """The integral of the density times a normal(mean, cov) density."""
        mean, cov = vnp.atleast_1d(vnp.squeeze(as_float(mean))), vnp.atleast_2d(as_float(cov))
        if mean.shape != (self.d,) or cov.shape != (self.d, self.d):
            raise ShapeError(f"gaussian_kde.integrate_gaussian: mean ({self.d},) and cov "
                             f"({self.d}, {self.d}), got {tuple(mean.shape)}, "
                             f"{tuple(cov.shape)}", source=user_source())
        return self._convolve(cov, mean[:, None])[0]

    def integrate_box_1d(self, low, high):
        """The mass between low and high, scalars (a 1-D kde only)."""
        if self.d != 1:
            raise ShapeError("gaussian_kde.integrate_box_1d: only 1-D densities",
                             source=user_source())
        if vnp.ndim(low) != 0 or vnp.ndim(high) != 0:
            raise ShapeError("gaussian_kde.integrate_box_1d: the limits must be scalars",
                             source=user_source())
        sigma = vnp.squeeze(vnp.sqrt(self.covariance))
        low = vnp.squeeze((low - self.dataset) / sigma)
        high = vnp.squeeze((high - self.dataset) / sigma)
        return vnp.sum(self.weights * (ndtr(high) - ndtr(low)))

    def integrate_kde(self, other):
        """The integral of the product of two kdes' densities."""
        if other.d != self.d:
            raise ShapeError(f"gaussian_kde.integrate_kde: the kdes' dimensions differ "
                             f"({self.d}, {other.d})", source=user_source())
        small, large = (self, other) if self.n < other.n else (other, self)
        return vnp.sum(large._convolve(small.covariance, small.dataset) * small.weights)

    def resample(self, key, shape=()):
        """Draws (d, *shape): data points chosen by weight (vg.random.choice) plus normal
        noise of the kernel's covariance (its Cholesky factor times standard normals, as
        jax.random.multivariate_normal)."""
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        ind_key, eps_key = vr.split(key)
        ind = vr.choice(ind_key, self.n, shape=shape, p=self.weights)
        z = vr.normal(eps_key, shape + (self.d,), dtype=self.dataset.dtype)
        eps = vnp.moveaxis(vnp.matmul(z, cholesky_lower(self.covariance).T), -1, 0)
        return vnp.take(self.dataset, ind, axis=1) + eps

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        raise ArgumentError("gaussian_kde.integrate_box: only 1-D box integrations are "
                            "supported (as in JAX); use integrate_box_1d", source=user_source())

    def set_bandwidth(self, bw_method=None):
        raise ArgumentError("gaussian_kde.set_bandwidth: changing the bandwidth is not "
                            "supported (as in JAX); build a new gaussian_kde",
                            source=user_source())


__all__ = ["gaussian_kde"]
