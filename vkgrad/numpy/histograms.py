"""Counting and binning, as jax.numpy's: bincount, digitize, histogram, histogram_bin_edges,
histogramdd, histogram2d and interp. searchsorted finds each value's bin and one scatter-add
counts (or sums the weights of) the values in each; no primitive of their own (docs/numpy.md,
"What it covers")."""

from __future__ import annotations

import builtins
import math
import operator

import numpy as _np

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, DTypeError, ShapeError
from vkgrad.ir.core import np_dtype
from vkgrad.numpy.creation import ix_, linspace, zeros
from vkgrad.numpy.dtypes import as_float, asarray, astype, dtype_of, promoted_dtype
from vkgrad.numpy.reductions import diff, max, min, sum
from vkgrad.numpy.indexing import ravel_multi_index
from vkgrad.numpy.shapes import concatenate, ravel, reshape, stack
from vkgrad.numpy.sorting import argsort, searchsorted
from vkgrad.numpy.ufuncs import (absolute, add, clip, divide, equal, greater, greater_equal,
                                 less, less_equal, maximum, multiply, remainder, subtract, where)
from vkgrad.numpy.util import type_string
from vkgrad.tracer.core import Tracer, concrete_value, concretization_error, user_source

__all__ = ["bincount", "digitize", "histogram", "histogram_bin_edges", "histogramdd",
           "histogram2d", "interp"]


def _add_at(idx, w, length, dtype):
    """zeros(length).at[idx].add(w, mode='drop'), dtype `dtype`: one scatter-add, in float32
    (the take_grad kernel's dtype: integer sums are exact below 2**24). An index outside
    [0, length) adds nothing, as JAX's mode='drop'."""
    if length == 0 or idx.shape[0] == 0:
        return zeros((length,), dtype)
    keep = less(idx, length)
    w = where(keep, as_float(w), 0.0)
    return astype(P.scatter_add(w, where(keep, idx, 0), 0, (length,)), dtype)


def _known(x, what, instead):
    """x's value (a traced x's where its trace knows it: an eager grad), else JAX's
    concretization error."""
    v = concrete_value(x)
    if v is None:
        raise concretization_error(x, what, instead)
    return v


def _static_int(n, what):
    if isinstance(n, Tracer):
        n = _known(n, f"{what} (it is the result's length)", f"pass {what} as a Python int")
        n = n.item() if n.ndim == 0 else n
    try:
        return operator.index(n)
    except TypeError:
        raise ArgumentError(f"{what} must be an integer, got {n!r}", source=user_source()) from None


def bincount(x, weights=None, minlength=0, *, length=None):
    """jnp.bincount: counts of each value of the 1-D int x (or the sums of `weights` at them),
    negative values counted at 0 and values from `length` up dropped, as JAX's. The result's
    length is `length`, or max(minlength, x.max() + 1) of a concrete x (an eager grad's
    too): under jit it is data, so `length=` is required, as JAX asks."""
    x = asarray(x)
    if dtype_of(x) == "bool":
        x = astype(x, "i32")
    if dtype_of(x) != "i32":
        raise DTypeError(f"x argument to bincount must have an integer type; got {type_string(x)}",
                         source=user_source())
    if x.ndim != 1:
        raise ShapeError(f"bincount: x must be 1-D, got {type_string(x)}", source=user_source())
    minlength = _static_int(minlength, "bincount's minlength")
    if length is None:
        xv = _known(x, "vnp.bincount without length= (its result's length is x.max() + 1)",
                    "pass a static length, vnp.bincount(x, length=n), as JAX's jnp.bincount asks")
        length = builtins.max(minlength, int(builtins.max(0, xv.max())) + 1 if xv.size else 0)
    length = _static_int(length, "bincount's length")
    if weights is None:
        return _add_at(maximum(x, 0), _np.ones(x.shape, _np.float32), length, "i32")
    weights = asarray(weights)
    if tuple(weights.shape) != tuple(x.shape):
        raise ShapeError(f"bincount: weights {type_string(weights)} must have the shape of x "
                         f"{type_string(x)}", source=user_source())
    if dtype_of(weights) == "bool":
        raise DTypeError("bincount: weights must be numbers, not bool (JAX's add refuses "
                         "them)", source=user_source())
    return _add_at(maximum(x, 0), weights, length, dtype_of(weights))


_SEARCH_METHODS = (None, "scan", "scan_unrolled", "sort", "compare_all")


def digitize(x, bins, right=False, *, method=None):
    """jnp.digitize: the index of each x's bin among the 1-D monotonic `bins` (increasing or
    decreasing; right=True closes the bins on the right), int32. `method` is JAX's choice of
    searchsorted algorithm; every one gives the same indices, computed here by comparing
    every x with every bin (vnp.searchsorted)."""
    if method not in _SEARCH_METHODS:
        raise ArgumentError(f"digitize: method must be one of {_SEARCH_METHODS[1:]}, got "
                            f"{method!r}", source=user_source())
    x, bins = asarray(x), asarray(bins)
    if bins.ndim != 1:
        raise ShapeError(f"digitize: bins must be 1-D, got {type_string(bins)}",
                         source=user_source())
    n = bins.shape[0]
    if n == 0:
        return zeros(x.shape, "i32")
    side = "left" if right else "right"
    rising = searchsorted(bins, x, side=side)
    falling = subtract(n, searchsorted(bins[::-1], x, side=side))
    return where(greater_equal(bins[-1], bins[0]), rising, falling)


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """jnp.histogram_bin_edges: a 1-D `bins` is the edges (a's float dtype); an int is that
    many equal bins over `range` (default: a's min and max; a range of width 0 widens to
    +-0.5 around it), as JAX's linspace of bins + 1 edges. `weights` is unused, as JAX's."""
    if isinstance(bins, str):
        raise ArgumentError(f"histogram: bins={bins!r}: string rules for the bins are not "
                            "implemented (JAX's are not either); give a count or the edges",
                            source=user_source())
    a = as_float(a)
    dt = dtype_of(a)
    if _np.ndim(bins) == 1:
        return astype(asarray(bins), dt)
    count = _static_int(bins, "histogram's bins")
    if range is None:
        lo, hi = min(a), max(a)
    else:
        try:
            lo, hi = (astype(asarray(r), dt) for r in range)
        except (TypeError, ValueError):
            lo = None
        if lo is None or lo.ndim or hi.ndim:
            raise ShapeError(f"histogram: range must be None or a pair of scalars (lo, hi), "
                             f"got {range!r}", source=user_source())
    flat = equal(lo, hi)
    lo, hi = where(flat, subtract(lo, 0.5), lo), where(flat, add(hi, 0.5), hi)
    return linspace(astype(lo, dt), astype(hi, dt), count + 1, dtype=dt)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """jnp.histogram: (counts, edges). Each value's bin is searchsorted's, the last bin closed
    on the right; values outside the edges (and NaNs) are not counted. density=True divides by
    the bin widths and the total, as JAX's (so the result integrates to 1 over the range)."""
    a = asarray(a)
    if weights is None:
        a = as_float(a)
        weights = _np.ones(a.shape, np_dtype(dtype_of(a)))
    else:
        weights = asarray(weights)
        if tuple(weights.shape) != tuple(a.shape):
            raise ShapeError(f"histogram: weights {type_string(weights)} must have the shape "
                             f"of a {type_string(a)}", source=user_source())
        dt = promoted_dtype(as_float(a), as_float(weights))
        a, weights = astype(a, dt), astype(weights, dt)
    edges = histogram_bin_edges(a, bins, range)
    n = edges.shape[0]
    v = ravel(a)
    idx = where(equal(v, edges[-1]), n - 1, searchsorted(edges, v, side="right"))
    counts = _add_at(idx, ravel(weights), n, dtype_of(weights))[1:]
    if density:
        counts = divide(divide(counts, diff(edges)), sum(counts))
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """jnp.histogramdd: (counts, [edges of each dimension]) of the N points in the rows of the
    (N, D) sample. bins is one for every dimension or a sequence of D (counts or edges), range
    None or D pairs (or Nones). Each point's bin in each dimension is histogram's (the last
    bin closed on the right); a point outside the edges is not counted. The counts are int32
    (the weights' dtype with weights=), density=True divides by the total and the bins'
    volumes, as JAX's."""
    sample = as_float(sample)
    if sample.ndim != 2:
        raise ShapeError(f"histogramdd: sample must be 2-D (N points, D dimensions), got "
                         f"{type_string(sample)}", source=user_source())
    n, d = sample.shape
    if weights is not None:
        weights = asarray(weights)
        if tuple(weights.shape) != (n,):
            raise ShapeError(f"histogramdd: should have one weight for each sample: weights "
                             f"{type_string(weights)} for {n} points", source=user_source())
        dt = promoted_dtype(sample, as_float(weights))
        sample, weights = astype(sample, dt), astype(as_float(weights), dt)
    if range is not None and (len(range) != d or builtins.any(
            r is not None and _np.shape(r)[0] != 2 for r in range)):
        raise ShapeError(f"histogramdd: for sample.shape={(n, d)}, range must be a sequence "
                         f"of {d} pairs or Nones; got range={range!r}", source=user_source())
    try:
        per_dim = list(bins)
    except TypeError:
        per_dim = [bins] * d
    if len(per_dim) != d:
        raise ShapeError(f"histogramdd: should be a bin for each dimension: {len(per_dim)} "
                         f"bins for {d} dimensions", source=user_source())
    idx, edges = [], []
    for i in builtins.range(d):
        e = histogram_bin_edges(sample[:, i], per_dim[i], None if range is None else range[i])
        v = sample[:, i]
        idx.append(where(equal(v, e[-1]), e.shape[0] - 1, searchsorted(e, v, side="right")))
        edges.append(e)
    nbins = tuple(e.shape[0] + 1 for e in edges)   # with one bin beyond each end
    flat = ravel_multi_index(tuple(idx), nbins, mode="clip")
    hist = reshape(bincount(flat, weights, length=math.prod(nbins)), nbins)
    hist = hist[(slice(1, -1),) * d]
    if density:
        hist = astype(hist, dtype_of(sample))
        hist = divide(hist, sum(hist))
        for width in ix_(*(diff(e) for e in edges)):
            hist = divide(hist, width)
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """jnp.histogram2d: (counts, x edges, y edges), histogramdd of the points (x[i], y[i]);
    bins is a count or edges for both, or a pair of them."""
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb not in (1, 2):
        bins = [asarray(bins), asarray(bins)]
    x, y = asarray(x), asarray(y)
    if x.ndim != 1 or tuple(x.shape) != tuple(y.shape):
        raise ShapeError(f"histogram2d: x {type_string(x)} and y {type_string(y)} must be 1-D "
                         "of one length", source=user_source())
    dt = promoted_dtype(as_float(x), as_float(y))
    sample = stack([astype(as_float(x), dt), astype(as_float(y), dt)], axis=1)
    hist, edges = histogramdd(sample, bins, range, weights, density)
    return hist, edges[0], edges[1]


def _extrapolate(end, which):
    if isinstance(end, str):
        if end != "extrapolate":
            raise ArgumentError(f"interp: the only valid string value of `{which}` is "
                                f"'extrapolate', but got: {end!r}", source=user_source())
        return True
    return False


def interp(x, xp, fp, left=None, right=None, period=None):
    """jnp.interp: the piecewise-linear interpolant through (xp, fp) at x (xp increasing),
    fp[0] left of xp[0] and fp[-1] right of xp[-1] unless `left`/`right` give values (or
    'extrapolate', JAX's: the end segments continued). `period` wraps x and xp (then sorted)
    and interpolates around the circle. Its gradient is the segments' (a segment of width 0,
    a step, gives fp's value and no NaN)."""
    x, xp, fp = asarray(x), asarray(xp), asarray(fp)
    if tuple(xp.shape) != tuple(fp.shape) or xp.ndim != 1:
        raise ShapeError(f"interp: xp {type_string(xp)} and fp {type_string(fp)} must be 1-D "
                         "arrays of equal size", source=user_source())
    dt = promoted_dtype(as_float(x), as_float(xp))
    x, xp, fp = astype(x, dt), astype(xp, dt), as_float(fp)
    ext_left, ext_right = _extrapolate(left, "left"), _extrapolate(right, "right")
    if period is not None:
        if _np.ndim(period) != 0:
            raise ShapeError(f"interp: period must be a scalar, got {period!r}",
                             source=user_source())
        period = absolute(asarray(period))
        x, xp = remainder(x, period), remainder(xp, period)
        order = argsort(xp)
        xp, fp = P.take(xp, order, 0), P.take(fp, order, 0)
        xp = concatenate([subtract(xp[-1:], period), xp, add(xp[:1], period)])
        fp = concatenate([fp[-1:], fp, fp[:1]])
    n = xp.shape[0]
    i = clip(searchsorted(xp, x, side="right"), 1, n - 1)
    j = subtract(i, 1)
    x0, f0 = P.take(xp, j, 0), P.take(fp, j, 0)
    dx = subtract(P.take(xp, i, 0), x0)
    step = less_equal(absolute(dx), _np.spacing(_np.finfo(np_dtype(dt)).eps))
    delta = divide(subtract(x, x0), where(step, 1.0, dx))
    f = where(step, f0, add(f0, multiply(delta, subtract(P.take(fp, i, 0), f0))))
    if period is None and not ext_left:
        f = where(less(x, xp[0]), fp[0] if left is None else left, f)
    if period is None and not ext_right:
        f = where(greater(x, xp[-1]), fp[-1] if right is None else right, f)
    return f
