"""vg.scipy.integrate: jax.scipy.integrate's trapezoid rule."""

from __future__ import annotations

import vkgrad.numpy as vnp

__all__ = ["trapezoid"]


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of y along `axis` by the trapezoid rule: sum of (y[i] + y[i+1]) / 2 times
    the spacing, which is dx, or the differences of the sample points x (1-D, or y's shape)."""
    y = vnp.moveaxis(vnp.asarray(y), axis, -1)
    d = dx if x is None else vnp.diff(vnp.moveaxis(vnp.asarray(x), axis, -1)
                                     if vnp.ndim(x) > 1 else vnp.asarray(x))
    return vnp.sum(d * (y[..., 1:] + y[..., :-1]), axis=-1) * 0.5
