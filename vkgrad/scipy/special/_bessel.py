"""Bessel functions of integer order beyond 0 and 1: bessel_jn (JAX's: orders 0..v stacked),
jn and yn (scipy's, integer orders), by recurrence from j0, j1, y0, y1 (vkgrad/scipy/special/
_base.py, Cephes' single-precision fits).

    J_k   upward (J_k+1 = 2k/x J_k - J_k-1) where k < |x|, where that recurrence is stable;
          above it Miller's backward recurrence, as ratios rho_k = J_k+1 / J_k from rho_M = 0
          (M = N + sqrt(40 N) + 10, N the highest order), scaled by j0 or j1 (the larger), so
          nothing overflows
    Y_k   upward from y0 and y1 (Y grows with k: the recurrence is stable)

The orders are concrete (Python ints or numpy integer arrays, as bessel_jn's v is in JAX): the
recurrences' lengths are fixed at trace time.
"""

from __future__ import annotations

import math

import numpy as _np

import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError
from vkgrad.numpy.util import nonnegative_int
from vkgrad.scipy.special._base import _float, j0, j1, y0, y1
from vkgrad.tracer.core import Tracer, concrete_value, concretization_error, user_source

_TINY = 1e-30


def _orders(n, name: str):
    """n as a numpy int32 array of integer orders (concrete)."""
    if isinstance(n, Tracer):
        v = concrete_value(n)
        if v is None:
            raise concretization_error(n, f"{name}'s order n",
                                       "pass the orders as Python ints or a numpy array")
        n = v
    arr = _np.asarray(n)
    if arr.dtype.kind == "f" and _np.all(arr == _np.round(arr)):
        arr = arr.astype(_np.int64)
    if arr.dtype.kind not in "iu":
        raise ArgumentError(f"{name}: the order n must be an integer (or integer array), got "
                            f"{n!r}; non-integer orders are not computed", source=user_source())
    return arr.astype(_np.int32)


def _j_orders(ax, top: int, start: int | None = None) -> list:
    """[J_0(ax), ..., J_top(ax)] for ax >= 0."""
    vals = [j0(ax), j1(ax)]
    if top < 2:
        return vals[:top + 1]
    pos = ax > 0
    xs = vnp.where(pos, ax, 1.0)
    two_over_x = 2.0 / xs
    for k in range(1, top):                                   # upward, for k < x
        vals.append(k * two_over_x * vals[k] - vals[k - 1])
    m = max(top + int(math.sqrt(40 * top)) + 10, start or 0)
    rho = vnp.zeros_like(xs)                                  # rho_m = J_m+1 / J_m ~ 0
    rhos = {}
    for k in range(m, 0, -1):                                 # rho_k-1 = 1 / (2k/x - rho_k)
        den = k * two_over_x - rho
        rho = 1.0 / vnp.where(vnp.abs(den) < _TINY, _TINY, den)
        if k - 1 < top:
            rhos[k - 1] = rho
    use0 = vnp.abs(vals[0]) >= vnp.abs(vals[1])
    down = vnp.where(use0, vals[0] * rhos[0], vals[1])        # J_1, then J_k = J_k-1 rho_k-1
    for k in range(2, top + 1):
        down = down * rhos[k - 1]
        vals[k] = vnp.where(k < ax, vals[k], vnp.where(pos, down, 0.0))
    return vals


def _y_orders(x, top: int) -> list:
    vals = [y0(x), y1(x)]
    xs = vnp.where(x > 0, x, 1.0)
    for k in range(1, top):         # past float32's range: -inf, kept (not inf - inf)
        vals.append(vnp.where(vnp.isinf(vals[k]), vals[k], 2.0 * k / xs * vals[k] - vals[k - 1]))
    return [vnp.where(x > 0, v, vnp.where(x == 0, -math.inf, math.nan)) for v in vals[:top + 1]]


def _pick(vals: list, n):
    """vals[n] elementwise (n a numpy int array broadcast against the values)."""
    if n.ndim == 0:
        return vals[int(n)]
    out = vals[0]
    for k in range(1, len(vals)):
        out = vnp.where(n == k, vals[k], out)
    return out


def _odd(n):
    return (n % 2) == 1


def jn(n, x):
    """J_n(x), the Bessel function of the first kind of integer order n (scipy's jn; n
    concrete): J_-n = (-1)^n J_n, J_n(-x) = (-1)^n J_n(x)."""
    n, x = _orders(n, "jn"), _float(x)
    na = _np.abs(n)
    vals = _j_orders(vnp.abs(x), int(na.max(initial=0)))
    out = _pick(vals, na)
    flip = vnp.where(x < 0, _odd(na), False) ^ (_odd(na) & (n < 0))
    return vnp.where(flip, -out, out)


def yn(n, x):
    """Y_n(x), the Bessel function of the second kind of integer order n (scipy's yn; n
    concrete): -inf at 0, nan below, Y_-n = (-1)^n Y_n."""
    n, x = _orders(n, "yn"), _float(x)
    na = _np.abs(n)
    out = _pick(_y_orders(x, int(na.max(initial=0))), na)
    return vnp.where(vnp.asarray(_odd(na) & (n < 0)), -out, out)


def bessel_jn(z, *, v, n_iter=50):
    """J_0(z) .. J_v(z) stacked along a new first axis, shape (v + 1, *z.shape)
    (jax.scipy.special.bessel_jn; v a concrete int). The backward recurrence starts at order
    max(n_iter, v + sqrt(40 v) + 10) and is scaled by j0 or j1 (JAX's starts at n_iter from
    1e-16 and normalizes by J_0 + 2 sum J_2k; in float32 it overflows to nan for |z| below
    about 2, and for z < 0, where vkgrad gives the values)."""
    v = nonnegative_int(v, "bessel_jn", "v")
    n_iter = nonnegative_int(n_iter, "bessel_jn", "n_iter")
    z = _float(z)
    vals = _j_orders(vnp.abs(z), max(v, 1), n_iter)[:v + 1]
    neg = z < 0
    vals = [vnp.where(neg, -j, j) if k % 2 else j for k, j in enumerate(vals)]
    return vnp.stack(vals)


__all__ = ["bessel_jn", "jn", "yn"]
