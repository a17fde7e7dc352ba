"""vg.scipy.signal: jax.scipy.signal's convolve and correlate of N-D arrays (modes full, same,
valid), each ONE conv_general_dilated (the primitive of vg.lax's convolutions) of the two
operands as a one-channel image and kernel."""

from __future__ import annotations

import vkgrad.numpy as vnp
from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, ShapeError
from vkgrad.tracer.core import user_source

__all__ = ["convolve", "correlate"]


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """scipy's convolve: the sum of in1 shifted by in2's entries, flipped ('full': every
    overlap; 'same': in1's shape, centred; 'valid': the overlaps inside the larger operand)."""
    return _conv(in1, in2, mode, "convolve")


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """scipy's correlate: convolve with in2 reversed along every axis."""
    return _conv(in1, in2, mode, "correlate")


def _conv(in1, in2, mode, name):
    a, k = vnp.asarray(in1), vnp.asarray(in2)
    if a.ndim != k.ndim:
        raise ShapeError(f"{name}: in1 and in2 must have the same number of dimensions, got "
                         f"{tuple(a.shape)} and {tuple(k.shape)}", source=user_source())
    if mode not in ("full", "same", "valid"):
        raise ArgumentError(f"{name}: mode must be 'full', 'same' or 'valid', not {mode!r}",
                            source=user_source())
    if name == "convolve":
        k = vnp.flip(k)
    if mode == "valid":   # the smaller operand slides inside the larger (scipy swaps them)
        if all(m >= n for m, n in zip(a.shape, k.shape)):
            pass
        elif all(m <= n for m, n in zip(a.shape, k.shape)):
            a, k = vnp.flip(k), vnp.flip(a)   # convolution commutes: in2 * in1
        else:
            raise ShapeError(f"{name} mode 'valid': one of in1 {tuple(a.shape)} and in2 "
                             f"{tuple(k.shape)} must be at least as large as the other in "
                             "every dimension", source=user_source())
        pads = [(0, 0)] * a.ndim
    elif mode == "full":
        pads = [(n - 1, n - 1) for n in k.shape]
    else:   # the centre of 'full', in1's size
        pads = [(n - 1 - (n - 1) // 2, (n - 1) // 2) for n in k.shape]
    dt = vnp.result_type(a, k, vnp.float32)
    a, k = a.astype(dt), k.astype(dt)
    nd = a.ndim
    out = P.conv(vnp.reshape(a, (1, 1) + tuple(a.shape)), vnp.reshape(k, (1, 1) + tuple(k.shape)),
                 (1,) * nd, tuple(pads), (1,) * nd, (1,) * nd)
    return vnp.reshape(out, tuple(out.shape[2:]))
