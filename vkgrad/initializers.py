"""jax.nn.initializers (`vg.nn.initializers`): functions that make an initializer, a function
`init(key, shape, dtype=float32) -> array` drawn with vg.random, with JAX's names, arguments
and formulas (flax's layers take them as `kernel_init=`), so the draws are JAX's wherever
vg.random's draws are (docs/random.md). `orthogonal` and `delta_orthogonal` take the Q of a
normal matrix's QR (vnp.linalg.qr: Householder reflections)."""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from vkgrad import numpy as vnp
from vkgrad import random
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.tracer.core import user_source

__all__ = ["Initializer", "zeros", "ones", "constant", "uniform", "normal", "truncated_normal",
           "variance_scaling", "glorot_uniform", "glorot_normal", "xavier_uniform",
           "xavier_normal", "lecun_uniform", "lecun_normal", "he_uniform", "he_normal",
           "kaiming_uniform", "kaiming_normal", "orthogonal", "delta_orthogonal"]



class Initializer(Protocol):
    """What every initializer here is (jax.nn.initializers.Initializer)."""
    def __call__(self, key, shape, dtype=None): ...


# the standard deviation of a standard normal truncated to (-2, 2) (JAX's constant)
_TRUNCATED_STD = .87962566103423978


def _dtype(dtype):
    return np.float32 if dtype is None else dtype


def zeros(key, shape, dtype=None):
    """An array of zeros (jax.nn.initializers.zeros: itself an initializer)."""
    return vnp.zeros(shape, _dtype(dtype))


def ones(key, shape, dtype=None):
    """An array of ones (jax.nn.initializers.ones)."""
    return vnp.ones(shape, _dtype(dtype))


def constant(value, dtype=None):
    """An initializer filling the shape with value."""
    def init(key, shape, dtype=dtype):
        return vnp.full(shape, value, _dtype(dtype))
    return init


def uniform(scale=1e-2, dtype=None):
    """An initializer drawing uniformly from [0, scale)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return random.uniform(key, shape, dtype) * vnp.asarray(scale, dtype)
    return init


def normal(stddev=1e-2, dtype=None):
    """An initializer drawing from a normal with mean 0 and standard deviation stddev."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return random.normal(key, shape, dtype) * vnp.asarray(stddev, dtype)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer drawing stddev * a standard normal truncated to (lower, upper)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return random.truncated_normal(key, lower, upper, shape, dtype) * \
            vnp.asarray(stddev, dtype)
    return init


def _size(shape, axis) -> int:
    return shape[axis] if isinstance(axis, int) else math.prod(shape[a] for a in axis)


def _fans(shape, in_axis, out_axis, batch_axis) -> tuple:
    """(fan_in, fan_out): the in and out axes' sizes times the receptive field (the other
    axes but the batch axes), as JAX's _compute_fans."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ShapeError(f"variance_scaling: a {len(shape)}-dimensional shape {tuple(shape)} "
                         "has no input axis -2; pass in_axis (and out_axis) explicitly",
                         source=user_source())
    in_size, out_size = _size(shape, in_axis), _size(shape, out_axis)
    field = math.prod(shape) / in_size / out_size / _size(shape, batch_axis)
    return in_size * field, out_size * field


_DENOMINATORS = {"fan_in": lambda i, o: i, "fan_out": lambda i, o: o,
                 "fan_avg": lambda i, o: (i + o) / 2, "fan_geo_avg": lambda i, o: (i * o) ** 0.5}


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """An initializer with variance scale / n, n the fan given by mode ("fan_in", "fan_out",
    "fan_avg", "fan_geo_avg"), drawn from distribution ("truncated_normal", "normal",
    "uniform"), as jax.nn.initializers.variance_scaling."""
    if mode not in _DENOMINATORS:
        raise ArgumentError(f"invalid mode for variance scaling initializer: {mode!r} (expected "
                            f"one of {', '.join(_DENOMINATORS)})", source=user_source())
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ArgumentError(f"invalid distribution for variance scaling initializer: "
                            f"{distribution!r} (expected 'truncated_normal', 'normal' or "
                            "'uniform')", source=user_source())

    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        shape = tuple(shape)
        variance = vnp.asarray(scale / _DENOMINATORS[mode](*_fans(shape, in_axis, out_axis,
                                                                   batch_axis)), dtype)
        if distribution == "truncated_normal":
            stddev = vnp.sqrt(variance) / vnp.asarray(_TRUNCATED_STD, dtype)
            return random.truncated_normal(key, -2, 2, shape, dtype) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dtype) * vnp.sqrt(variance)
        return random.uniform(key, shape, dtype, -1) * vnp.sqrt(3 * variance)
    return init


def _scaling(scale, mode, distribution, name):
    def make(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis, dtype)
    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"variance_scaling({scale}, {mode!r}, {distribution!r}) (jax.nn.initializers.{name})."
    return make


glorot_uniform = xavier_uniform = _scaling(1.0, "fan_avg", "uniform", "glorot_uniform")
glorot_normal = xavier_normal = _scaling(1.0, "fan_avg", "truncated_normal", "glorot_normal")
lecun_uniform = _scaling(1.0, "fan_in", "uniform", "lecun_uniform")
lecun_normal = _scaling(1.0, "fan_in", "truncated_normal", "lecun_normal")
he_uniform = kaiming_uniform = _scaling(2.0, "fan_in", "uniform", "he_uniform")
he_normal = kaiming_normal = _scaling(2.0, "fan_in", "truncated_normal", "he_normal")


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer of (semi-)orthogonal matrices times scale, as jax.nn.initializers'
    orthogonal: the shape's column_axis is the columns, the other axes flattened the rows; the Q
    of a normal matrix's QR (of its transpose where there are fewer rows than columns), its
    columns' signs those of R's diagonal (so the draw is uniform over such matrices)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        shape = tuple(shape)
        if len(shape) < 2:
            raise ShapeError(f"orthogonal initializer requires at least a 2D shape, got {shape}",
                             source=user_source())
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        a = random.normal(key, (n_cols, n_rows) if n_rows < n_cols else (n_rows, n_cols), dtype)
        q, r = vnp.linalg.qr(a)
        q = vnp.multiply(q, vnp.sign(vnp.diag(r)))
        if n_rows < n_cols:
            q = q.T
        q = vnp.reshape(q, tuple(np.delete(shape, column_axis)) + (n_cols,))
        return vnp.multiply(scale, vnp.moveaxis(q, -1, column_axis))
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer of convolution kernels (3-D, 4-D or 5-D, spatial axes first) that are
    zero but at the spatial centre, an orthogonal (in, out) matrix there (jax.nn.initializers'
    delta_orthogonal, for deep plain CNNs: Xiao et al. 2018)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        shape = tuple(shape)
        if len(shape) not in (3, 4, 5):
            raise ShapeError(f"delta orthogonal initializer requires a 3D, 4D or 5D shape, got "
                             f"{shape}", source=user_source())
        if shape[-2] > shape[-1]:
            raise ShapeError(f"delta orthogonal initializer: fan_in (shape[-2] = {shape[-2]}) "
                             f"must be less or equal than fan_out (shape[-1] = {shape[-1]})",
                             source=user_source())
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        w = orthogonal(scale, column_axis, dtype)(key, shape[-2:])
        return vnp.zeros(shape, dtype).at[centre].set(w)
    return init
