"""vg.scipy.signal: jax.scipy.signal's convolve and correlate of N-D arrays, convolve2d and
correlate2d (modes full, same, valid; boundary 'fill' with 0, as JAX), each ONE
conv_general_dilated (the primitive of vg.lax's convolutions) of the two operands as a
one-channel image and kernel; fftconvolve as that direct convolution (the same values, exact
where the FFT's are rounded); detrend. csd, istft, stft and welch are refused: their values
are complex FFTs (docs/numpy.md)."""

from __future__ import annotations

import vkgrad.numpy as vnp
from vkgrad import primitives as P
import numpy as np

from vkgrad.errors import ArgumentError, DTypeError, ShapeError
from vkgrad.numpy.util import normalize_axes
from vkgrad.transforms import vmap
from vkgrad.tracer.core import user_source

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve", "detrend", "csd",
           "istft", "stft", "welch"]


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
    if name != "correlate":   # the others are convolutions
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


def _two_d(name, in1, in2, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise ArgumentError(f"{name}: only boundary='fill' with fillvalue=0 is supported (as in "
                            f"JAX), not boundary={boundary!r}, fillvalue={fillvalue!r}",
                            source=user_source())
    a, k = vnp.asarray(in1), vnp.asarray(in2)
    if a.ndim != 2 or k.ndim != 2:
        raise ShapeError(f"{name} takes 2-D arrays, got {tuple(a.shape)} and {tuple(k.shape)}",
                         source=user_source())
    return a, k


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """scipy's convolve2d of two 2-D arrays (boundary 'fill' with 0 only, as JAX's)."""
    a, k = _two_d("convolve2d", in1, in2, boundary, fillvalue)
    return _conv(a, k, mode, "convolve2d")


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """scipy's correlate2d of two 2-D arrays (boundary 'fill' with 0 only): JAX's flips of a
    convolution, so 'same' is centred as scipy's correlate2d (not as correlate's, for an
    even-sized in2)."""
    a, k = _two_d("correlate2d", in1, in2, boundary, fillvalue)
    swap = all(m <= n for m, n in zip(a.shape, k.shape))
    if swap and (mode == "full" or (mode == "valid" and a.shape != k.shape)):
        return _conv(vnp.flip(k), a, mode, "correlate2d")
    return vnp.flip(_conv(vnp.flip(a), k, mode, "correlate2d"))


def fftconvolve(in1, in2, mode="full", axes=None):
    """scipy's fftconvolve, computed as the direct convolution (convolve's: the same values,
    without the FFT's rounding); axes: convolve along these axes only, the others (of equal
    sizes) mapped, as JAX's."""
    a, k = vnp.asarray(in1), vnp.asarray(in2)
    if a.ndim != k.ndim:
        raise ShapeError(f"fftconvolve: in1 and in2 must have the same number of dimensions, "
                         f"got {tuple(a.shape)} and {tuple(k.shape)}", source=user_source())
    f = lambda x, y: _conv(x, y, mode, "fftconvolve")                  # noqa: E731
    if axes is None:
        return f(a, k)
    axes = {normalize_axes(ax, a.ndim)[0] for ax in ((axes,) if isinstance(axes, int) else axes)}
    mapped = [d for d in range(a.ndim) if d not in axes]
    if any(a.shape[d] != k.shape[d] for d in mapped):
        raise ShapeError(f"fftconvolve: the axes not convolved must have the same sizes, got "
                         f"{tuple(a.shape)} and {tuple(k.shape)} with axes={sorted(axes)}",
                         source=user_source())
    for d in sorted(mapped):
        f = vmap(f, in_axes=d, out_axes=d)
    return f(a, k)


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):
    """data less its least-squares trend along axis: its mean (type 'constant') or a line
    ('linear'), piecewise between the breakpoints bp (static indices). The line is the
    least-squares fit's closed form (JAX solves lstsq: the same values to rounding)."""
    if overwrite_data is not None:
        raise ArgumentError("detrend: overwrite_data is not supported", source=user_source())
    if type not in ("constant", "linear"):
        raise ArgumentError(f"detrend: type is 'linear' or 'constant', not {type!r}",
                            source=user_source())
    x = vnp.asarray(data)
    x = x if x.dtype.kind == "f" else x.astype(vnp.float32)
    if type == "constant":
        return x - vnp.mean(x, axis, keepdims=True)
    axis = normalize_axes(axis, x.ndim)[0]
    n = x.shape[axis]
    edges = np.sort(np.unique(np.r_[0, bp, n]))
    if edges[0] < 0 or edges[-1] > n:
        raise ArgumentError(f"detrend: breakpoints must be in [0, {n}], got {bp!r}",
                            source=user_source())
    x = vnp.moveaxis(x, axis, -1)
    pieces = []
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist()):
        seg = x[..., lo:hi]
        if hi - lo == 1:      # one point: its fit is itself
            pieces.append(seg * 0.0)
            continue
        t = np.arange(hi - lo, dtype=np.float64)
        t = (t - t.mean()).astype(np.dtype(str(x.dtype)))
        centred = seg - vnp.mean(seg, -1, keepdims=True)
        slope = vnp.sum(centred * t, -1, keepdims=True) / float(np.sum(t.astype(np.float64) ** 2))
        pieces.append(centred - slope * t)
    return vnp.moveaxis(vnp.concatenate(pieces, -1), -1, axis)


def _complex_result(name):
    raise DTypeError(f"{name}: its result is a complex FFT and vkgrad has no complex dtype "
                     "(docs/numpy.md, 'What it refuses')", source=user_source())


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1, average="mean"):
    """Refused: the cross spectral density is a complex FFT."""
    _complex_result("csd")


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
    """Refused: the short-time Fourier transform is complex."""
    _complex_result("stft")


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None, input_onesided=True,
          boundary=True, time_axis=-1, freq_axis=-2):
    """Refused: the inverse short-time Fourier transform takes a complex Zxx."""
    _complex_result("istft")


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None, detrend="constant",
          return_onesided=True, scaling="density", axis=-1, average="mean"):
    """Refused: Welch's power spectral density is computed from complex FFTs."""
    _complex_result("welch")
