"""Reductions along axes: sums, means, variances, extremes and their positions, any / all,
products, scans (cumsum, cumprod), diff, the nan-ignoring forms, average, trapezoid; softmax,
log_softmax and logsumexp (jax.nn / scipy.special names); allclose and array_equal."""

from __future__ import annotations

import builtins
import math

import numpy as _np
from numpy import inf

from vkgrad import primitives as P
from vkgrad.dtypes import is_half
from vkgrad.errors import ArgumentError, ShapeError, VkgradIndexError
from vkgrad.numpy.creation import full, full_like
from vkgrad.numpy.dtypes import (as_float, asarray, astype, dtype_of, no_out, promote,
                                 promoted_dtype)
from vkgrad.numpy.indexing import getitem
from vkgrad.numpy.shapes import broadcast_to, concatenate, moveaxis, ravel, reshape
from vkgrad.numpy.ufuncs import (absolute, add, as_bool, divide, equal, exp, floor_divide,
                                 greater, isclose, isfinite, isnan, less, log, logical_and,
                                 logical_not, maximum, minimum, multiply, negative, remainder,
                                 sqrt, stop_gradient, subtract, where)
from vkgrad.numpy.util import define_wrappers, normalize_axes, type_string
from vkgrad.tracer.core import Tracer, concretization_error, user_source


def _keepdims(r, shape, axes, keepdims):
    return P.reshape(r, P.keep_shape(shape, axes)) if keepdims and axes else r


def _masked(a, where_, fill):
    """a with `fill` where the boolean `where_` (broadcast to a) is False: numpy's where= of a
    reduction, which leaves those elements out."""
    return a if where_ is None else where(broadcast_to(as_bool(where_), a.shape), a, fill)


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    no_out(out)
    a = asarray(a)
    if dtype is not None:
        a = astype(a, dtype)
    elif dtype_of(a) == "bool":
        a = astype(a, "i32")
    a = _masked(a, where, 0)
    axes = normalize_axes(axis, a.ndim)
    r = _keepdims(P.reduce_sum(a, axes), a.shape, axes, keepdims)
    return r if initial is None else add(r, initial)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    no_out(out)
    if where is not None:   # numpy: the mean of the elements where it holds (nan over none)
        a = as_float(asarray(a) if dtype is None else astype(a, dtype))
        count = sum(astype(broadcast_to(as_bool(where), a.shape), dtype_of(a)), axis,
                    keepdims=keepdims)      # in a's float dtype: the float reduction kernel
        return divide(sum(a, axis, keepdims=keepdims, where=where), count)
    a = asarray(a) if dtype is None else astype(a, dtype)
    a = as_float(a)
    if is_half(dtype_of(a)):    # as JAX: the sum and the scaling in f32, rounded once
        return astype(mean(astype(a, "f32"), axis, keepdims=keepdims), dtype_of(a))
    axes = normalize_axes(axis, a.ndim)
    n = math.prod(a.shape[i] for i in axes)
    return P.mul(sum(a, axes, keepdims=keepdims), 1.0 / n if n else _np.nan)   # mean = sum*scale


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    no_out(out)
    a = as_float(a)
    if is_half(dtype_of(a)):    # as JAX: computed in f32, rounded once
        return astype(var(astype(a, "f32"), axis, ddof=ddof, keepdims=keepdims), dtype_of(a))
    axes = normalize_axes(axis, a.ndim)
    n = math.prod(a.shape[i] for i in axes)
    d = subtract(a, mean(a, axes, keepdims=True))
    v = mean(multiply(d, d), axes, keepdims=keepdims)
    # numpy: sum(d*d) / (n - ddof), which is inf (nan for a zero sum) when ddof >= n
    return v if ddof == 0 else P.mul(v, n / (n - ddof) if n > ddof else _np.inf)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    no_out(out)
    a = as_float(a)
    v = var(a, axis, ddof=ddof, keepdims=keepdims)
    if ddof == 0 and math.prod(a.shape[i] for i in normalize_axes(axis, a.ndim)) == 1:
        return v   # over one element the variance is identically 0: so is std, and its
    return sqrt(v)  # gradient (sqrt's at 0 would be 0 * inf = nan)


def _extreme(reduce, combine, a, axis, keepdims, initial, where_, name):
    a = asarray(a)
    if where_ is not None:
        if initial is None:     # numpy and JAX: the elements left out need a value
            raise ArgumentError(f"{name}(where=...) needs initial= (the value where no element "
                                "is left)", source=user_source())
        a = _masked(a, where_, initial)
    axes = normalize_axes(axis, a.ndim)
    r = _keepdims(reduce(a, axes), a.shape, axes, keepdims)
    return r if initial is None else combine(r, initial)


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """numpy's max; initial= joins the reduction, where= leaves elements out (with initial)."""
    no_out(out)
    return _extreme(P.reduce_max, maximum, a, axis, keepdims, initial, where, "max")


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    no_out(out)
    return _extreme(P.reduce_min, minimum, a, axis, keepdims, initial, where, "min")


amax, amin = max, min


def ptp(a, axis=None, out=None, keepdims=False):
    """The range, max - min, along axis (numpy's peak to peak)."""
    no_out(out)
    return subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def _arg_extreme(a, axis, keepdims, reduce):
    """The first index of the max (min) along `axis`: the smallest index where a equals its
    extreme, or is NaN (numpy: the first NaN). Built from eq, where and a min reduction (no
    primitive of its own); the indices are float32 inside (exact below 2**24), so the float
    reduction kernels serve it."""
    a = asarray(a)
    if dtype_of(a) == "bool":   # numpy and JAX: the first True (False), as 1.0 and 0.0 (the
        a = astype(a, "f32")    # float reduction kernels serve it)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    ax = normalize_axes(axis, a.ndim)[0]
    n = a.shape[ax]
    hit = P.eq(a, reduce(a, axis=ax, keepdims=True))
    if dtype_of(a) in ("f32", "f64"):   # a NaN is the extreme (max/min propagate it): the first
        hit = P.select(P.isnan(a), True, hit)
    pos = P.iota(a.shape, ax, "f32")
    first = min(where(hit, pos, float(n)), axis=ax, keepdims=keepdims)
    return astype(first, "i32")


def _arg_extreme_of(reduce):
    def arg_extreme(a, axis=None, keepdims=False):
        return _arg_extreme(a, axis, keepdims, reduce)
    return arg_extreme


def _scan_of(combine, unit):
    def scan(a, axis=None, dtype=None, out=None):
        no_out(out)
        return _scan(a, axis, combine, unit, dtype)
    return scan


_ARG_EXTREMES = {   # name: (reduction, docstring)
    "argmax": (max, "The index of the first maximum along `axis` (of the flattened a if None)."),
    "argmin": (min, "The index of the first minimum along `axis` (of the flattened a if None)."),
}
_SCANS = {   # name: (combine, unit, docstring)
    "cumsum": (add, 0, "The running sum along `axis` (of the flattened a if None)."),
    "cumprod": (multiply, 1, "The running product along `axis` (of the flattened a if None)."),
}

__all__ = (define_wrappers(globals(), _ARG_EXTREMES, _arg_extreme_of)
           + define_wrappers(globals(), _SCANS, _scan_of)
           + ["sum", "mean", "var", "std", "max", "min", "amax", "amin", "ptp", "any", "all",
              "count_nonzero", "prod", "diff", "gradient", "nansum", "nanmean", "nanmax", "nanmin",
              "average", "trapezoid", "logsumexp", "allclose", "array_equal"])


def any(a, axis=None, out=None, keepdims=False):
    """A max of 0/1 floats (exact; the reduction kernels compute in f32) compared with 0."""
    no_out(out)
    a = asarray(a)
    return greater(max(astype(as_bool(a), "f32"), axis, keepdims=keepdims), 0)


def all(a, axis=None, out=None, keepdims=False):
    no_out(out)
    a = asarray(a)
    return greater(min(astype(as_bool(a), "f32"), axis, keepdims=keepdims), 0)


def count_nonzero(a, axis=None, keepdims=False):
    """Counted in f32 (exact below 2**24 elements), returned as int32."""
    a = asarray(a)
    return astype(sum(astype(as_bool(a), "f32"), axis, keepdims=keepdims), "i32")


def _halving(a, ax, op, unit):
    """Reduce axis `ax` of a with the elementwise `op` in log2(n) halving steps (an odd length is
    padded with `unit`): elementwise and layout ops only, so it fuses into one kernel on Vulkan
    and its gradient is exact where a value is 0 (a product as exp(sum(log)) is not)."""
    while a.shape[ax] > 1:
        n = a.shape[ax]
        if n % 2:
            pad_shape = list(a.shape)
            pad_shape[ax] = 1
            a = concatenate([a, full(pad_shape, unit, dtype_of(a))], ax)
            n += 1
        lo = [slice(None)] * a.ndim
        hi = [slice(None)] * a.ndim
        lo[ax], hi[ax] = slice(0, n // 2), slice(n // 2, n)
        a = op(getitem(a, tuple(lo)), getitem(a, tuple(hi)))
    return a


def prod(a, axis=None, dtype=None, out=None, keepdims=False):
    no_out(out)
    a = asarray(a) if dtype is None else astype(a, dtype)
    if dtype_of(a) == "bool":
        a = astype(a, "i32")
    axes = normalize_axes(axis, a.ndim)
    shape = a.shape
    for ax in axes:
        if a.shape[ax] == 0:
            a = full(tuple(1 if i == ax else d for i, d in enumerate(a.shape)), 1, dtype_of(a))
        a = _halving(a, ax, multiply, 1)
    r = P.reshape(a, [d for i, d in enumerate(a.shape) if i not in axes])
    return _keepdims(r, shape, axes, keepdims)


def _shifted(a, ax, s, fill):
    """a shifted by s along ax (a[i - s], `fill` for i < s)."""
    n = a.shape[ax]
    keep = [slice(None)] * a.ndim
    keep[ax] = slice(0, n - s)
    lead = list(a.shape)
    lead[ax] = s
    return concatenate([full(lead, fill, dtype_of(a)), getitem(a, tuple(keep))], ax)


def _scan(a, axis, op, unit, dtype):
    """Inclusive scan along `axis`. A sum is the cumsum primitive along the last axis (one
    kernel); a product is Hillis-Steele: log2(n) steps of shift-and-combine, fusible
    elementwise and layout ops, gradients by composition (exact where a value is 0)."""
    a = asarray(a) if dtype is None else astype(a, dtype)
    if dtype_of(a) == "bool":
        a = astype(a, "i32")
    if axis is None:
        a, axis = ravel(a), 0
    ax = normalize_axes(axis, a.ndim)[0]
    if op is add:
        return moveaxis(P.cumsum(moveaxis(a, ax, -1)), -1, ax)
    s = 1
    while s < a.shape[ax]:
        a = op(a, _shifted(a, ax, s, unit))
        s *= 2
    return a


def diff(a, n=1, axis=-1, prepend=None, append=None):
    a = asarray(a)
    ax = normalize_axes(axis, a.ndim)[0]
    parts = []
    for extra, at_end in ((prepend, False), (append, True)):
        if extra is not None:
            e = asarray(extra)
            if e.ndim == 0:
                e = broadcast_to(e, tuple(1 if i == ax else d for i, d in enumerate(a.shape)))
            parts.append((e, at_end))
    if parts:
        a = concatenate([e for e, end in parts if not end] + [a]
                        + [e for e, end in parts if end], ax)
    for _ in range(n):
        hi = [slice(None)] * a.ndim
        lo = [slice(None)] * a.ndim
        hi[ax], lo[ax] = slice(1, None), slice(None, -1)
        a = subtract(getitem(a, tuple(hi)), getitem(a, tuple(lo)))
    return a


def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    a = asarray(a)
    return sum(where(isnan(a), 0, a), axis, dtype, out, keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    a = as_float(a)
    ok = logical_not(isnan(a))
    return divide(sum(where(ok, a, 0), axis, dtype, out, keepdims),
                  sum(astype(ok, dtype_of(a)), axis, keepdims=keepdims))


def nanmax(a, axis=None, out=None, keepdims=False):
    a = asarray(a)
    return max(where(isnan(a), -inf, a), axis, out, keepdims)


def nanmin(a, axis=None, out=None, keepdims=False):
    a = asarray(a)
    return min(where(isnan(a), inf, a), axis, out, keepdims)


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """numpy's average: sum(a * w) / sum(w); 1-D weights apply along a single axis."""
    a = as_float(a)
    if weights is None:
        r = mean(a, axis, keepdims=keepdims)
        n = math.prod(a.shape[i] for i in normalize_axes(axis, a.ndim))
        return (r, full_like(r, n)) if returned else r
    w = asarray(weights)
    dt = promoted_dtype(a, w)
    a, w = asarray(promote(a, dt)), asarray(promote(w, dt))
    if tuple(w.shape) != tuple(a.shape):
        ax = normalize_axes(axis, a.ndim)
        if axis is None or len(ax) != 1 or w.ndim != 1 or w.shape[0] != a.shape[ax[0]]:
            raise ShapeError(f"average: weights {type_string(w)} must have the shape of "
                             f"{type_string(a)}, or be 1-D along the one axis averaged over",
                             source=user_source())
        w = reshape(w, [w.shape[0] if i == ax[0] else 1 for i in range(a.ndim)])
        w = broadcast_to(w, a.shape)
    scl = sum(w, axis, keepdims=keepdims)
    r = divide(sum(multiply(a, w), axis, keepdims=keepdims), scl)
    return (r, scl) if returned else r


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """jnp.trapezoid: the integral of y along `axis` by the trapezoid rule, the sum of
    (y[i] + y[i+1]) / 2 times the spacing: dx, or the differences of the sample points x
    (1-D, or of y's shape)."""
    if x is None:
        y, d = as_float(y), dx
    else:
        dt = promoted_dtype(as_float(y), as_float(x))
        y, x = astype(as_float(y), dt), astype(as_float(x), dt)
        d = diff(x) if x.ndim == 1 else moveaxis(diff(x, axis=axis), axis, -1)
    y = moveaxis(y, axis, -1)
    return multiply(0.5, sum(multiply(d, add(y[..., 1:], y[..., :-1])), -1))


def _last_axis(fn, x, axis):
    """Apply a last-axis primitive along `axis` (moved there and back if needed)."""
    x = as_float(x)
    ax = normalize_axes(axis, x.ndim)
    if len(ax) != 1:
        raise VkgradIndexError("softmax/log_softmax take a single axis", source=user_source())
    ax = ax[0]
    if ax == x.ndim - 1:
        return fn(x, ax)
    return moveaxis(fn(moveaxis(x, ax, -1), x.ndim - 1), -1, ax)


def _along_one_axis(primitive):
    def along_one_axis(x, axis=-1):
        return _last_axis(primitive, x, axis)
    return along_one_axis


_ALONG_ONE_AXIS = {   # name: (last-axis primitive, docstring)
    "softmax": (P.softmax, "exp(x) / sum(exp(x)) along `axis` (one axis; a fused kernel)."),
    "log_softmax": (P.log_softmax, "x - logsumexp(x) along `axis` (one axis; a fused kernel)."),
}
__all__ += define_wrappers(globals(), _ALONG_ONE_AXIS, _along_one_axis)


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) computed stably: m + log(sum(exp(x - m))) with m = max(x) held
    constant for differentiation (the result does not depend on m; its gradient is softmax)."""
    x = as_float(x)
    axes = normalize_axes(axis, x.ndim)
    m = max(x, axes, keepdims=True)
    m = stop_gradient(where(isfinite(m), m, 0.0))   # all -inf: log(0) = -inf; an inf: inf
    r = add(log(sum(exp(subtract(x, m)), axes, keepdims=True)), m)
    return r if keepdims else P.reshape(r, [d for i, d in enumerate(x.shape) if i not in axes])


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """A Python bool, as numpy's: it needs concrete values (vnp.all(vnp.isclose(...)) is the
    traceable form)."""
    r = all(isclose(a, b, rtol, atol, equal_nan))
    if isinstance(r, Tracer):
        raise concretization_error(r, "vnp.allclose (it returns a Python bool)",
                                   "use vnp.all(vnp.isclose(a, b)), which stays an array")
    return builtins.bool(r)


def array_equal(a1, a2) -> bool:
    a1, a2 = asarray(a1), asarray(a2)
    if tuple(a1.shape) != tuple(a2.shape):
        return False
    r = all(equal(a1, a2))
    if isinstance(r, Tracer):
        raise concretization_error(r, "vnp.array_equal (it returns a Python bool)",
                                   "use vnp.all(a == b), which stays an array")
    return builtins.bool(r)


def gradient(f, *varargs, axis=None, edge_order=1):
    """numpy's gradient: central differences inside, one-sided ones (first or second order,
    `edge_order`) at the ends, along each axis; a list of arrays for several axes. Spacings:
    none (1), one scalar for every axis, or one scalar per axis (coordinate arrays are not
    supported)."""
    f = as_float(f)
    axes = tuple(range(f.ndim)) if axis is None else (axis if isinstance(axis, tuple)
                                                      else (axis,))
    axes = tuple(normalize_axes(a, f.ndim)[0] for a in axes)
    if edge_order not in (1, 2):
        raise ShapeError(f"gradient: edge_order is 1 or 2, not {edge_order}",
                         source=user_source())
    if len(varargs) not in (0, 1, len(axes)) or builtins.any(_np.ndim(h) for h in varargs):
        raise ShapeError("gradient takes no spacing, one scalar spacing, or one scalar per "
                         f"axis ({len(axes)} here); coordinate arrays are not supported",
                         source=user_source())
    hs = [1.0] * len(axes) if not varargs else [float(h) for h in varargs] * (
        len(axes) if len(varargs) == 1 else 1)
    out = [_gradient_along(f, ax, h, edge_order) for ax, h in zip(axes, hs)]
    return out[0] if len(out) == 1 else out


def _gradient_along(f, ax, h, edge_order):
    n = f.shape[ax]
    if n < edge_order + 1:
        raise ShapeError(f"gradient: axis {ax} has {n} points; edge_order {edge_order} needs at "
                         f"least {edge_order + 1}", source=user_source())

    def part(sl):
        key = [slice(None)] * f.ndim
        key[ax] = sl
        return getitem(f, tuple(key))

    def at(k):   # the k-th slice along ax, keeping the axis
        return part(slice(k, k + 1 or None))

    inner = divide(subtract(part(slice(2, None)), part(slice(None, -2))), 2.0 * h)
    if edge_order == 1:
        first = divide(subtract(at(1), at(0)), h)
        last = divide(subtract(at(-1), at(-2)), h)
    else:   # second-order one-sided: (-3 f0 + 4 f1 - f2) / 2h and its mirror
        first = divide(add(add(multiply(at(0), -3.0), multiply(at(1), 4.0)),
                           multiply(at(2), -1.0)), 2.0 * h)
        last = divide(add(add(multiply(at(-1), 3.0), multiply(at(-2), -4.0)), at(-3)), 2.0 * h)
    return concatenate([first, inner, last], ax)


def _nan_arg_extreme(a, axis, keepdims, arg, fill):
    """JAX's nanargmax/nanargmin: NaN counted as -inf/+inf, and -1 where a whole slice is
    NaN (numpy raises there; JAX cannot)."""
    a = asarray(a)
    nan = isnan(a)
    r = arg(where(nan, fill, a), axis, keepdims)
    return where(all(nan, axis, keepdims=keepdims), -1, r)


def nanargmax(a, axis=None, out=None, keepdims=False):
    """The index of the first maximum ignoring NaNs; -1 for an all-NaN slice (jnp.nanargmax)."""
    no_out(out)
    return _nan_arg_extreme(a, axis, keepdims, argmax, -inf)


def nanargmin(a, axis=None, out=None, keepdims=False):
    """The index of the first minimum ignoring NaNs; -1 for an all-NaN slice (jnp.nanargmin)."""
    no_out(out)
    return _nan_arg_extreme(a, axis, keepdims, argmin, inf)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False):
    """The product with NaNs counted as 1."""
    a = asarray(a)
    return prod(where(isnan(a), 1, a), axis, dtype, out, keepdims)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """The variance of the non-NaN elements: sum((a - nanmean)^2) / (count - ddof); NaN where
    count <= ddof (jnp.nanvar)."""
    no_out(out)
    a = as_float(a) if dtype is None else astype(a, dtype)
    ok = logical_not(isnan(a))
    count = sum(astype(ok, dtype_of(a)), axis, keepdims=keepdims)
    centered = where(ok, subtract(a, nanmean(a, axis, keepdims=True)), 0)
    s = sum(multiply(centered, centered), axis, keepdims=keepdims)
    dof = subtract(count, ddof)
    return where(greater(dof, 0), divide(s, where(greater(dof, 0), dof, 1)), _np.nan)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """sqrt(nanvar(...))."""
    return sqrt(nanvar(a, axis, dtype, out, ddof, keepdims))


def nancumsum(a, axis=None, dtype=None, out=None):
    """The running sum with NaNs counted as 0."""
    a = asarray(a)
    return cumsum(where(isnan(a), 0, a), axis, dtype, out)


def nancumprod(a, axis=None, dtype=None, out=None):
    """The running product with NaNs counted as 1."""
    a = asarray(a)
    return cumprod(where(isnan(a), 1, a), axis, dtype, out)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """The array API's running sum (jnp.cumulative_sum): axis may be left out only for a
    1-d x; include_initial puts a 0 first."""
    return _cumulative(x, axis, dtype, include_initial, cumsum, 0, "cumulative_sum")


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """The array API's running product (jnp.cumulative_prod); include_initial puts a 1 first."""
    return _cumulative(x, axis, dtype, include_initial, cumprod, 1, "cumulative_prod")


def _cumulative(x, axis, dtype, include_initial, scan, unit, name):
    x = asarray(x)
    if x.ndim == 0:
        raise ShapeError(f"{name} needs an array of 1 or more dimensions, got a 0-d "
                         f"{type_string(x)} (as JAX)", source=user_source())
    if axis is None:
        if x.ndim > 1:
            raise ArgumentError(f"{name}: axis is required for a {x.ndim}-dimensional array "
                                f"({type_string(x)})", source=user_source())
        axis = 0
    out = scan(x, axis, dtype)
    if not include_initial:
        return out
    ax = normalize_axes(axis, out.ndim)[0]
    shape = list(out.shape)
    shape[ax] = 1
    return concatenate([full(shape, unit, dtype_of(out)), out], axis=ax)


__all__ += ["nanargmax", "nanargmin", "nanprod", "nanvar", "nanstd", "nancumsum", "nancumprod",
            "cumulative_sum", "cumulative_prod"]


def array_equiv(a1, a2):
    """Whether a1 and a2 are equal after broadcasting (False if they do not broadcast): a bool
    array, as JAX's (so it traces, unlike array_equal's Python bool)."""
    a1, a2 = asarray(a1), asarray(a2)
    try:
        _np.broadcast_shapes(tuple(a1.shape), tuple(a2.shape))
    except ValueError:
        return asarray(False)
    return all(equal(a1, a2))


def ediff1d(ary, to_end=None, to_begin=None):
    """The differences of the flattened array's neighbours, with to_begin before them and
    to_end after (both flattened, in ary's dtype)."""
    a = ravel(asarray(ary))
    parts = [ravel(astype(to_begin, dtype_of(a)))] if to_begin is not None else []
    parts.append(subtract(a[1:], a[:-1]))
    if to_end is not None:
        parts.append(ravel(astype(to_end, dtype_of(a))))
    return concatenate(parts) if len(parts) > 1 else parts[0]


def unwrap(p, discont=None, axis=-1, period=2 * _np.pi):
    """p with its jumps along `axis` larger than discont (period / 2 by default) changed by
    multiples of period, so it follows on (numpy's and JAX's formula: each difference taken
    mod period into [-period/2, period/2), a running sum of the corrections)."""
    p = asarray(p)
    dt = promoted_dtype(p, period)
    p = promote(p, dt)
    ax = normalize_axes(axis, p.ndim)[0]
    if p.shape[ax] == 0:
        return p
    half = floor_divide(period, 2) if dt in ("i32", "bool") else divide(period, 2)
    discont = half if discont is None else discont
    dd = diff(p, axis=ax)
    ddmod = subtract(remainder(add(dd, half), period), half)
    ddmod = where(logical_and(equal(ddmod, negative(half)), greater(dd, 0)), half, ddmod)
    correct = where(less(absolute(dd), discont), 0, subtract(ddmod, dd))
    first = [slice(None)] * p.ndim
    rest = [slice(None)] * p.ndim
    first[ax], rest[ax] = slice(0, 1), slice(1, None)
    return concatenate([getitem(p, tuple(first)),
                        add(getitem(p, tuple(rest)), cumsum(correct, axis=ax))], ax)


__all__ += ["array_equiv", "ediff1d", "unwrap"]
