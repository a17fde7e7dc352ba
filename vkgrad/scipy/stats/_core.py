"""jax.scipy.stats' functions of samples: mode, rankdata, sem."""

import math
from typing import NamedTuple

import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError
from vkgrad.numpy.dtypes import as_float
from vkgrad.tracer.core import user_source


class ModeResult(NamedTuple):
    mode: object
    count: object


def _propagate_only(name, nan_policy):
    """JAX's three nan policies: only 'propagate' is computed (JAX's 'omit' and 'raise' are
    NotImplementedError there too: under jit the presence of a nan is not known)."""
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ArgumentError(f"{name}: illegal nan_policy {nan_policy!r}; expected one of "
                            f"'propagate', 'omit', 'raise'", source=user_source())
    if nan_policy != "propagate":
        raise ArgumentError(f"{name}: nan_policy={nan_policy!r} is not supported (as in JAX); "
                            f"check for nans outside the function", source=user_source())


def _differs(s):
    """Whether each sorted entry differs from the one before it along axis 0 (nans one value,
    as jnp.unique's equal_nan)."""
    return (s[1:] != s[:-1]) & ~(vnp.isnan(s[1:]) & vnp.isnan(s[:-1]))


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """The most frequent value along `axis` (None: all of a) and its count, the smallest such
    value on a tie (JAX's ModeResult); nan and count 0 for an empty axis. Sorted, then each
    run's length from the positions where runs end."""
    _propagate_only("mode", nan_policy)
    x = vnp.atleast_1d(vnp.asarray(a))
    if axis is None:
        out = (1,) * x.ndim if keepdims else ()
        x, axis = vnp.ravel(x), 0
    else:
        axis = axis % x.ndim
        out = tuple(1 if i == axis else s for i, s in enumerate(x.shape)
                    if keepdims or i != axis)
    x = vnp.moveaxis(x, axis, 0)
    n = x.shape[0]
    if n == 0:
        return ModeResult(vnp.full(out, math.nan), vnp.zeros(out))
    s = vnp.sort(vnp.reshape(x, (n, -1)), axis=0)
    ends = vnp.concatenate([_differs(s), vnp.ones((1, s.shape[1]), bool)], axis=0)
    pos = vnp.sort(vnp.where(ends, vnp.arange(n)[:, None], n), axis=0)  # run ends, then n's
    length = vnp.diff(pos, axis=0, prepend=-1)
    length = vnp.where(pos < n, length, 0)
    best = vnp.argmax(length, axis=0)[None]
    value = vnp.take_along_axis(s, vnp.take_along_axis(pos, best, axis=0), axis=0)[0]
    return ModeResult(vnp.reshape(value, out), vnp.reshape(vnp.max(length, axis=0), out))


def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """Ranks from 1 (float32), ties by `method`: 'average', 'min', 'max', 'dense' or 'ordinal'
    (by position); of the flattened a, or of each slice along `axis`; all nan if a (the slice)
    holds a nan, as JAX's."""
    _propagate_only("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ArgumentError(f"rankdata: unknown method {method!r}; expected 'average', 'min', "
                            f"'max', 'dense' or 'ordinal'", source=user_source())
    if axis is not None:
        return vnp.apply_along_axis(rankdata, axis, a, method)
    a = vnp.ravel(vnp.asarray(a))
    order = vnp.argsort(a)
    position = vnp.zeros(a.shape, "int32").at[order].set(vnp.arange(a.size))
    s = a[order]
    if method == "ordinal":
        rank = position + 1
    elif method == "dense":
        new = vnp.concatenate([vnp.ones((min(a.size, 1),), bool), _differs(s)])
        rank = vnp.cumsum(new)[position]
    else:
        low = vnp.searchsorted(s, a, side="left") + 1      # 'min'
        high = vnp.searchsorted(s, a, side="right")        # 'max'
        rank = {"min": low, "max": high}.get(method, (low + high) / 2.0)
    return vnp.where(vnp.any(vnp.isnan(a)), math.nan, as_float(rank))


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """The standard error of the mean, std(ddof) / sqrt(count) along `axis` (None: all);
    nan_policy 'omit' leaves nans out of both."""
    b = as_float(a)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return vnp.std(b, axis, ddof=ddof, keepdims=keepdims) / math.sqrt(size)
    if nan_policy == "omit":
        count = vnp.sum(~vnp.isnan(b), axis, keepdims=keepdims)
        return vnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims) / vnp.sqrt(as_float(count))
    raise ArgumentError(f"sem: nan_policy {nan_policy!r} is not supported; expected "
                        f"'propagate' or 'omit'", source=user_source())
