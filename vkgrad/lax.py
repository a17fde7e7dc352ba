"""vg.lax: JAX's jax.lax names, each meaning what it means in JAX, over vkgrad's primitives
and vkgrad.numpy.

    from vkgrad import lax
    y = lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))     # a batched matmul
    w = lax.dynamic_slice(x, (i, 0), (2, 4))                     # i may be traced
    vals, idx = lax.top_k(x, 3)

Elementwise functions are a table (`_UNARY`, `_BINARY`); the layout, indexing and contraction
functions compose vnp's. The control flow (scan, fori_loop, while_loop, cond, switch, map,
associative_scan) is vkgrad/control_flow.py. No name here means something other than JAX's:
`lax.scan` is JAX's scan, not the selective scan (that is `vkgrad.primitives.selective_scan`).
"""

from __future__ import annotations

import builtins
import enum
import math
import string
from typing import NamedTuple

import numpy as np

import vkgrad.numpy as vnp
from vkgrad.numpy.ufuncs import _exponent, _pow2, population_count as _population_count
from vkgrad import primitives as P
from vkgrad import random as _random
from vkgrad.primitives import collective as C
from vkgrad.control_flow import (associative_scan, cond, fori_loop, map, scan,  # noqa: F401,A004
                                 switch, while_loop)
from vkgrad.errors import ArgumentError, DTypeError, ShapeError
from vkgrad.primitives.convolution import check_conv, dilate
from vkgrad.scipy.special import (betainc, digamma, erf, erfc, erfinv, expit, gammainc,
                                  gammaincc, gammaln, i0e, i1e)
from vkgrad.scipy.special import polygamma as _polygamma
from vkgrad.scipy.special import zeta as _zeta
from vkgrad.tracer.core import Tracer, user_source
from vkgrad.transforms import custom_vjp, vjp
from vkgrad.transforms.custom import closure_convert
from vkgrad.tree_util import tree_flatten, tree_map, tree_unflatten

# ------------------------------------------------------------------------------- elementwise

def rsqrt(x):
    return 1.0 / vnp.sqrt(x)


def cbrt(x):
    return vnp.sign(x) * vnp.abs(x) ** (1.0 / 3.0)


_UNARY = {
    "abs": vnp.abs, "acos": vnp.arccos, "acosh": vnp.arccosh, "asin": vnp.arcsin,
    "asinh": vnp.arcsinh, "atan": vnp.arctan, "atanh": vnp.arctanh, "ceil": vnp.ceil,
    "cos": vnp.cos, "cosh": vnp.cosh, "exp": vnp.exp, "exp2": vnp.exp2, "expm1": vnp.expm1,
    "floor": vnp.floor, "is_finite": vnp.isfinite, "log": vnp.log, "log1p": vnp.log1p,
    "neg": vnp.negative, "sign": vnp.sign, "sin": vnp.sin, "sinh": vnp.sinh,
    "sqrt": vnp.sqrt, "square": vnp.square, "tan": vnp.tan, "tanh": vnp.tanh,
    "erf": erf, "erfc": erfc, "lgamma": gammaln, "digamma": digamma,
    "rsqrt": rsqrt, "cbrt": cbrt, "logistic": expit, "erf_inv": erfinv,
    "bitwise_not": vnp.invert,
}


def _div(x, y):
    """x / y; integers round toward zero (C's division, lax.div's)."""
    if vnp.issubdtype(vnp.result_type(x, y), vnp.integer):
        return vnp.floor_divide(x - vnp.fmod(x, y), y)
    return vnp.divide(x, y)


_BINARY = {
    "add": vnp.add, "sub": vnp.subtract, "mul": vnp.multiply, "div": _div,
    "rem": vnp.fmod, "pow": vnp.power, "max": vnp.maximum, "min": vnp.minimum,
    "atan2": vnp.arctan2, "eq": vnp.equal, "ne": vnp.not_equal, "lt": vnp.less,
    "le": vnp.less_equal, "gt": vnp.greater, "ge": vnp.greater_equal,
    "bitwise_and": vnp.bitwise_and, "bitwise_or": vnp.bitwise_or, "bitwise_xor": vnp.bitwise_xor,
}



def _lax_dtype(x):
    """x's dtype as lax sees it: a Python scalar's default one (bool, int32, float32)."""
    if isinstance(x, (bool, int, float)):
        return np.dtype(bool if isinstance(x, bool) else np.int32 if isinstance(x, int)
                        else np.float32)
    return np.dtype(vnp.result_type(x))


def _same_dtypes(name, fn):
    """fn, refusing operands of different dtypes as JAX's lax does (vnp's functions promote)."""
    def op(x, y):
        dx, dy = _lax_dtype(x), _lax_dtype(y)
        if dx != dy:
            raise DTypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                             f"{dx}, {dy} (vnp.{fn.__name__} promotes them; or convert one "
                             "with .astype)", source=user_source())
        return fn(x, y)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"JAX's lax.{name}: {fn.__name__} of two operands of one dtype."
    return op


_BINARY = {name: _same_dtypes(name, fn) for name, fn in _BINARY.items()}
globals().update(_UNARY)
globals().update(_BINARY)


def round(x, rounding_method=0):  # noqa: A001
    """Rounding to the nearest integer: halves away from zero (rounding_method 0, JAX's
    default, lax.RoundingMethod.AWAY_FROM_ZERO) or to even (1, TO_NEAREST_EVEN)."""
    if int(rounding_method) == 1:
        return vnp.rint(x)
    return vnp.sign(x) * vnp.floor(vnp.abs(x) + 0.5)


class RoundingMethod:
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def integer_pow(x, y: int):
    """x ** y for a Python int y (negative: the reciprocal)."""
    if not isinstance(y, (int, np.integer)):
        raise ArgumentError(f"integer_pow: the exponent must be a Python int, not {y!r}")
    return x ** int(y)


def clamp(min, x, max):  # noqa: A002
    """x clipped to [min, max] (lax's argument order)."""
    return vnp.clip(x, min, max)


def select(pred, on_true, on_false):
    return vnp.where(pred, on_true, on_false)


def select_n(which, *cases):
    """cases[which]: which is a bool (two cases) or an integer array."""
    if not cases:
        raise ArgumentError("select_n needs at least one case")
    out = cases[0]
    for i, case in enumerate(cases[1:], 1):
        out = vnp.where(which if len(cases) == 2 and vnp.result_type(which) == np.bool_
                        else vnp.equal(which, i), case, out)
    return out


def optimization_barrier(operand):
    """operand (a pytree), unchanged: as jax.lax.optimization_barrier, the compiler computes
    each array once and keeps it in memory, so no kernel after the barrier recomputes what is
    before it (vkgrad's fusion otherwise recomputes a cheap value wherever it is read). Its
    transpose is a barrier too, as JAX's: the cotangents are kept in memory. The identity
    under vmap."""
    return tree_map(lambda x: P.save(x, True), operand)


def stop_gradient(x):
    """The identity whose derivative is zero, on every leaf of a pytree."""
    return tree_map(vnp.stop_gradient, x)


def convert_element_type(operand, new_dtype):
    return vnp.astype(operand, new_dtype)


# ------------------------------------------------------------------------------- reductions

def reduce_sum(operand, axes):
    return vnp.sum(operand, axis=tuple(axes))


def reduce_max(operand, axes):
    return vnp.max(operand, axis=tuple(axes))


def reduce_min(operand, axes):
    return vnp.min(operand, axis=tuple(axes))


def reduce_prod(operand, axes):
    return vnp.prod(operand, axis=tuple(axes))


def argmax(operand, axis: int, index_dtype=np.int32):
    return vnp.astype(vnp.argmax(operand, axis=axis), index_dtype)


def argmin(operand, axis: int, index_dtype=np.int32):
    return vnp.astype(vnp.argmin(operand, axis=axis), index_dtype)


def cumsum(operand, axis: int = 0, reverse: bool = False):
    if reverse:
        return vnp.flip(vnp.cumsum(vnp.flip(operand, axis), axis=axis), axis)
    return vnp.cumsum(operand, axis=axis)


def cumprod(operand, axis: int = 0, reverse: bool = False):
    if reverse:
        return vnp.flip(vnp.cumprod(vnp.flip(operand, axis), axis=axis), axis)
    return vnp.cumprod(operand, axis=axis)


# ----------------------------------------------------------------------------------- layout

def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """operand's axis i becomes axis broadcast_dimensions[i] of a result of `shape`; the other
    axes are new, and operand axes of size 1 stretch."""
    operand = vnp.asarray(operand)
    shape, dims = tuple(shape), tuple(broadcast_dimensions)
    if len(dims) != operand.ndim or list(dims) != sorted(set(dims)) or \
            builtins.any(not 0 <= d < len(shape) for d in dims):
        raise ShapeError(f"broadcast_in_dim: broadcast_dimensions {dims} must be increasing "
                         f"axes of the result {shape}, one per operand axis of "
                         f"{tuple(operand.shape)}")
    full = [1] * len(shape)
    for i, d in enumerate(dims):
        if operand.shape[i] not in (1, shape[d]):
            raise ShapeError(f"broadcast_in_dim: operand axis {i} of size {operand.shape[i]} "
                             f"cannot become result axis {d} of size {shape[d]}")
        full[d] = operand.shape[i]
    return vnp.broadcast_to(vnp.reshape(operand, full), shape)


def broadcast(operand, sizes):
    """New leading axes of the given sizes."""
    operand = vnp.asarray(operand)
    sizes = tuple(sizes)
    return broadcast_in_dim(operand, sizes + tuple(operand.shape),
                            tuple(range(len(sizes), len(sizes) + operand.ndim)))


def reshape(operand, new_sizes, dimensions=None):
    """operand (transposed by `dimensions` first, when given) reshaped in row-major order."""
    if dimensions is not None:
        operand = vnp.transpose(operand, tuple(dimensions))
    return vnp.reshape(operand, tuple(new_sizes))


def transpose(operand, permutation):
    return vnp.transpose(operand, tuple(permutation))


def squeeze(array, dimensions):
    return vnp.squeeze(array, axis=tuple(dimensions))


def expand_dims(array, dimensions):
    return vnp.expand_dims(array, tuple(dimensions))


def rev(operand, dimensions):
    return vnp.flip(operand, tuple(dimensions)) if dimensions else operand


def concatenate(operands, dimension: int):
    return vnp.concatenate(list(operands), axis=dimension)


def pad(operand, padding_value, padding_config):
    """operand with (low, high, interior) padding per axis, the new entries padding_value.
    Negative low/high padding (cropping) is not supported."""
    operand = vnp.asarray(operand)
    config = [tuple(int(v) for v in c) for c in padding_config]
    if len(config) != operand.ndim:
        raise ShapeError(f"pad: {len(config)} (low, high, interior) triples for an operand of "
                         f"rank {operand.ndim}")
    if builtins.any(v < 0 for c in config for v in c):
        raise ShapeError("pad: negative padding is not supported")
    low, high, interior = zip(*config) if config else ((), (), ())
    padded = P.pad(operand, low, high, interior)
    if isinstance(padding_value, (int, float)) and padding_value == 0:
        return padded
    inside = P.pad(vnp.ones(operand.shape, np.float32), low, high, interior)
    return vnp.where(inside > 0.5, padded, padding_value)


def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001
    return P.slice_(operand, tuple(start_indices), tuple(limit_indices),
                    None if strides is None else tuple(strides))


def slice_in_dim(operand, start_index, limit_index, stride: int = 1, axis: int = 0):
    operand = vnp.asarray(operand)
    n = operand.shape[axis]
    start, limit, _ = builtins.slice(start_index, limit_index).indices(n)
    starts, limits, strides = [0] * operand.ndim, list(operand.shape), [1] * operand.ndim
    starts[axis], limits[axis], strides[axis] = start, builtins.max(start, limit), stride
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    operand = vnp.asarray(operand)
    index = index % operand.shape[axis]
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else vnp.squeeze(out, axis=axis)


def split(operand, sizes, axis: int = 0):
    out, start = [], 0
    for s in sizes:
        out.append(slice_in_dim(operand, start, start + s, 1, axis))
        start += s
    return out


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    operand = vnp.asarray(operand)
    shape = tuple(operand.shape)
    stop = len(shape) if stop_dimension is None else stop_dimension
    return vnp.reshape(operand, shape[:start_dimension] +
                       (math.prod(shape[start_dimension:stop]),) + shape[stop:])


def iota(dtype, size: int):
    return vnp.arange(size, dtype=dtype)


def broadcasted_iota(dtype, shape, dimension: int):
    shape = tuple(shape)
    return broadcast_in_dim(vnp.arange(shape[dimension], dtype=dtype), shape, (dimension,))


def full(shape, fill_value, dtype=None):
    return vnp.full(tuple(shape), fill_value, dtype=dtype)


def full_like(x, fill_value, dtype=None, shape=None):
    x = vnp.asarray(x)
    return vnp.full(tuple(x.shape) if shape is None else tuple(shape), fill_value,
                    dtype=x.dtype if dtype is None else dtype)


def zeros_like_array(x):
    return vnp.zeros_like(x)


# ----------------------------------------------------------------------- dynamic indexing

def _start_index(i, name: str):
    """A start index as an int32 scalar, or an ArgumentError (JAX refuses floats too)."""
    i = vnp.asarray(i)
    if P.dtype_of(i) not in ("i32", "bool") or i.ndim:
        raise ArgumentError(f"{name}: start indices must be integer scalars, got "
                            f"{P.dtype_of(i)}[{','.join(str(d) for d in i.shape)}]",
                            source=user_source())
    return vnp.astype(i, np.int32)


def _start(i, n: int, size: int, name: str):
    """JAX's rule: a negative start index counts from the end, then the start is clamped into
    [0, n - size] so the window fits."""
    i = _start_index(i, name)
    return vnp.clip(vnp.where(i < 0, i + n, i), 0, n - size)


def dynamic_slice(operand, start_indices, slice_sizes):
    """operand[s0:s0+k0, s1:s1+k1, ...] with start indices that may be traced, each clamped so
    the window lies inside operand (JAX's rule)."""
    operand = vnp.asarray(operand)
    starts, sizes = list(start_indices), [int(s) for s in slice_sizes]
    if len(starts) != operand.ndim or len(sizes) != operand.ndim:
        raise ShapeError(f"dynamic_slice: {len(starts)} start indices and {len(sizes)} sizes "
                         f"for an operand of rank {operand.ndim}")
    out = operand
    for axis, (s, k) in enumerate(zip(starts, sizes)):
        n = operand.shape[axis]
        if not 0 <= k <= n:
            raise ShapeError(f"dynamic_slice: slice size {k} does not fit axis {axis} of "
                             f"size {n}")
        if k == n:
            _start_index(s, "dynamic_slice")
            continue
        out = vnp.take(out, _start(s, n, k, "dynamic_slice") + vnp.arange(k, dtype=np.int32),
                       axis=axis)
    return out


def dynamic_update_slice(operand, update, start_indices):
    """operand with update written at start_indices (clamped as in dynamic_slice): a select
    between operand and update gathered to operand's shape, so both are differentiable."""
    operand, update = vnp.asarray(operand), vnp.asarray(update)
    starts = list(start_indices)
    if len(starts) != operand.ndim or update.ndim != operand.ndim:
        raise ShapeError(f"dynamic_update_slice: an update of shape {tuple(update.shape)} and "
                         f"{len(starts)} start indices for an operand of shape "
                         f"{tuple(operand.shape)}")
    inside, spread = None, update
    for axis, s in enumerate(starts):
        n, k = operand.shape[axis], update.shape[axis]
        if k > n:
            raise ShapeError(f"dynamic_update_slice: update axis {axis} of size {k} exceeds "
                             f"the operand's {n}")
        rel = vnp.arange(n, dtype=np.int32) - _start(s, n, k, "dynamic_update_slice")
        hit = (rel >= 0) & (rel < k)
        spread = vnp.take(spread, vnp.clip(rel, 0, k - 1), axis=axis)
        shape = [1] * operand.ndim
        shape[axis] = n
        hit = vnp.reshape(hit, shape)
        inside = hit if inside is None else inside & hit
    if inside is None:      # rank 0
        return update
    return vnp.where(inside, spread, operand)


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0):
    operand = vnp.asarray(operand)
    starts = [0] * operand.ndim
    starts[axis] = start_index
    sizes = list(operand.shape)
    sizes[axis] = slice_size
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True):
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else vnp.squeeze(out, axis=axis)


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int):
    operand = vnp.asarray(operand)
    starts = [0] * operand.ndim
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis: int):
    update = vnp.asarray(update)
    if update.ndim == vnp.ndim(operand) - 1:
        update = vnp.expand_dims(update, axis)
    return dynamic_update_slice_in_dim(operand, update, index, axis)


# ------------------------------------------------------------------------------ contraction

def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """Contract lhs and rhs over dimension_numbers = ((lhs_contracting, rhs_contracting),
    (lhs_batch, rhs_batch)); the result's axes are the batch axes, then lhs's free axes, then
    rhs's (JAX's order). Written as an einsum, which vkgrad lowers to its matmul."""
    lhs, rhs = vnp.asarray(lhs), vnp.asarray(rhs)
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(a) for a in x) for x in (lc, rc, lb, rb))
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ShapeError(f"dot_general: dimension_numbers {dimension_numbers} pair unequal "
                         "numbers of axes")
    letters = iter(string.ascii_letters)
    ls = [None] * lhs.ndim
    rs = [None] * rhs.ndim
    batch = []
    for a, b in list(zip(lb, rb)) + list(zip(lc, rc)):
        if lhs.shape[a] != rhs.shape[b]:
            raise ShapeError(f"dot_general: lhs axis {a} (size {lhs.shape[a]}) and rhs axis "
                             f"{b} (size {rhs.shape[b]}) are paired but differ")
        ls[a] = rs[b] = next(letters)
    batch = [ls[a] for a in lb]
    for i in range(lhs.ndim):
        ls[i] = ls[i] or next(letters)
    for i in range(rhs.ndim):
        rs[i] = rs[i] or next(letters)
    free_l = [ls[i] for i in range(lhs.ndim) if i not in lb and i not in lc]
    free_r = [rs[i] for i in range(rhs.ndim) if i not in rb and i not in rc]
    return vnp.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(batch + free_l + free_r)}",
                      lhs, rhs, preferred_element_type=preferred_element_type)


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """vector . vector, matrix . vector, matrix . matrix (rank 1 or 2 operands)."""
    lhs, rhs = vnp.asarray(lhs), vnp.asarray(rhs)
    if lhs.ndim not in (1, 2) or rhs.ndim not in (1, 2):
        raise ShapeError(f"dot takes rank-1 or rank-2 operands, not {tuple(lhs.shape)} and "
                         f"{tuple(rhs.shape)} (use dot_general)")
    return dot_general(lhs, rhs, (((lhs.ndim - 1,), (0,)), ((), ())),
                       preferred_element_type=preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
    return vnp.matmul(lhs, rhs)


# ---------------------------------------------------------------------------------- sorting

def top_k(operand, k: int):
    """(values, indices) of the k largest entries along the last axis, largest first."""
    return P.top_k(operand, k)


def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """One operand sorted along `dimension`, or a tuple of operands sorted by the first
    (num_keys 1), as lax.sort."""
    if isinstance(operand, (tuple, list)):
        if num_keys != 1:
            raise ArgumentError("sort: only num_keys=1 is supported")
        keys, *rest = operand
        idx = vnp.argsort(keys, axis=dimension)
        return tuple(vnp.take_along_axis(x, idx, axis=dimension) for x in (keys, *rest))
    return vnp.sort(operand, axis=dimension)


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    return sort((keys, values), dimension)


class Precision(enum.Enum):
    """jax.lax.Precision, for `precision=` arguments: vkgrad's products all compute in float32,
    which is HIGHEST, so every value means the same here."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


__all__ = sorted(["Precision", *_UNARY, *_BINARY, "round", "RoundingMethod", "integer_pow", "clamp",
                  "select", "select_n", "stop_gradient", "optimization_barrier", "convert_element_type", "reduce_sum",
                  "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin", "cumsum",
                  "cumprod", "broadcast_in_dim", "broadcast", "reshape", "transpose",
                  "squeeze", "expand_dims", "rev", "concatenate", "pad", "slice",
                  "slice_in_dim", "index_in_dim", "split", "collapse", "iota",
                  "broadcasted_iota", "full", "full_like", "zeros_like_array",
                  "dynamic_slice", "dynamic_update_slice", "dynamic_slice_in_dim",
                  "dynamic_index_in_dim", "dynamic_update_slice_in_dim",
                  "dynamic_update_index_in_dim", "dot_general", "dot", "batch_matmul",
                  "top_k", "sort", "sort_key_val",
                  # control flow (vkgrad/control_flow.py)
                  "scan", "fori_loop", "while_loop", "cond", "switch", "map",
                  "associative_scan"])


# ------------------------------------------------------------------ convolution, windows
# JAX's conv_general_dilated, conv, conv_with_general_padding, conv_transpose, reduce_window
# (jax/_src/lax/convolution.py, windowed_reductions.py): dimension_numbers become transposes to
# the primitive's one layout (N, C, spatial / O, I, spatial: vkgrad/primitives/convolution.py)
# and back; a transpose next to another folds away in the optimizer.

class ConvDimensionNumbers(tuple):
    """(lhs_spec, rhs_spec, out_spec): each the axis positions of (batch or out-feature,
    feature or in-feature, spatial...) as JAX's namedtuple of that name."""

    def __new__(cls, lhs_spec, rhs_spec, out_spec):
        return super().__new__(cls, (tuple(lhs_spec), tuple(rhs_spec), tuple(out_spec)))

    lhs_spec = property(lambda self: self[0])
    rhs_spec = property(lambda self: self[1])
    out_spec = property(lambda self: self[2])


def _conv_error(message):
    return ShapeError(f"conv_general_dilated: {message}", source=user_source())


def conv_general_permutations(dimension_numbers):
    """JAX's: the (lhs, rhs, out) permutations to (N, C, spatial...) of three layout strings
    such as ("NHWC", "HWIO", "NHWC"); spatial dims in the rhs string's order."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for spec, (a, b) in zip(dimension_numbers, pairs):
        if spec.count(a) != 1 or spec.count(b) != 1 or len(set(spec)) != len(spec):
            raise _conv_error(f"dimension_numbers {tuple(dimension_numbers)}: {spec!r} needs "
                              f"one '{a}', one '{b}' and distinct spatial letters")
    spatial = [set(s) - set(p) for s, p in zip(dimension_numbers, pairs)]
    if not spatial[0] == spatial[1] == spatial[2]:
        raise _conv_error(f"dimension_numbers {tuple(dimension_numbers)}: the three layouts "
                          "must name the same spatial dimensions")

    def perm(spec, pair):
        sp = sorted((i for i, c in enumerate(spec) if c not in pair),
                    key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(sp)

    return tuple(perm(s, p) for s, p in zip(dimension_numbers, pairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """dimension_numbers (None, three layout strings, or ConvDimensionNumbers) as
    ConvDimensionNumbers for operands of these shapes (JAX's)."""
    nd = len(lhs_shape)
    if len(rhs_shape) != nd or nd < 3:
        raise _conv_error(f"lhs {tuple(lhs_shape)} and rhs {tuple(rhs_shape)} need the same "
                          "rank, at least 3 (batch, feature, spatial...)")
    if dimension_numbers is None:
        canonical = tuple(range(nd))
        return ConvDimensionNumbers(canonical, canonical, canonical)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(dimension_numbers) != 3:
        raise _conv_error(f"dimension_numbers {dimension_numbers!r}: give three layouts "
                          "(lhs, rhs, out), e.g. ('NHWC', 'HWIO', 'NHWC')")
    if builtins.all(isinstance(s, str) for s in dimension_numbers):
        for what, spec in zip(("lhs", "rhs", "out"), dimension_numbers):
            if len(spec) != nd:
                raise _conv_error(f"the {what} layout {spec!r} has {len(spec)} letters for "
                                  f"rank-{nd} operands (lhs {tuple(lhs_shape)}, rhs "
                                  f"{tuple(rhs_shape)})")
        return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
    return ConvDimensionNumbers(*dimension_numbers)


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """'SAME', 'SAME_LOWER' or 'VALID' as (low, high) pairs per dimension (JAX's)."""
    kind = str(padding).upper()
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ArgumentError(f"padding {padding!r}: expected 'VALID', 'SAME', 'SAME_LOWER' or "
                            "(low, high) pairs")
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides):
        total = builtins.max((-(-n // s) - 1) * s + k - n, 0)
        half = total // 2
        pads.append((half, total - half) if kind == "SAME" else (total - half, half))
    return pads


def _dilated(shape, dilation):
    return [dilate(n, d) for n, d in zip(shape, dilation)]


def _inverse(perm):
    return tuple(int(i) for i in np.argsort(perm))


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """JAX's general convolution: strides, padding ('SAME', 'VALID' or (low, high) pairs), lhs
    dilation (a transposed convolution), rhs dilation (atrous), dimension_numbers, feature
    groups (grouped, depthwise). precision is accepted and ignored (vkgrad computes f32 in
    f32); batch_group_count other than 1 is not supported."""
    lhs, rhs = vnp.asarray(lhs), vnp.asarray(rhs)
    if batch_group_count != 1:
        raise ArgumentError(f"conv_general_dilated: batch_group_count={batch_group_count} is "
                            "not supported (only 1)")
    dn = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    lhs_t, rhs_t = vnp.transpose(lhs, dn.lhs_spec), vnp.transpose(rhs, dn.rhs_spec)
    nd = lhs.ndim - 2
    one = (1,) * nd
    lhs_dilation = tuple(lhs_dilation or one)
    rhs_dilation = tuple(rhs_dilation or one)
    window_strides = tuple(window_strides)
    for name, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if not builtins.all(isinstance(d, (int, np.integer)) and d >= 1 for d in v):
            raise _conv_error(f"{name} {v}: every entry must be a positive integer")
    if isinstance(padding, str):
        padding = padtype_to_pads(lhs_t.shape[2:], _dilated(rhs_t.shape[2:], rhs_dilation),
                                  window_strides, padding)
    padding = tuple(tuple(p) for p in padding)
    if builtins.any(len(p) != 2 for p in padding):
        raise _conv_error(f"padding {padding}: give one (low, high) pair per spatial dimension")
    letters = [dimension_numbers[i] if isinstance(dimension_numbers, (tuple, list)) and
               builtins.all(isinstance(s, str) for s in dimension_numbers) else None
               for i in range(2)]
    specs = ["".join(s[i] for i in perm) if s else ""
             for s, perm in zip(letters, (dn.lhs_spec, dn.rhs_spec))]
    try:
        check_conv(tuple(lhs_t.shape), tuple(rhs_t.shape), window_strides, padding,
                   lhs_dilation, rhs_dilation, int(feature_group_count), *specs)
    except ShapeError as e:
        raise ShapeError(e.message, source=user_source()) from None
    out = P.conv(lhs_t, rhs_t, window_strides, padding, lhs_dilation, rhs_dilation,
                 feature_group_count)
    out = vnp.transpose(out, _inverse(dn.out_spec))
    return out if preferred_element_type is None else vnp.astype(out, preferred_element_type)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """conv_general_dilated in the NCHW / OIHW layout, without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k, s, padding):
    """JAX's: the (low, high) padding of a transposed convolution's dilated input."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + builtins.max(k - s, 0)
        low = k - 1
    else:
        raise ArgumentError(f"conv_transpose: padding {padding!r} must be 'SAME', 'VALID' or "
                            "(low, high) pairs")
    return low, total - low


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None):
    """JAX's transposed convolution: the input dilated by `strides`, convolved at stride 1
    (layouts default to NHC/NHWC/NHWDC with HIO/HWIO/HWDIO kernels, as JAX's)."""
    lhs, rhs = vnp.asarray(lhs), vnp.asarray(rhs)
    nd = lhs.ndim
    if dimension_numbers is None:
        spatial = {3: "H", 4: "HW", 5: "HWD"}.get(nd)
        if spatial is None:
            raise _conv_error(f"conv_transpose has default layouts for rank 3 to 5, not {nd}")
        dimension_numbers = ("N" + spatial + "C", spatial + "IO", "N" + spatial + "C")
    dn = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    rhs_dilation = tuple(rhs_dilation or (1,) * (nd - 2))
    if isinstance(padding, str):
        window = _dilated([rhs.shape[i] for i in dn.rhs_spec[2:]], rhs_dilation)
        padding = [_conv_transpose_padding(k, s, padding) for k, s in zip(window, strides)]
    if transpose_kernel:
        rhs = vnp.flip(rhs, tuple(dn.rhs_spec[2:]))
        rhs = vnp.swapaxes(rhs, dn.rhs_spec[0], dn.rhs_spec[1])
    return conv_general_dilated(lhs, rhs, (1,) * (nd - 2), padding, strides, rhs_dilation, dn,
                                preferred_element_type=preferred_element_type)


def reduce_window(operand, init_value, computation, window_dimensions, window_strides,
                  padding, base_dilation=None, window_dilation=None):
    """JAX's reduce_window on one array: `computation` (lax.add, lax.max, vnp.maximum, any
    associative binary function of arrays) folded over each window, starting from init_value;
    padding and base dilation fill with init_value. The fold is over strided slices, one per
    window position, in row-major order, so a max's gradient goes to the first maximum of a
    window (JAX's select_and_scatter_add with `ge`) and overlapping windows add up."""
    x = vnp.asarray(operand)
    nd = x.ndim
    window = tuple(int(k) for k in window_dimensions)
    strides = tuple(int(s) for s in window_strides)
    base = tuple(base_dilation or (1,) * nd)
    wdil = tuple(window_dilation or (1,) * nd)
    if not len(window) == len(strides) == len(base) == len(wdil) == nd:
        raise ShapeError(f"reduce_window: window {window}, strides {strides} and dilations "
                         f"need one entry per dimension of the operand {tuple(x.shape)}")
    if isinstance(padding, str):
        padding = padtype_to_pads(_dilated(x.shape, base), _dilated(window, wdil), strides,
                                  padding)
    x = pad(x, init_value, [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base)])
    out = [(n - dilate(k, d)) // s + 1
           for n, k, d, s in zip(x.shape, window, wdil, strides)]
    if builtins.min(out, default=1) < 1:
        raise ShapeError(f"reduce_window: the window {window} (dilated by {wdil}) is larger "
                         f"than the padded operand {tuple(x.shape)}")
    computation, result = _first_wins(computation), None
    for r in np.ndindex(*window):
        start = [k * d for k, d in zip(r, wdil)]
        part = slice(x, start, [b + (m - 1) * s + 1 for b, m, s in zip(start, out, strides)],
                     strides)
        result = part if result is None else computation(result, part)
    return computation(result, vnp.astype(vnp.asarray(init_value), x.dtype))


def _first_wins(computation):
    """max and min folded so that the first of tied elements takes the gradient, as JAX's
    reduce_window max and min do (select_and_scatter_add with ge, le); maximum's own rule
    halves a tie (JAX's too). A NaN still wins."""
    if computation in (max, vnp.maximum):
        return lambda a, b: vnp.where(vnp.logical_or(b > a, vnp.isnan(b)), b, a)
    if computation in (min, vnp.minimum):
        return lambda a, b: vnp.where(vnp.logical_or(b < a, vnp.isnan(b)), b, a)
    return computation


__all__ = sorted(__all__ + ["ConvDimensionNumbers", "conv_general_permutations",
                            "conv_dimension_numbers", "padtype_to_pads",
                            "conv_general_dilated", "conv", "conv_with_general_padding",
                            "conv_transpose", "reduce_window"])


# ------------------------------------------------------------------------------- collectives
# Over a named axis bound by vg.vmap(f, axis_name=...) or vg.distributed.data_parallel(f,
# axis_name=...) (vkgrad/primitives/collective.py); each reduces every leaf of a pytree in one
# eqn. A Python number is the same on every member: psum(1, name) is the axis' size, as in JAX.

def _collective(p, x, axis_name, of_number):
    leaves, tree = tree_flatten(x)
    n = C.axis_size(axis_name)
    arrays = [i for i, v in enumerate(leaves) if not isinstance(v, (int, float))]
    outs = list(C.collective(p, [vnp.asarray(leaves[i]) for i in arrays], axis_name))
    done = {i: outs[k] for k, i in enumerate(arrays)}
    return tree_unflatten(tree, [done[i] if i in done else of_number(v, n)
                                 for i, v in enumerate(leaves)])


def psum(x, axis_name, *, axis_index_groups=None):
    """The sum of x over the members of the named axis (JAX's lax.psum)."""
    _no_groups("psum", axis_index_groups)
    return _collective(C.psum_p, x, axis_name, lambda v, n: v * n)


def pmean(x, axis_name, *, axis_index_groups=None):
    """The mean of x over the members of the named axis (JAX's lax.pmean)."""
    _no_groups("pmean", axis_index_groups)
    n = C.axis_size(axis_name)
    return tree_map(lambda v: v / n, psum(x, axis_name))


def pmax(x, axis_name, *, axis_index_groups=None):
    """The elementwise maximum of x over the members of the named axis (JAX's lax.pmax)."""
    _no_groups("pmax", axis_index_groups)
    return _collective(C.pmax_p, x, axis_name, lambda v, n: v)


def pmin(x, axis_name, *, axis_index_groups=None):
    """The elementwise minimum of x over the members of the named axis (JAX's lax.pmin)."""
    _no_groups("pmin", axis_index_groups)
    return _collective(C.pmin_p, x, axis_name, lambda v, n: v)


def axis_size(axis_name) -> int:
    """The number of members of the named axis (JAX's lax.axis_size)."""
    return C.axis_size(axis_name)


def _no_groups(name, groups):
    if groups is not None:
        raise ArgumentError(f"{name}: axis_index_groups is not supported (every member of the "
                            "axis takes part)", source=user_source())


__all__ = sorted(__all__ + ["psum", "pmean", "pmax", "pmin", "axis_size"])


# ---------------------------------------------------------------- general reductions, scans
# JAX's lax.reduce (jax/_src/lax/lax.py): a monoid it knows (add, mul, max, min, and, or) is the
# matching reduction; any other associative computation is folded pairwise over halves of each
# reduced axis (log2 depth of slices; an odd last element is carried to the next level), then
# once with the init value. The multi-operand form folds tuples (computation takes two tuples
# and returns one).

_MONOIDS = {}   # computation: the reduction it is (filled below, once the names exist)


def _fold_axis(leaves, ax, combine):
    """leaves reduced along axis ax by combine (lists of arrays to a list) in halving steps."""
    n = leaves[0].shape[ax]
    while n > 1:
        m = n // 2
        lo = [slice_in_dim(x, 0, m, axis=ax) for x in leaves]
        hi = [slice_in_dim(x, m, 2 * m, axis=ax) for x in leaves]
        folded = combine(lo, hi)
        if n % 2:
            folded = [vnp.concatenate([f, slice_in_dim(x, 2 * m, n, axis=ax)], ax)
                      for f, x in zip(folded, leaves)]
        leaves, n = folded, m + n % 2
    return [vnp.squeeze(x, ax) for x in leaves]


def _fold_axes(leaves, dims, combine):
    for d in sorted(dims, reverse=True):
        leaves = _fold_axis(leaves, d, combine)
    return leaves


def reduce(operands, init_values, computation, dimensions):  # noqa: A001
    """JAX's lax.reduce: operands (an array or a pytree of arrays of one shape) reduced over
    `dimensions` by the associative `computation`, starting from init_values (the same pytree
    of scalars). computation(a, b) takes and returns that pytree."""
    leaves, tree = tree_flatten(operands)
    inits, init_tree = tree_flatten(init_values)
    if not leaves or len(inits) != len(leaves):
        raise ArgumentError(f"lax.reduce: init_values needs one scalar per operand, got "
                            f"{len(inits)} for {len(leaves)}", source=user_source())
    leaves = [vnp.asarray(x) for x in leaves]
    shape = tuple(leaves[0].shape)
    if any(tuple(x.shape) != shape for x in leaves):
        raise ShapeError("lax.reduce: the operands need one shape, got "
                         + ", ".join(str(tuple(x.shape)) for x in leaves), source=user_source())
    dims = tuple(int(d) for d in dimensions)
    if len(set(dims)) != len(dims) or any(not 0 <= d < len(shape) for d in dims):
        raise ArgumentError(f"lax.reduce: dimensions {dims} need distinct axes of the operand "
                            f"shape {shape}", source=user_source())
    inits = [vnp.astype(vnp.asarray(v), x.dtype) for v, x in zip(inits, leaves)]
    if any(v.ndim for v in inits):
        raise ShapeError("lax.reduce: each init value must be a scalar", source=user_source())

    def combine(a, b):
        out = computation(tree_unflatten(tree, a), tree_unflatten(tree, b))
        return [vnp.asarray(o) for o in tree_flatten(out)[0]]

    if any(shape[d] == 0 for d in dims):
        kept = tuple(n for i, n in enumerate(shape) if i not in dims)
        return tree_unflatten(tree, [vnp.broadcast_to(v, kept) for v in inits])
    if len(leaves) == 1 and computation in _MONOIDS and shape:
        out = [_MONOIDS[computation](leaves[0], dims)]
    else:
        out = _fold_axes(leaves, dims, combine)
    return tree_unflatten(tree, combine(out, inits))


def _check_bits(name, x, kinds="bi"):
    x = vnp.asarray(x, dtype=np.int32) if isinstance(x, int) else vnp.asarray(x)
    if np.dtype(x.dtype).kind not in kinds:
        raise DTypeError(f"lax.{name} needs a {'bool or integer' if 'b' in kinds else 'integer'}"
                         f" operand, got {x.dtype}", source=user_source())
    return x


def reduce_and(operand, axes):
    """All of a bool operand's reduced elements; the bitwise and of an integer one's (-1, all
    bits set, is True as a bool: the unit either way)."""
    return reduce(_check_bits("reduce_and", operand), -1, vnp.bitwise_and, axes)


def reduce_or(operand, axes):
    return reduce(_check_bits("reduce_or", operand), 0, vnp.bitwise_or, axes)


def reduce_xor(operand, axes):
    """bool: an odd count of True; integers: the bitwise xor of the reduced elements."""
    return reduce(_check_bits("reduce_xor", operand), 0, vnp.bitwise_xor, axes)


def _cum(name, fn):
    def cum(operand, axis: int = 0, reverse: bool = False):
        x = vnp.asarray(operand)
        if not -x.ndim <= axis < x.ndim:
            raise ShapeError(f"lax.{name}: axis {axis} is out of range for an operand of shape "
                             f"{tuple(x.shape)}", source=user_source())
        return associative_scan(fn, x, reverse=reverse, axis=axis % x.ndim)
    cum.__name__ = cum.__qualname__ = name
    cum.__doc__ = (f"JAX's lax.{name}: the inclusive running {name[3:]} along `axis` (from its end "
                   "with reverse), an associative_scan.")
    return cum


cummax = _cum("cummax", vnp.maximum)
cummin = _cum("cummin", vnp.minimum)
cumlogsumexp = _cum("cumlogsumexp", vnp.logaddexp)

# ----------------------------------------------------------------- special functions, bits

def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x) (scipy's gammainc)."""
    return gammainc(a, x)


def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x) (scipy's gammaincc)."""
    return gammaincc(a, x)


def regularized_incomplete_beta(a, b, x):
    """I_x(a, b) (scipy's betainc)."""
    return betainc(a, b, x)


def bessel_i0e(x):
    return i0e(x)


def bessel_i1e(x):
    return i1e(x)


def zeta(x, q):
    """The Hurwitz zeta function sum over k >= 0 of (q + k)^-x (x > 1, q > 0)."""
    return _zeta(x, q)


def polygamma(m, x):
    """The m-th derivative of digamma (scipy's polygamma)."""
    return _polygamma(m, x)


def _shift(name, x, y):
    """x and y checked as integers of one dtype; y with its amounts outside [0, bits) as 0,
    and where they were."""
    x, y = _check_bits(name, x, "i"), _check_bits(name, y, "i")
    if x.dtype != y.dtype:
        raise DTypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                         f"{x.dtype}, {y.dtype}", source=user_source())
    bits = 8 * np.dtype(x.dtype).itemsize
    out_of_range = (y < 0) | (y >= bits)
    return x, vnp.where(out_of_range, 0, y), out_of_range, bits


def shift_left(x, y):
    """x << y; 0 where y is not in [0, bits) (JAX's, where C leaves it undefined)."""
    x, y, bad, _ = _shift("shift_left", x, y)
    return vnp.where(bad, 0, vnp.left_shift(x, y))


def shift_right_arithmetic(x, y):
    """x >> y filling with the sign bit; all sign bits where y is not in [0, bits)."""
    x, y, bad, bits = _shift("shift_right_arithmetic", x, y)
    return vnp.where(bad, vnp.right_shift(x, bits - 1), vnp.right_shift(x, y))


def shift_right_logical(x, y):
    """x >> y filling with zeros; 0 where y is not in [0, bits). The arithmetic shift's sign
    bits cleared by a mask ~(-1 << (bits - 1 - y) << 1), shifts only (no int32 overflow)."""
    x, y, bad, bits = _shift("shift_right_logical", x, y)
    mask = vnp.invert(vnp.left_shift(vnp.left_shift(vnp.full_like(x, -1), bits - 1 - y), 1))
    return vnp.where(bad, 0, vnp.bitwise_and(vnp.right_shift(x, y), mask))


def population_count(x):
    """The number of set bits of each integer (of its 32-bit two's complement)."""
    return _population_count(_check_bits("population_count", x, "i"))


def clz(x):
    """The number of leading zero bits of each int32 (32 for 0, 0 for a negative)."""
    x = _check_bits("clz", x, "i")
    for s in (1, 2, 4, 8, 16):          # every bit below the highest set one set too
        x = vnp.bitwise_or(x, vnp.right_shift(x, s))
    return 32 - population_count(x)


def nextafter(x1, x2):
    """The next representable float after x1 in the direction of x2 (vnp.nextafter, for two
    float operands of one dtype)."""
    x, y = vnp.asarray(x1), vnp.asarray(x2)
    if x.dtype != y.dtype or np.dtype(x.dtype).kind != "f":
        raise DTypeError(f"lax.nextafter needs two float operands of one dtype, got {x.dtype}, "
                         f"{y.dtype}", source=user_source())
    return vnp.nextafter(x, y)


def _all_or_fold(bool_reduction, name):
    """A bool operand's all/any; an integer one's bitwise fold (no integer reduction to map)."""
    def reduction(x, dims):
        if x.dtype == np.bool_:
            return bool_reduction(x, axis=dims)
        return _fold_axes([x], dims, lambda a, b: [globals()[name](a[0], b[0])])[0]
    return reduction


_MONOIDS.update({
    bitwise_and: _all_or_fold(vnp.all, "bitwise_and"),
    vnp.bitwise_and: _all_or_fold(vnp.all, "bitwise_and"),
    bitwise_or: _all_or_fold(vnp.any, "bitwise_or"),
    vnp.bitwise_or: _all_or_fold(vnp.any, "bitwise_or")})
_MONOIDS.update({
    fn: red for fns, red in [((add, vnp.add), reduce_sum), ((mul, vnp.multiply), reduce_prod),
                             ((max, vnp.maximum), reduce_max), ((min, vnp.minimum), reduce_min)]
    for fn in fns})

__all__ = sorted(__all__ + ["reduce", "reduce_and", "reduce_or", "reduce_xor", "cummax", "cummin",
                            "cumlogsumexp", "igamma", "igammac", "regularized_incomplete_beta",
                            "bessel_i0e", "bessel_i1e", "zeta", "polygamma", "population_count",
                            "clz", "nextafter", "shift_left", "shift_right_arithmetic",
                            "shift_right_logical"])


# ------------------------------------------------------------------ gather and scatter

class GatherScatterMode(enum.Enum):
    """What lax.gather and the scatters do with a window that does not fit in the operand:
    CLIP clamps its start so that it fits; FILL_OR_DROP (mode=None, JAX's default) fills a
    gathered window with fill_value and drops a scattered one; PROMISE_IN_BOUNDS promises
    that none happens (here: clamped, as CLIP)."""
    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2

    @staticmethod
    def from_any(s):
        if isinstance(s, GatherScatterMode):
            return s
        names = {"clip": "CLIP", None: "FILL_OR_DROP", "fill": "FILL_OR_DROP",
                 "drop": "FILL_OR_DROP", "promise_in_bounds": "PROMISE_IN_BOUNDS"}
        if not isinstance(s, (str, type(None))) or s not in names:
            raise ArgumentError(f"unknown gather/scatter mode {s!r}: use 'clip', 'fill', 'drop', "
                                f"'promise_in_bounds' or a GatherScatterMode",
                                source=user_source())
        return GatherScatterMode[names[s]]


class GatherDimensionNumbers(NamedTuple):
    """jax.lax.GatherDimensionNumbers: where each operand dimension goes in lax.gather's output
    (the index vector is start_indices' last dimension, as JAX's)."""
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """jax.lax.ScatterDimensionNumbers: where each updates dimension goes in the operand."""
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


def _dims(name, what, dims, rank, ordered=True):
    """dims as a tuple of distinct ints in [0, rank) (sorted where JAX asks it), or a
    ShapeError naming the field."""
    dims = tuple(int(d) for d in dims)
    if any(not 0 <= d < rank for d in dims) or len(set(dims)) != len(dims) or \
            (ordered and list(dims) != sorted(dims)):
        raise ShapeError(f"{name}: {what} {dims} must be distinct{', sorted' if ordered else ''} "
                         f"dimensions in [0, {rank})", source=user_source())
    return dims


def _index_vectors(name, indices, n_map, batching):
    """The start indices as int32, numpy's where concrete (the windows' positions are then
    computed at trace time), checked against the index map and the batching dims."""
    if isinstance(indices, Tracer):
        kind = "i" if P.dtype_of(indices) == "i32" else "f"
    else:
        indices = np.asarray(indices)
        kind = indices.dtype.kind
    if kind not in "iu" or indices.ndim == 0:
        raise ArgumentError(f"{name}: the indices must be an integer array whose last dimension "
                            f"holds the index vectors, got {indices.dtype}"
                            f"[{','.join(str(d) for d in indices.shape)}]", source=user_source())
    if indices.shape[-1] != n_map:
        raise ShapeError(f"{name}: index vectors of length {indices.shape[-1]} (the indices' "
                         f"last dimension) for {n_map} operand dimensions in the index map",
                         source=user_source())
    _dims(name, "the indices' batching dims", batching, indices.ndim - 1, ordered=False)
    return indices if isinstance(indices, Tracer) else indices.astype(np.int32)


def _check_operand_dims(name, shape, window, index_map, batching, other_batching, squeezed,
                        squeezed_what, batch_shape):
    """The checks gather and scatter share: operand dims, the batching pairs, window sizes."""
    rank = len(shape)
    index_map = _dims(name, "the index map", index_map, rank, ordered=False)
    batching = _dims(name, "operand_batching_dims", batching, rank)
    squeezed = _dims(name, squeezed_what, squeezed, rank)
    if set(batching) & (set(squeezed) | set(index_map)):
        raise ShapeError(f"{name}: operand_batching_dims {batching} overlap {squeezed_what} or "
                         f"the index map", source=user_source())
    if len(batching) != len(other_batching) or any(
            shape[d] != batch_shape[b] for d, b in zip(batching, other_batching)):
        raise ShapeError(f"{name}: operand_batching_dims {batching} (sizes "
                         f"{[shape[d] for d in batching]}) do not pair with the indices' "
                         f"batching dims {tuple(other_batching)}", source=user_source())
    for d in range(rank):
        if not 0 <= window[d] <= shape[d] or (d in squeezed + batching and window[d] != 1):
            raise ShapeError(f"{name}: a window of size {window[d]} on operand dimension {d} "
                             f"of size {shape[d]}" + (f" (one in {squeezed_what} or a batching "
                                                      f"dim must have size 1)"
                                                      if d in squeezed + batching else ""),
                             source=user_source())
    return index_map, batching, [d for d in range(rank) if d not in squeezed + batching]


def _window_positions(shape, indices, index_map, batching, idx_batching, window, kept, mode):
    """The flat position in an operand of `shape` of every element of every window: an int32
    array of shape indices.shape[:-1] + the kept dims' window sizes, and (FILL_OR_DROP) a mask
    of the windows that fit, shaped to broadcast with it (None: all do, or clamped)."""
    xp = np if isinstance(indices, np.ndarray) else vnp
    batch = tuple(indices.shape[:-1])
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    base, ok = xp.zeros(batch, np.int32), None
    for k, d in enumerate(index_map):
        s, hi = indices[..., k], shape[d] - window[d]
        if mode is GatherScatterMode.FILL_OR_DROP:
            fits = (s >= 0) & (s <= hi)
            ok = fits if ok is None else ok & fits
        base = base + xp.clip(s, 0, hi) * strides[d]
    for d, b in zip(batching, idx_batching):   # the i-th window of a batch reads batch i
        base = base + np.arange(batch[b], dtype=np.int32).reshape(
            [-1 if i == b else 1 for i in range(len(batch))]) * strides[d]
    offsets = np.zeros((), np.int32)
    for d in kept:
        offsets = offsets[..., None] + np.arange(window[d], dtype=np.int32) * strides[d]
    tail = (1,) * len(kept)
    pos = xp.reshape(base, batch + tail) + offsets
    if ok is not None:
        ok = xp.reshape(ok, batch + tail)
        if xp is np and ok.all():
            ok = None
    return (pos.astype(np.int32) if xp is np else pos), ok


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, indices_are_sorted=False,
           unique_indices=False, mode=None, fill_value=None):
    """jax.lax.gather (XLA's Gather): a window of slice_sizes at each index vector, composed as
    one vnp.take of the flattened operand at every output element's flat position (so its
    gradient is take's). Start indices are not wrapped: a window that does not fit is filled
    (FILL_OR_DROP; fill_value None: NaN for floats, the smallest int, True) or clamped (CLIP)."""
    operand, dn = vnp.asarray(operand), dimension_numbers
    mode, shape = GatherScatterMode.from_any(mode), tuple(operand.shape)
    sizes = tuple(int(s) for s in slice_sizes)
    if len(sizes) != len(shape):
        raise ShapeError(f"gather: {len(sizes)} slice sizes for an operand of rank {len(shape)}",
                         source=user_source())
    indices = _index_vectors("gather", start_indices, len(dn.start_index_map),
                             dn.start_indices_batching_dims)
    batch = tuple(indices.shape[:-1])
    index_map, batching, kept = _check_operand_dims(
        "gather", shape, sizes, dn.start_index_map, dn.operand_batching_dims,
        dn.start_indices_batching_dims, dn.collapsed_slice_dims, "collapsed_slice_dims", batch)
    rank = len(batch) + len(kept)
    offset_dims = _dims("gather", "offset_dims", dn.offset_dims, rank)
    if len(offset_dims) != len(kept):
        raise ShapeError(f"gather: {len(offset_dims)} offset_dims for the {len(kept)} operand "
                         f"dimensions neither collapsed nor batching", source=user_source())
    pos, ok = _window_positions(shape, indices, index_map, batching,
                                dn.start_indices_batching_dims, sizes, kept, mode)
    batch_at = [p for p in range(rank) if p not in offset_dims]
    perm = [len(batch) + offset_dims.index(p) if p in offset_dims else batch_at.index(p)
            for p in range(rank)]
    out = vnp.take(vnp.ravel(operand), vnp.transpose(pos, perm))
    if ok is None:
        return out
    dt = np.dtype(operand.dtype)
    if fill_value is None:
        fill_value = np.nan if dt.kind == "f" else True if dt.kind == "b" else np.iinfo(dt).min
    return vnp.where(vnp.transpose(ok, perm), out, np.asarray(fill_value, dt))


def _scatter(name, operand, scatter_indices, updates, dimension_numbers, mode, combine):
    """operand with each update window combined into it (combine: an x.at[...] method), one
    x.at[flat positions] on the flattened operand; FILL_OR_DROP sends a window that does not
    fit to one more slot past the end, which is then cut off."""
    operand, updates, dn = vnp.asarray(operand), vnp.asarray(updates), dimension_numbers
    mode, shape = GatherScatterMode.from_any(mode), tuple(operand.shape)
    indices = _index_vectors(name, scatter_indices, len(dn.scatter_dims_to_operand_dims),
                             dn.scatter_indices_batching_dims)
    batch = tuple(indices.shape[:-1])
    window_dims = _dims(name, "update_window_dims", dn.update_window_dims, updates.ndim)
    batch_at = [p for p in range(updates.ndim) if p not in window_dims]
    if tuple(updates.shape[p] for p in batch_at) != batch:
        raise ShapeError(f"{name}: updates of shape {tuple(updates.shape)} with "
                         f"update_window_dims {window_dims} for indices of batch shape {batch}",
                         source=user_source())
    inserted = _dims(name, "inserted_window_dims", dn.inserted_window_dims, len(shape))
    kept = [d for d in range(len(shape))
            if d not in inserted + tuple(int(b) for b in dn.operand_batching_dims)]
    if len(kept) != len(window_dims):
        raise ShapeError(f"{name}: {len(window_dims)} update_window_dims for the {len(kept)} "
                         f"operand dimensions neither inserted nor batching",
                         source=user_source())
    window = [1] * len(shape)
    for d, p in zip(kept, window_dims):
        window[d] = updates.shape[p]
    index_map, batching, kept = _check_operand_dims(
        name, shape, window, dn.scatter_dims_to_operand_dims, dn.operand_batching_dims,
        dn.scatter_indices_batching_dims, inserted, "inserted_window_dims", batch)
    pos, ok = _window_positions(shape, indices, index_map, batching,
                                dn.scatter_indices_batching_dims, window, kept, mode)
    if combine not in ("add", "set") and not isinstance(pos, np.ndarray):
        raise ArgumentError(f"{name} with traced indices: vkgrad combines repeated positions "
                            f"at trace time, so it needs concrete indices (scatter_add and "
                            f"scatter take traced ones)", source=user_source())
    n = math.prod(shape)
    if ok is not None:
        pos = vnp.where(ok, pos, np.int32(n))
    flat = vnp.concatenate([vnp.ravel(operand), vnp.zeros((1,), operand.dtype)])
    out = getattr(vnp.at(flat)[pos], combine)(vnp.transpose(updates, batch_at + list(window_dims)))
    return vnp.reshape(out[:n], shape)


def _scatter_fn(combine, doc):
    def scatter_op(operand, scatter_indices, updates, dimension_numbers, *,
                   indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter(scatter_op.__name__, operand, scatter_indices, updates,
                        dimension_numbers, mode, combine)
    scatter_op.__doc__ = doc
    return scatter_op


scatter = _scatter_fn("set", "jax.lax.scatter: operand with update windows written at the "
                             "indices (repeated positions: the last update where the indices "
                             "are concrete, their mean where traced; JAX leaves it undefined).")
scatter_add = _scatter_fn("add", "jax.lax.scatter_add: update windows added into operand.")
scatter_mul = _scatter_fn("multiply", "jax.lax.scatter_mul (concrete indices).")
scatter_min = _scatter_fn("min", "jax.lax.scatter_min (concrete indices).")
scatter_max = _scatter_fn("max", "jax.lax.scatter_max (concrete indices).")
for _fn, _name in ((scatter, "scatter"), (scatter_add, "scatter_add"), (scatter_mul, "scatter_mul"),
                   (scatter_min, "scatter_min"), (scatter_max, "scatter_max")):
    _fn.__name__ = _fn.__qualname__ = _name


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """jax.lax.scatter_apply: func applied (once) to each operand element a window of
    update_shape covers: a scatter_add of ones marks them, then a select."""
    operand = vnp.asarray(operand)
    hit = scatter_add(vnp.zeros(operand.shape, np.float32), scatter_indices,
                      vnp.ones(update_shape, np.float32), dimension_numbers, mode=mode)
    return vnp.where(hit > 0, func(operand), operand)


__all__ = sorted(__all__ + ["GatherScatterMode", "GatherDimensionNumbers", "ScatterDimensionNumbers",
                            "gather", "scatter", "scatter_add", "scatter_mul", "scatter_min",
                            "scatter_max", "scatter_apply"])


# ----------------------------------------------------------------------- bit-level views
# vkgrad has no bitcast primitive (nor unsigned or narrow integer dtypes: those are stored as
# int32), so bitcast_convert_type composes one: a float's bit pattern from its sign, binary
# exponent (_pow2, exact) and mantissa, and back. An 8- or 16-bit integer's pattern is its value
# masked to the width; a result of such a dtype holds the value that dtype would (stored int32).

def _float_format(dt):
    """(mantissa bits, exponent bits) of a float dtype."""
    fi = vnp.finfo(dt)
    return int(fi.nmant), int(fi.nexp)


def _float_bits(x, dt):
    """The bit pattern of float x (of dtype dt) as int32 (the low width bits for 16-bit
    floats). NaN gives the quiet NaN (its payload and sign are not visible without a bitcast)."""
    nmant, nexp = _float_format(dt)
    width = 1 + nexp + nmant
    bias = 2 ** (nexp - 1) - 1
    x = vnp.astype(stop_gradient(x), np.float32)
    a = vnp.abs(x)
    sign = vnp.signbit(x)
    tiny = 2.0 ** (1 - bias)
    finite = vnp.isfinite(a) & (a > 0)
    safe = vnp.where(finite & (a >= tiny), a, 1.0)
    e = _exponent(safe, np.float32)                    # floor(log2(safe)), exactly
    normal = finite & (a >= tiny)
    mant_normal = (safe / _pow2(e, np.float32) - 1.0) * 2.0 ** nmant
    mant_sub = a * 2.0 ** (bias - 1) * 2.0 ** nmant   # a / 2^(1 - bias - nmant), in two steps
    field = vnp.where(normal, e + bias, vnp.where(finite | (a == 0), 0, 2 ** nexp - 1))
    mant = vnp.where(normal, mant_normal, vnp.where(finite, mant_sub, 0))
    mant = vnp.where(vnp.isnan(x), 2 ** (nmant - 1), mant)
    low = vnp.astype(field, np.int32) * (2 ** nmant) + vnp.astype(mant, np.int32)
    sign_bit = np.int32(-2 ** 31) if width == 32 else np.int32(2 ** (width - 1))
    return vnp.where(sign & ~vnp.isnan(x), low + sign_bit, low), width


def _from_float_bits(bits, dt):
    """The float of dtype dt whose pattern is bits (int32; the low width bits for 16-bit)."""
    nmant, nexp = _float_format(dt)
    width = 1 + nexp + nmant
    bias = 2 ** (nexp - 1) - 1
    mant = vnp.bitwise_and(bits, 2 ** nmant - 1)
    field = vnp.bitwise_and(shift_right_logical(bits, np.int32(nmant)), 2 ** nexp - 1)
    sign = vnp.bitwise_and(shift_right_logical(bits, np.int32(width - 1)), 1) == 1
    m = vnp.astype(mant, np.float32) * 2.0 ** -nmant
    e = vnp.astype(field, np.float32) - bias
    value = vnp.where(field == 0, m * 2.0 ** (1 - bias),
                      (1.0 + m) * _pow2(vnp.where(field == 0, 0.0, e), np.float32))
    value = vnp.where(field == 2 ** nexp - 1, vnp.where(mant == 0, np.inf, np.nan), value)
    return vnp.astype(vnp.where(sign, -value, value), dt)


def _bit_dtype(name, dtype):
    """(numpy dtype, width) of a dtype bitcast_convert_type can read or write."""
    dt = np.dtype(dtype) if not (isinstance(dtype, str) and dtype == "bfloat16") else \
        np.dtype(vnp.bfloat16)
    if dt == vnp.bfloat16 or dt.kind == "f":
        if dt.itemsize == 8:
            raise DTypeError(f"lax.{name}: 64-bit dtypes are not supported (vkgrad has no 64-bit"
                             " integers to hold their bits)", source=user_source())
        return dt, 8 * dt.itemsize
    if dt.kind in "iu" and dt.itemsize <= 4 and dt != np.uint32:
        return dt, 8 * dt.itemsize
    raise DTypeError(f"lax.{name}: {dt} is not supported: vkgrad bitcasts float32, float16, "
                     "bfloat16, int32 and the 8/16-bit integers (uint32 and 64-bit values do "
                     "not fit its int32 storage)", source=user_source())


def bitcast_convert_type(operand, new_dtype):
    """The bits of operand read as new_dtype (jax.lax.bitcast_convert_type). Same width: the
    same shape. A narrower new_dtype adds a last axis of width ratio (the low part first, as
    on little-endian CPUs); a wider one consumes such a last axis. NaN inputs give the quiet
    NaN's pattern (vkgrad computes the bits, it cannot view them: no payload or NaN sign)."""
    x = vnp.asarray(operand)
    given = operand.dtype if isinstance(operand, (np.ndarray, np.generic)) else x.dtype
    src, w_in = _bit_dtype("bitcast_convert_type", given)   # uint8 data is stored as int32
    dst, w_out = _bit_dtype("bitcast_convert_type", new_dtype)
    if src.kind in "iu":
        bits = x if w_in == 32 else vnp.bitwise_and(x, 2 ** w_in - 1)
    else:
        bits, _ = _float_bits(x, src)
    if w_out < w_in:
        parts = [vnp.bitwise_and(shift_right_logical(bits, np.int32(w_out * k)), 2 ** w_out - 1)
                 for k in range(w_in // w_out)]
        bits = vnp.stack(parts, axis=-1)
    elif w_out > w_in:
        n = w_out // w_in
        if x.ndim == 0 or x.shape[-1] != n:
            raise ShapeError(f"lax.bitcast_convert_type: {src} -> {dst} needs a last axis of "
                             f"{n} (the {n} parts of each result), got shape {tuple(x.shape)}",
                             source=user_source())
        acc = None
        for k in range(n):
            part = vnp.left_shift(vnp.take(bits, k, axis=-1), w_in * k)
            acc = part if acc is None else vnp.bitwise_or(acc, part)
        bits = acc
    if dst.kind in "iu":
        if w_out < 32 and dst.kind == "i":   # sign-extend the low w_out bits
            bits = vnp.right_shift(vnp.left_shift(bits, 32 - w_out), 32 - w_out)
        return bits
    return _from_float_bits(bits, dst)


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """operand rounded to a float with these exponent and mantissa bits and back
    (jax.lax.reduce_precision; XLA's algorithm on the float32 bit pattern: round to nearest
    even, overflow to inf, underflow (to that format's subnormals too) to zero). Its derivative
    is the identity (JAX's rounds the tangent as well)."""
    x = vnp.asarray(operand)
    if np.dtype(x.dtype).kind != "f" and x.dtype != vnp.bfloat16:
        raise DTypeError(f"lax.reduce_precision needs a float operand, got {x.dtype}",
                         source=user_source())
    if not (isinstance(exponent_bits, int) and exponent_bits >= 1 and
            isinstance(mantissa_bits, int) and mantissa_bits >= 0):
        raise ArgumentError(f"lax.reduce_precision: exponent_bits >= 1 and mantissa_bits >= 0 "
                            f"must be ints, got {exponent_bits!r}, {mantissa_bits!r}",
                            source=user_source())
    bits, _ = _float_bits(x, np.float32)
    if mantissa_bits < 23:
        shift = 23 - mantissa_bits
        last = 1 << shift
        last_bit = vnp.bitwise_and(shift_right_logical(bits, np.int32(shift)), 1)
        bits = vnp.bitwise_and(bits + last_bit + ((last >> 1) - 1), np.int32(~(last - 1)))
    if exponent_bits < 8:
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = vnp.bitwise_and(bits, 0x7F800000)
        signed_zero = vnp.bitwise_and(bits, np.int32(-2 ** 31))
        bits = vnp.where(exponent > ((127 + reduced_bias) << 23),
                         vnp.bitwise_or(signed_zero, 0x7F800000),
                         vnp.where(exponent <= ((127 - reduced_bias) << 23), signed_zero, bits))
    out = vnp.where(vnp.isnan(x), x, vnp.astype(_from_float_bits(bits, np.float32), x.dtype))
    return x + stop_gradient(out - x)


def mulhi(x, y):
    """The high 32 bits of the 64-bit product of two int32 (jax.lax.mulhi), by 16-bit halves
    (Hacker's Delight's mulhs: no 64-bit integers)."""
    x, y = _check_bits("mulhi", x, "i"), _check_bits("mulhi", y, "i")
    x0, x1 = vnp.bitwise_and(x, 0xFFFF), vnp.right_shift(x, 16)
    y0, y1 = vnp.bitwise_and(y, 0xFFFF), vnp.right_shift(y, 16)
    w0 = x0 * y0                                      # may wrap: read as unsigned
    t = x1 * y0 + vnp.bitwise_and(vnp.right_shift(w0, 16), 0xFFFF)
    w1, w2 = vnp.bitwise_and(t, 0xFFFF), vnp.right_shift(t, 16)
    t = x0 * y1 + w1
    return x1 * y1 + w2 + vnp.right_shift(t, 16)


__all__ = sorted(__all__ + ["bitcast_convert_type", "reduce_precision", "mulhi"])


# ------------------------------------------------------------- shapes, small compositions

def broadcast_shapes(*shapes) -> tuple:
    """The shape the shapes broadcast to (numpy's rule), as jax.lax.broadcast_shapes."""
    return vnp.broadcast_shapes(*shapes)


def broadcast_like(arr, like_arr):
    """arr broadcast to like_arr's shape (jax.lax.broadcast_like; one device: no sharding)."""
    return vnp.broadcast_to(arr, vnp.shape(like_arr))


def broadcast_to_rank(x, rank: int):
    """x with leading axes of size 1 added up to `rank` (jax.lax.broadcast_to_rank)."""
    x = vnp.asarray(x)
    if x.ndim > rank:
        raise ShapeError(f"lax.broadcast_to_rank: rank {rank} is below x's rank {x.ndim}",
                         source=user_source())
    return x if x.ndim == rank else vnp.reshape(x, (1,) * (rank - x.ndim) + tuple(x.shape))


def empty(shape, dtype, *, out_sharding=None):
    """An array of shape and dtype whose values are unspecified (jax.lax.empty): zeros here."""
    return vnp.zeros(shape, dtype)


def reciprocal(x):
    """1 / x (jax.lax.reciprocal)."""
    return integer_pow(x, -1)


def tile(operand, reps):
    """operand repeated reps[i] times along axis i (jax.lax.tile)."""
    return vnp.tile(operand, tuple(reps))


def stack(operands, axis: int = 0):
    return vnp.stack(operands, axis)


def unstack(x, axis: int = 0):
    return vnp.unstack(x, axis=axis)


def dtype(x):
    """The dtype lax gives x (jax.lax.dtype): a Python float float32, an int int32."""
    return _lax_dtype(x)


def shape_as_value(shape):
    """A shape as an int32 array of its sizes (jax.lax.shape_as_value)."""
    return vnp.asarray(np.asarray(tuple(shape), np.int32))


def index_take(src, idxs, axes):
    """src indexed by the index arrays idxs along axes (jax.lax.index_take): result[i, ...] is
    src at idxs[k][i] on axis axes[k], the other axes kept in order."""
    src = vnp.asarray(src)
    axes = [a % src.ndim for a in axes]
    if len(idxs) != len(axes):
        raise ArgumentError(f"lax.index_take: {len(idxs)} index arrays for {len(axes)} axes",
                            source=user_source())
    rest = [a for a in range(src.ndim) if a not in axes]
    moved = vnp.transpose(src, axes + rest)
    return moved[tuple(vnp.asarray(i) for i in idxs)]


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """jax.lax.scatter_sub: update windows subtracted from operand."""
    return _scatter("scatter_sub", operand, scatter_indices, vnp.negative(updates),
                    dimension_numbers, mode, "add")


def _approx_k(operand, k, reduction_dimension, sign):
    x = vnp.moveaxis(vnp.asarray(operand), reduction_dimension, -1)
    vals, idx = top_k(x if sign > 0 else -x, k)
    vals = vals if sign > 0 else -vals
    return (vnp.moveaxis(vals, -1, reduction_dimension),
            vnp.moveaxis(idx, -1, reduction_dimension))


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """(values, indices) of the k largest along reduction_dimension: exact (top_k), as
    jax.lax.approx_max_k is on CPU."""
    return _approx_k(operand, k, reduction_dimension, 1)


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """(values, indices) of the k smallest along reduction_dimension, exact, smallest first."""
    return _approx_k(operand, k, reduction_dimension, -1)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """lhs [m, k] by rhs [g, k, n] in groups of rows (jax.lax.ragged_dot): rows of group i
    (group_sizes[i] consecutive ones) times rhs[i]; rows past sum(group_sizes) are zero.
    group_sizes must be concrete (the groups become slices)."""
    lhs, rhs = vnp.asarray(lhs), vnp.asarray(rhs)
    if isinstance(group_sizes, Tracer):
        raise ArgumentError("lax.ragged_dot: group_sizes must be concrete (vkgrad slices the "
                            "rows per group); pass numpy values", source=user_source())
    if group_offset is not None:
        raise ArgumentError("lax.ragged_dot: group_offset is not supported",
                            source=user_source())
    sizes = [int(s) for s in np.asarray(group_sizes)]
    if lhs.ndim != 2 or rhs.ndim != 3 or len(sizes) != rhs.shape[0] or \
            lhs.shape[1] != rhs.shape[1] or builtins.sum(sizes) > lhs.shape[0]:
        raise ShapeError(f"lax.ragged_dot: lhs [m, k] {tuple(lhs.shape)}, rhs [g, k, n] "
                         f"{tuple(rhs.shape)} and {len(sizes)} group sizes summing to at most m "
                         f"(got {sizes})", source=user_source())
    parts, start = [], 0
    for i, n in enumerate(sizes):
        parts.append(vnp.matmul(lhs[start:start + n], rhs[i]))
        start += n
    if start < lhs.shape[0]:
        parts.append(vnp.zeros((lhs.shape[0] - start, rhs.shape[2]), vnp.result_type(lhs, rhs)))
    out = vnp.concatenate(parts, 0)
    return out if preferred_element_type is None else vnp.astype(out, preferred_element_type)


def platform_dependent(*args, default=None, **per_platform):
    """The branch for the platform the program runs on (jax.lax.platform_dependent): vkgrad's
    is 'vulkan' (on the interpreter too), else `default`."""
    branch = per_platform.get("vulkan", default)
    if branch is None:
        raise ArgumentError(f"lax.platform_dependent: no 'vulkan' branch and no default (given "
                            f"{sorted(per_platform)})", source=user_source())
    return branch(*args)


def composite(decomposition, name: str, version: int = 0):
    """jax.lax.composite: a function that is its decomposition (vkgrad has no composite ops
    for a backend to match by name; the decomposition is what runs)."""
    def composed(*args, **kwargs):
        return decomposition(*args, **kwargs)
    composed.__name__ = composed.__qualname__ = getattr(decomposition, "__name__", name)
    composed.__doc__ = decomposition.__doc__
    return composed


DotDimensionNumbers = tuple   # ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))
ConvGeneralDilatedDimensionNumbers = tuple   # None, three layout strings, ConvDimensionNumbers


__all__ = sorted(__all__ + ["broadcast_like", "broadcast_shapes", "broadcast_to_rank", "empty", "reciprocal",
                            "tile", "stack", "unstack", "dtype", "shape_as_value", "index_take", "scatter_sub",
                            "approx_max_k", "approx_min_k", "ragged_dot", "platform_dependent",
                            "composite", "DotDimensionNumbers",
                            "ConvGeneralDilatedDimensionNumbers"])


# ------------------------------------------------------------- convolution patches, shapes

def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The patches a convolution sees, flattened into the output's feature axis (jax.lax.
    conv_general_dilated_patches): a grouped convolution with one-hot kernels, as JAX's; the
    feature order is (input channel, then the filter's spatial positions)."""
    lhs = vnp.asarray(lhs)
    filter_shape = tuple(filter_shape)
    dn = conv_dimension_numbers(lhs.shape, (1, 1) + filter_shape, dimension_numbers)
    size = math.prod(filter_shape)
    channels = lhs.shape[dn.lhs_spec[1]]
    eye = vnp.eye(size, dtype=lhs.dtype)
    rhs = vnp.reshape(vnp.broadcast_to(eye, (channels, size, size)),
                      (channels * size, 1) + filter_shape)
    rhs = vnp.moveaxis(rhs, (0, 1), (dn.rhs_spec[0], dn.rhs_spec[1]))
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                dn, feature_group_count=channels,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """An unshared convolution: a different filter at every output position (jax.lax.
    conv_general_dilated_local), the patches (conv_general_dilated_patches) contracted with
    rhs, whose spatial axes are the output's and whose in-feature axis is the patch's."""
    lhs, rhs = vnp.asarray(lhs), vnp.asarray(rhs)
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers)
    lhs_spec, rhs_spec, out_spec = conv_dimension_numbers(
        lhs.shape, (1, 1) + tuple(filter_shape), dimension_numbers)
    lhs_b = list(out_spec[2:])
    rhs_b = [rhs_spec[2:][i] for i in sorted(range(len(lhs_b)), key=lambda k: lhs_b[k])]
    dn = (([out_spec[1]], [rhs_spec[1]]), (sorted(lhs_b), rhs_b))
    out = dot_general(patches, rhs, dn)
    return vnp.moveaxis(out, (-2, -1), (out_spec[0], out_spec[1]))


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1):
    """The output shape of a convolution of shapes in the (N, C, spatial) / (O, I, spatial)
    order (jax.lax.conv_shape_tuple)."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise ShapeError(f"conv_shape_tuple: {len(pads)} pads for {len(lhs_shape) - 2} spatial "
                         "dimensions", source=user_source())
    padded = [n + lo + hi for n, (lo, hi) in zip(lhs_shape[2:], pads)]
    if builtins.any(p < 0 for p in padded):
        raise ShapeError(f"conv_shape_tuple: negative padding {pads} is larger than the "
                         f"dimensions {tuple(lhs_shape[2:])}", source=user_source())
    space = tuple(builtins.max(0, (p - k) // s + 1) for p, k, s in zip(padded, rhs_shape[2:], strides))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + space


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """conv_shape_tuple for operands laid out by dimension_numbers (three layout strings)."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(tuple(np.take(lhs_shape, lhs_perm)),
                           tuple(np.take(rhs_shape, rhs_perm)), window_strides, padding)
    return tuple(int(out[i]) for i in np.argsort(out_perm))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    """The output shape of conv_transpose for operands laid out by dimension_numbers."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_t, rhs_t = np.take(lhs_shape, lhs_perm), np.take(rhs_shape, rhs_perm)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(int(k), s, padding)
                   for k, s in zip(rhs_t[2:], window_strides)]
    space = [(int(i) - 1) * s - int(k) + 2 + lo + hi
             for i, k, s, (lo, hi) in zip(lhs_t[2:], rhs_t[2:], window_strides, padding)]
    out = (int(lhs_t[0]), int(rhs_t[0])) + tuple(space)
    return tuple(out[i] for i in np.argsort(out_perm))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """The output shape of reduce_window (jax.lax.reduce_window_shape_tuple); padding as
    (low, high) pairs."""
    if base_dilation is not None:
        operand_shape = _dilated(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = _dilated(window_dimensions, window_dilation)
    padded = [d + lo + hi for d, (lo, hi) in zip(operand_shape, padding)]
    return tuple(0 if p < k else (p - k) // s + 1
                 for p, k, s in zip(padded, window_dimensions, window_strides))


__all__ = sorted(__all__ + ["conv_general_dilated_patches", "conv_general_dilated_local",
                            "conv_shape_tuple", "conv_general_shape_tuple",
                            "conv_transpose_shape_tuple", "reduce_window_shape_tuple"])


# ------------------------------------------------------------------------ random bits

class RandomAlgorithm(enum.IntEnum):
    """jax.lax.RandomAlgorithm: every value draws vkgrad's Threefry-2x32 (vg.random)."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT, *,
                      out_sharding=None):
    """(new_key, bits) from a key of four 32-bit words (jax.lax.rng_bit_generator), a pure
    function of the key: its first two words, folded with the other two, are a vg.random key
    split into the next key's words and the bits' (vg.random.bits). Not XLA's bit stream:
    the same key gives other bits than JAX's. uint32 bits are int32 bit patterns (vkgrad has
    no unsigned dtype), as vg.random's words are."""
    k = vnp.asarray(key)
    if tuple(k.shape) != (4,) or np.dtype(k.dtype).kind not in "iu":
        raise ShapeError(f"lax.rng_bit_generator: the key must be four 32-bit words, got "
                         f"{k.dtype}{list(k.shape)}", source=user_source())
    if np.dtype(dtype) not in (np.dtype(np.uint32), np.dtype(np.int32)):
        raise DTypeError(f"lax.rng_bit_generator: dtype {np.dtype(dtype)} is not supported "
                         "(uint32 or int32 bits only)", source=user_source())
    base = _random.fold_in(_random.fold_in(k[:2], k[2]), k[3])
    k1, k2, kb = _random.split(base, 3)
    return vnp.concatenate([k1, k2]), _random.bits(kb, tuple(shape))


_rng_uniform_calls = [0]


def rng_uniform(a, b, shape):
    """Uniform numbers in [a, b) of a's dtype (jax.lax.rng_uniform, XLA's stateful RngUniform):
    each call (each trace, under jit) draws from a new key of a process-wide counter; for
    reproducible numbers use vg.random."""
    _rng_uniform_calls[0] += 1
    key = _random.key(_rng_uniform_calls[0])
    a, b = vnp.asarray(a), vnp.asarray(b)
    if np.dtype(a.dtype).kind in "iu":
        return _random.randint(key, tuple(shape), a, b, a.dtype)
    return _random.uniform(key, tuple(shape), a.dtype, a, b)


__all__ = sorted(__all__ + ["RandomAlgorithm", "rng_bit_generator", "rng_uniform"])


# --------------------------------------------------------- implicitly differentiated solves
# JAX's custom_root and custom_linear_solve (jax/_src/lax/control_flow/solves.py): the
# solution's derivative comes from the implicit function theorem, not from differentiating
# the solver. Values f or matvec close over from an enclosing trace (the parameters a grad
# differentiates) are hoisted out by closure_convert, so they get cotangents. Reverse mode
# (custom_vjp): tangent_solve / transpose_solve get the transposed linear map (the vjp of f
# or matvec at the solution).

def _solution_cotangents(f_conv, consts, x, lam):
    """The cotangents of consts for -lam^T (df/dconsts) at x."""
    if not consts:
        return ()
    _, f_vjp = vjp(lambda *c: f_conv(x, *c), *consts)
    return tuple(f_vjp(tree_map(vnp.negative, lam)))


def _implicit(f, example, solve, transpose_solve, has_aux, cotangent_of_rhs):
    """custom_root's and custom_linear_solve's common part: the solution solve(f, example)
    with its derivative from lam = transpose_solve((df/dx)^T, g) (the cotangent of the rhs
    when cotangent_of_rhs, else nothing) and -lam^T df/dconsts. The solvers' own closed-over
    values are hoisted too: a rule may not use the forward pass' traced values."""
    f_conv, consts = closure_convert(f, example)
    solve_conv, s_consts = closure_convert(
        lambda e, *c: solve(lambda x: f_conv(x, *c), e), example, *consts)

    def transposed(g, x, *c):
        if transpose_solve is None:
            raise ArgumentError("lax.custom_linear_solve: reverse-mode differentiation needs "
                                "transpose_solve (or symmetric=True)", source=user_source())
        _, fx_vjp = vjp(lambda y: f_conv(y, *c), x)
        return transpose_solve(lambda u: fx_vjp(u)[0], g)
    t_conv, t_consts = closure_convert(transposed, example, example, *consts)

    def run(e, c, sc, tc):
        return solve_conv(e, *c, *sc)

    def fwd(e, c, sc, tc):
        out = run(e, c, sc, tc)
        return out, (out[0] if has_aux else out, c, sc, tc)

    def bwd(res, g):
        x, c, sc, tc = res
        lam = t_conv(g[0] if has_aux else g, x, *c, *tc)
        lam = lam[0] if has_aux and isinstance(lam, tuple) else lam
        zeros = tree_map(vnp.zeros_like, (sc, tc))
        return ((lam if cotangent_of_rhs else None), _solution_cotangents(f_conv, c, x, lam),
                *zeros)

    solver = custom_vjp(run)
    solver.defvjp(fwd, bwd)
    return solver(example, tuple(consts), tuple(s_consts), tuple(t_consts))


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """x = solve(f, initial_guess), a root of f, differentiated implicitly (jax.lax.
    custom_root): tangent_solve(g, y) solves the linear map g(x) = y (for a scalar,
    `lambda g, y: y / g(1.0)`)."""
    return _implicit(f, initial_guess, solve, tangent_solve, has_aux, False)


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
    """x = solve(matvec, b), the solution of matvec(x) = b, differentiated implicitly (jax.lax.
    custom_linear_solve): the cotangent of b is transpose_solve(vecmat, g) (solve(vecmat, g)
    when symmetric); matvec's closed-over values get theirs through matvec."""
    if symmetric and transpose_solve is None:
        transpose_solve = solve
    return _implicit(matvec, b, solve, transpose_solve, has_aux, True)


__all__ = sorted(__all__ + ["custom_root", "custom_linear_solve"])
