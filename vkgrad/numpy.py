"""vkgrad.numpy (`vnp`): numpy's names and semantics, on traced values and on numpy arrays.

Inside a transformed function every call here emits IR; outside one it computes now (through
the single eager path, numpy today) and returns numpy arrays.

Semantics follow numpy, with these choices:
* dtypes are float32 (the default for Python floats and float lists), float64, int32 (other
  integer inputs are narrowed) and bool;
* promotion: bool < i32 < f32 < f64; Python scalars, and NumPy scalars beside an array, are
  weakly typed (`x * 2.0` and `x * np.float64(2.0)` keep an f32 x f32; `i * 0.5` for an int i
  is f32); arithmetic on bools computes in i32; divide, power and the transcendental functions
  on integers compute in f32;
* `take` clamps traced indices into range (a GPU kernel cannot raise); negative indices are
  allowed where the index is a concrete array or a Python int;
* indexing supports ints, slices (negative bounds and steps), None, Ellipsis and ONE integer
  array index without int indices beside it (numpy's mixed advanced-indexing rules move axes;
  use vnp.take for those); boolean masks give data-dependent shapes: use vnp.where.
* softmax, log_softmax and logsumexp live here too (jax.nn / scipy.special names), and
  stop_gradient;
* arrays are immutable: `out=` and `x[i] = v` are refused; `x.at[i].set(v)` (or `vnp.at(x)`)
  returns the updated array.

docs/numpy.md lists what is covered, how each function is built (a primitive, or a composition
that fuses on Vulkan), and what is refused and why (complex numbers, float16, data-dependent
shapes, ...).
"""

from __future__ import annotations

import builtins
import math

import numpy as _np

from vkgrad.errors import ArgumentError, DTypeError, ShapeError, VkgradIndexError
from vkgrad import primitives as P
from vkgrad.ir.core import canonical_dtype, is_float, np_dtype, type_str
from vkgrad.tracer.core import ArrayOps, Tracer, concretization_error, user_source

float32, float64, int32, bool_ = _np.float32, _np.float64, _np.int32, _np.bool_
pi, e, inf, nan = _np.pi, _np.e, _np.inf, _np.nan
newaxis = None
ndarray = _np.ndarray   # what eager computations return

_ORDER = {"bool": 0, "i32": 1, "f32": 2, "f64": 3}

# ----------------------------------------------------------------------------------- dtypes


def _is_weak(x) -> bool:
    return isinstance(x, (bool, int, float)) and not isinstance(x, _np.generic)


_dtype_of = P.dtype_of


def _weak_kind(x) -> str:
    return "bool" if isinstance(x, bool) else "i32" if isinstance(x, int) else "f32"


def _is_np_scalar(x) -> bool:
    return isinstance(x, _np.generic) and x.dtype.kind in "biuf"


def result_type(*xs) -> _np.dtype:
    """The dtype operations on xs compute in (numpy's name; vkgrad's promotion rules)."""
    return np_dtype(_promoted(*xs))


def _promoted(*xs) -> str:
    """numpy-style promotion with weakly typed Python scalars (see the module docstring).
    NumPy scalars beside an array are weakly typed too: `x * (1.0 / np.sqrt(d))` keeps an f32
    x f32, as in JAX (docs/reliability.md, float64 policy); alone they keep their dtype."""
    arrays = [x for x in xs if not _is_weak(x) and not _is_np_scalar(x)]
    if arrays:
        xs = [x.item() if _is_np_scalar(x) else x for x in xs]   # as Python scalars
    strong = [d for d in map(_dtype_of, xs) if d is not None]
    weak = [_weak_kind(x) for x in xs if _is_weak(x)]
    if not strong:
        return builtins.max(weak, key=_ORDER.get) if weak else "f32"
    dt = builtins.max(strong, key=_ORDER.get)
    for w in weak:
        if _ORDER[w] > _ORDER[dt] and not (w == "f32" and dt == "f64"):
            dt = "f32" if w == "f32" else builtins.max(dt, w, key=_ORDER.get)
    return dt


def _no_out(out) -> None:
    """numpy's `out=` writes into an existing array; vkgrad's arrays are immutable."""
    if out is not None:
        raise ArgumentError("out= is not supported: vkgrad arrays are immutable; use the "
                            "returned array (x = vnp.f(...)), or x.at[...].set(...) to update "
                            "part of one", source=user_source())


def _to_dtype_name(dtype) -> str:
    """The dtype an operation asked for `dtype` computes in: numpy's names map by the dtype
    policy (int64 and other ints -> int32); float16 is refused (no kernel computes in it)."""
    if isinstance(dtype, str) and dtype in _ORDER:
        return dtype
    try:
        d = _np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{dtype!r} is not a dtype", source=user_source()) from None
    if d == _np.float16:
        raise DTypeError("float16 is not supported: vkgrad computes in float32, float64, int32 "
                         "and bool (its Vulkan kernels in float32); use vnp.float32",
                         source=user_source())
    try:
        return canonical_dtype(d)
    except DTypeError as e:
        raise DTypeError(e.message + (" (complex numbers: docs/numpy.md says why not)"
                                      if d.kind == "c" else ""), source=user_source()) from None


def asarray(x, dtype=None):
    """An array for x: tracers stay tracers; Python data becomes a numpy array (float32 for
    Python floats); numpy arrays keep their dtype (other ints -> int32)."""
    if isinstance(x, ArrayOps):
        out = x
    elif isinstance(x, (list, tuple)):
        if _contains_tracer(x):
            out = stack([asarray(v) for v in x])
        else:
            a = _np.asarray(x)
            kinds = {type(v) for v in _leaves_of(x)}
            weak = kinds and builtins.all(issubclass(k, (bool, int, float)) and
                                          not issubclass(k, _np.generic) for k in kinds)
            if weak and a.dtype.kind == "f":
                a = a.astype(_np.float32)
            out = a.astype(np_dtype(canonical_dtype(a.dtype)), copy=False)
    elif _is_weak(x):
        out = _np.asarray(x, dtype=np_dtype(_weak_kind(x)))
    elif isinstance(x, (_np.ndarray, _np.generic)):
        out = _np.asarray(x)
        out = out.astype(np_dtype(canonical_dtype(out.dtype)), copy=False)
    else:
        raise DTypeError(f"cannot make an array from a {type(x).__name__}")
    return astype(out, dtype) if dtype is not None else out


array = asarray


def _leaves_of(x):
    for v in x:
        if isinstance(v, (list, tuple)):
            yield from _leaves_of(v)
        else:
            yield v


def _contains_tracer(x) -> bool:
    return builtins.any(isinstance(v, ArrayOps) for v in _leaves_of(x))


def astype(x, dtype):
    dt = _to_dtype_name(dtype)
    x = asarray(x)
    if isinstance(x, ArrayOps):
        return x if x.aval.dtype == dt else P.convert(x, dt)
    return x if x.dtype == np_dtype(dt) else P.convert(x, dt)


def _promote(x, dt: str):
    """x as dtype dt: tracers get a convert eqn, constants are cast now."""
    if isinstance(x, ArrayOps):
        return P.convert(x, dt)
    if _is_weak(x):
        return np_dtype(dt).type(x)
    a = asarray(x)
    return a if a.dtype == np_dtype(dt) else a.astype(np_dtype(dt))


def _args(*xs):
    return [x if isinstance(x, ArrayOps) or _is_weak(x) or _is_np_scalar(x) else asarray(x)
            for x in xs]


def _binary(fn, x, y, floating=False, arith=True):
    x, y = _args(x, y)
    dt = _promoted(x, y)
    if floating and not is_float(dt):
        dt = "f32"
    elif arith and dt == "bool":
        dt = "i32"
    return fn(_promote(x, dt), _promote(y, dt))


def _unary(fn, x, floating=True):
    x = asarray(x)
    dt = _dtype_of(x)
    if floating and not is_float(dt):
        dt = "f32"
    elif dt == "bool":
        dt = "i32"
    return fn(_promote(x, dt))


def _float(x):
    x = asarray(x)
    return x if is_float(_dtype_of(x)) else _promote(x, "f32")


# ----------------------------------------------------------------------------------- elementwise

def add(x, y): return _binary(P.add, x, y)
def subtract(x, y): return _binary(P.sub, x, y)
def multiply(x, y): return _binary(P.mul, x, y)
def divide(x, y): return _binary(P.div, x, y, floating=True)
def power(x, y): return _binary(P.power, x, y, floating=True)
def maximum(x, y): return _binary(P.maximum, x, y)
def minimum(x, y): return _binary(P.minimum, x, y)


true_divide = divide


def negative(x): return _unary(P.neg, x, floating=False)
def positive(x): return asarray(x)
def square(x): return _unary(lambda v: P.mul(v, v), x, floating=False)
def sqrt(x): return _unary(P.sqrt, x)
def exp(x): return _unary(P.exp, x)
def log(x): return _unary(P.log, x)
def log1p(x): return _unary(P.log1p, x)
def tanh(x): return _unary(P.tanh, x)
def sin(x): return _unary(P.sin, x)
def cos(x): return _unary(P.cos, x)
def abs(x): return _unary(P.absolute, x, floating=False)
def sign(x): return _unary(P.sign, x, floating=False)
def reciprocal(x): return divide(1.0, x)


absolute = abs


def clip(a, a_min=None, a_max=None):
    if a_min is not None:
        a = maximum(a, a_min)
    if a_max is not None:
        a = minimum(a, a_max)
    return asarray(a)


def less(x, y): return _binary(P.lt, x, y, arith=False)
def less_equal(x, y): return _binary(P.le, x, y, arith=False)
def greater(x, y): return _binary(P.lt, y, x, arith=False)        # x > y  is  y < x
def greater_equal(x, y): return _binary(P.le, y, x, arith=False)
def equal(x, y): return _binary(P.eq, x, y, arith=False)
def not_equal(x, y): return _binary(P.ne, x, y, arith=False)


def _bool(x):
    x = asarray(x)
    return x if _dtype_of(x) == "bool" else not_equal(x, 0)


def logical_and(a, b): return P.select(_bool(a), _bool(b), False)   # a ? b : False
def logical_or(a, b): return P.select(_bool(a), True, _bool(b))     # a ? True : b
def logical_not(a): return P.eq(_bool(a), False)


def where(condition, x=None, y=None):
    """numpy's where(cond, x, y); where(cond) alone is nonzero(cond) (concrete values only)."""
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise ArgumentError("where takes a condition alone, or a condition, x and y",
                            source=user_source())
    x, y = _args(x, y)
    dt = _promoted(x, y)
    return P.select(_bool(condition), _promote(x, dt), _promote(y, dt))


def stop_gradient(x):
    """x, with no gradient flowing back through it."""
    return P.stop_gradient(asarray(x))


# ----------------------------------------------------------------------------------- reductions

def _axes(axis, ndim) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise VkgradIndexError(f"axis {a} is out of bounds for an array of dimension {ndim}",
                                   source=user_source())
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise VkgradIndexError(f"repeated axis in {axis}", source=user_source())
    return tuple(sorted(out))


def _keepdims(r, shape, axes, keepdims):
    return P.reshape(r, P.keep_shape(shape, axes)) if keepdims and axes else r


def sum(a, axis=None, dtype=None, out=None, keepdims=False):
    _no_out(out)
    a = asarray(a)
    if dtype is not None:
        a = astype(a, dtype)
    elif _dtype_of(a) == "bool":
        a = astype(a, "i32")
    axes = _axes(axis, a.ndim)
    return _keepdims(P.reduce_sum(a, axes), a.shape, axes, keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims=False):
    _no_out(out)
    a = asarray(a) if dtype is None else astype(a, dtype)
    a = _float(a)
    axes = _axes(axis, a.ndim)
    n = math.prod(a.shape[i] for i in axes)
    return P.mul(sum(a, axes, keepdims=keepdims), 1.0 / n if n else _np.nan)   # mean = sum*scale


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    _no_out(out)
    a = _float(a)
    axes = _axes(axis, a.ndim)
    n = math.prod(a.shape[i] for i in axes)
    d = subtract(a, mean(a, axes, keepdims=True))
    v = mean(multiply(d, d), axes, keepdims=keepdims)
    # numpy: sum(d*d) / (n - ddof), which is inf (nan for a zero sum) when ddof >= n
    return v if ddof == 0 else P.mul(v, n / (n - ddof) if n > ddof else _np.inf)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    _no_out(out)
    a = _float(a)
    v = var(a, axis, ddof=ddof, keepdims=keepdims)
    if ddof == 0 and math.prod(a.shape[i] for i in _axes(axis, a.ndim)) == 1:
        return v   # over one element the variance is identically 0: so is std, and its
    return sqrt(v)  # gradient (sqrt's at 0 would be 0 * inf = nan)


def max(a, axis=None, out=None, keepdims=False):
    _no_out(out)
    a = asarray(a)
    axes = _axes(axis, a.ndim)
    return _keepdims(P.reduce_max(a, axes), a.shape, axes, keepdims)


def min(a, axis=None, out=None, keepdims=False):
    _no_out(out)
    a = asarray(a)
    axes = _axes(axis, a.ndim)
    return _keepdims(P.reduce_min(a, axes), a.shape, axes, keepdims)


amax, amin = max, min


def _arg_extreme(a, axis, keepdims, reduce):
    """The first index of the max (min) along `axis`: the smallest index where a equals its
    extreme, or is NaN (numpy: the first NaN). Built from eq, where and a min reduction (no
    primitive of its own); the indices are float32 inside (exact below 2**24), so the float
    reduction kernels serve it."""
    a = asarray(a)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    ax = _axes(axis, a.ndim)[0]
    n = a.shape[ax]
    hit = P.eq(a, reduce(a, axis=ax, keepdims=True))
    if is_float(_dtype_of(a)):   # a NaN is the extreme (max/min propagate it): the first NaN
        hit = P.select(P.isnan(a), True, hit)
    pos = P.iota(a.shape, ax, "f32")
    first = min(where(hit, pos, float(n)), axis=ax, keepdims=keepdims)
    return astype(first, "i32")


def argmax(a, axis=None, keepdims=False):
    return _arg_extreme(a, axis, keepdims, max)


def argmin(a, axis=None, keepdims=False):
    return _arg_extreme(a, axis, keepdims, min)

# ----------------------------------------------------------------------------------- shapes


def shape(a) -> tuple:
    return tuple(asarray(a).shape)


def ndim(a) -> int:
    return asarray(a).ndim


def size(a) -> int:
    return math.prod(shape(a))


def _tstr(x) -> str:
    return type_str(x.shape, _dtype_of(x))


def reshape(a, newshape):
    a = asarray(a)
    newshape = (newshape,) if isinstance(newshape, (int, _np.integer)) else tuple(newshape)
    if builtins.sum(1 for d in newshape if d == -1) > 1:
        raise ShapeError(f"reshape of {_tstr(a)} to {newshape}: only one dimension may be -1",
                         source=user_source())
    if -1 in newshape:
        known = math.prod(d for d in newshape if d != -1)
        total = math.prod(a.shape)
        if known == 0 or total % known:
            raise ShapeError(f"cannot reshape {_tstr(a)} ({total} elements) to {newshape}",
                             primitive="reshape", source=user_source())
        newshape = tuple(total // known if d == -1 else d for d in newshape)
    return P.reshape(a, newshape)


def ravel(a):
    return reshape(a, (-1,))


def transpose(a, axes=None):
    a = asarray(a)
    perm = tuple(reversed(range(a.ndim))) if axes is None else tuple(
        int(p) % a.ndim if a.ndim else p for p in axes)
    return P.transpose(a, perm)


def swapaxes(a, axis1, axis2):
    a = asarray(a)
    i, j = _axes(axis1, a.ndim)[0], _axes(axis2, a.ndim)[0]
    perm = list(range(a.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return P.transpose(a, perm)


def moveaxis(a, source, destination):
    a = asarray(a)
    s, d = _axes(source, a.ndim)[0], _axes(destination, a.ndim)[0]
    perm = [i for i in range(a.ndim) if i != s]
    perm.insert(d, s)
    return P.transpose(a, perm)


def broadcast_to(a, shape):
    return P.broadcast_to(asarray(a), (shape,) if isinstance(shape, int) else tuple(shape))


def expand_dims(a, axis):
    a = asarray(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out_ndim = a.ndim + len(axes)
    new = _axes(axes, out_ndim)
    dims = iter(a.shape)
    return P.reshape(a, [1 if i in new else next(dims) for i in range(out_ndim)])


def squeeze(a, axis=None):
    a = asarray(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        axes = _axes(axis, a.ndim)
        if builtins.any(a.shape[i] != 1 for i in axes):
            raise ShapeError(f"squeeze of {_tstr(a)}: axis {axis} does not have size 1",
                             source=user_source())
    return P.reshape(a, [d for i, d in enumerate(a.shape) if i not in axes])


def concatenate(arrays, axis=0):
    arrays = [asarray(x) for x in arrays]
    if not arrays:
        raise ShapeError("concatenate needs at least one array", source=user_source())
    if axis is None:
        arrays, axis = [ravel(x) for x in arrays], 0
    dt = _promoted(*arrays)
    nd = arrays[0].ndim
    if nd == 0:
        raise ShapeError("zero-dimensional arrays cannot be concatenated", source=user_source())
    return P.concatenate([_promote(x, dt) for x in arrays], _axes(axis, nd)[0])


def stack(arrays, axis=0):
    arrays = [asarray(x) for x in arrays]
    if not arrays:
        raise ShapeError("stack needs at least one array", source=user_source())
    ax = _axes(axis, arrays[0].ndim + 1)[0]
    return concatenate([expand_dims(x, ax) for x in arrays], ax)


def take(a, indices, axis=None):
    """Gather along `axis` (numpy's take; embeddings: take(table, ids, axis=0))."""
    a = asarray(a)
    if axis is None:
        a, axis = ravel(a), 0
    ax = _axes(axis, a.ndim)[0]
    return P.take(a, _index_array(indices, a.shape[ax], ax), ax)


def _index_array(indices, n, axis):
    idx = asarray(indices)
    dt = _dtype_of(idx)
    if dt != "i32":
        raise VkgradIndexError(f"indices must be integers, got {_tstr(idx)}"
                               + (" (a boolean mask gives a data-dependent shape: use "
                                  "vnp.where(mask, x, 0) instead)" if dt == "bool" else ""),
                               source=user_source())
    if not isinstance(idx, Tracer):   # concrete indices: numpy's negative indices and bounds
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise VkgradIndexError(f"index out of bounds for axis {axis} with size {n}",
                                   source=user_source())
        idx = _np.where(idx < 0, idx + n, idx).astype(_np.int32)
    return idx


def one_hot(x, num_classes, dtype=float32):
    """one_hot(labels, n)[..., c] = (labels == c), as `dtype` (float32)."""
    x = asarray(x)
    hit = P.eq(expand_dims(x, -1), P.iota((int(num_classes),), 0, _dtype_of(x)))
    return astype(hit, dtype)


def arange(start, stop=None, step=1, dtype=None):
    if stop is None:
        start, stop = 0, start
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            v.__index__()   # raises the ConcretizationError explaining static arguments
    n = builtins.max(0, math.ceil((stop - start) / step))
    dt = _to_dtype_name(dtype) if dtype is not None else (
        "i32" if builtins.all(isinstance(v, (int, _np.integer)) for v in (start, stop, step))
        else "f32")
    r = P.iota((n,), 0, dt)
    if step != 1:
        r = P.mul(r, step)
    return P.add(r, start) if start != 0 else r


# ----------------------------------------------------------------------------------- creation

def full(shape, fill_value, dtype=None):
    shape = (shape,) if isinstance(shape, (int, _np.integer)) else tuple(shape)
    dt = _to_dtype_name(dtype) if dtype is not None else _promoted(fill_value)
    return P.broadcast_to(_promote(fill_value, dt), shape)


def zeros(shape, dtype=float32): return full(shape, 0, dtype)
def ones(shape, dtype=float32): return full(shape, 1, dtype)
def full_like(a, fill_value, dtype=None): return full(shape(a), fill_value,
                                                      dtype or _dtype_of(asarray(a)))
def zeros_like(a, dtype=None): return full_like(a, 0, dtype)
def ones_like(a, dtype=None): return full_like(a, 1, dtype)


# ----------------------------------------------------------------------------------- matmul

def matmul(a, b):
    """numpy's matmul: vectors are promoted to matrices, batch dims broadcast; lowers to the
    2-D / batched 3-D `matmul` primitive."""
    a, b = asarray(a), asarray(b)
    dt = _promoted(a, b)
    dt = dt if is_float(dt) else "f32"
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul of {_tstr(a)} by {_tstr(b)}: operands must be at least 1-D "
                         "(use * to multiply by a scalar)", primitive="matmul",
                         source=user_source())
    ka, kb = a.shape[-1], b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise ShapeError(f"matmul of {_tstr(a)} by {_tstr(b)}: inner dimensions differ "
                         f"({ka} vs {kb})", primitive="matmul", source=user_source())
    a, b = _promote(a, dt), _promote(b, dt)
    vec_a, vec_b = a.ndim == 1, b.ndim == 1
    if vec_a:
        a = P.reshape(a, (1, a.shape[0]))
    if vec_b:
        b = P.reshape(b, (b.shape[0], 1))
    m, n = a.shape[-2], b.shape[-1]
    if a.ndim == 2 and b.ndim == 2:
        r = P.matmul(a, b)
    elif b.ndim == 2:   # (..., m, k) @ (k, n): one 2-D matmul over the flattened rows
        r = P.reshape(P.matmul(P.reshape(a, (math.prod(a.shape[:-1]), ka)), b), a.shape[:-1] + (n,))
    else:
        batch = P.broadcast_shapes("matmul", [P.TensorType(a.shape[:-2], dt),
                                              P.TensorType(b.shape[:-2], dt)])
        if a.shape[:-2] != batch:
            a = P.broadcast_to(a, batch + a.shape[-2:])
        if b.shape[:-2] != batch:
            b = P.broadcast_to(b, batch + b.shape[-2:])
        if len(batch) == 1:
            r = P.matmul(a, b)
        else:
            nb = math.prod(batch)
            r = P.matmul(P.reshape(a, (nb, m, ka)), P.reshape(b, (nb, ka, n)))
            r = P.reshape(r, batch + (m, n))
    if vec_a or vec_b:
        r = P.reshape(r, r.shape[:-2] + ((m,) if not vec_a else ()) + ((n,) if not vec_b else ()))
    return r


# ----------------------------------------------------------------------------------- softmax

def _last_axis(fn, x, axis):
    """Apply a last-axis primitive along `axis` (moved there and back if needed)."""
    x = _float(x)
    ax = _axes(axis, x.ndim)
    if len(ax) != 1:
        raise VkgradIndexError("softmax/log_softmax take a single axis", source=user_source())
    ax = ax[0]
    if ax == x.ndim - 1:
        return fn(x, ax)
    return moveaxis(fn(moveaxis(x, ax, -1), x.ndim - 1), -1, ax)


def softmax(x, axis=-1):
    return _last_axis(P.softmax, x, axis)


def log_softmax(x, axis=-1):
    return _last_axis(P.log_softmax, x, axis)


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) computed stably: m + log(sum(exp(x - m))) with m = max(x) held
    constant for differentiation (the result does not depend on m; its gradient is softmax)."""
    x = _float(x)
    axes = _axes(axis, x.ndim)
    m = stop_gradient(max(x, axes, keepdims=True))
    r = add(log(sum(exp(subtract(x, m)), axes, keepdims=True)), m)
    return r if keepdims else P.reshape(r, [d for i, d in enumerate(x.shape) if i not in axes])


# ----------------------------------------------------------------------------------- indexing

def _is_int(k) -> bool:
    return isinstance(k, (int, _np.integer)) and not isinstance(k, (bool, _np.bool_))


def _getitem(x, key):
    """x[key] for ints, slices, None, Ellipsis and one integer-array index (module docstring)."""
    x = asarray(x)
    key = key if isinstance(key, tuple) else (key,)
    entries = []
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, slice) or _is_int(k):
            entries.append(k)
        elif isinstance(k, (ArrayOps, _np.ndarray, list)):
            entries.append(("array", k))
        else:
            raise VkgradIndexError(f"unsupported index {k!r} of type {type(k).__name__}: use "
                                   "ints, slices, None, ... or an integer array",
                                   source=user_source())
    if builtins.sum(1 for k in entries if k is Ellipsis) > 1:
        raise VkgradIndexError("an index can only have one ellipsis (...)", source=user_source())
    n_real = builtins.sum(1 for k in entries if k is not None and k is not Ellipsis)
    if n_real > x.ndim:
        raise VkgradIndexError(f"too many indices for {_tstr(x)}: {n_real} given",
                               source=user_source())
    fill = [slice(None)] * (x.ndim - n_real)
    if Ellipsis in entries:
        i = entries.index(Ellipsis)
        entries = entries[:i] + fill + entries[i + 1:]
    else:
        entries = entries + fill
    arrays = [k for k in entries if isinstance(k, tuple)]
    if len(arrays) > 1 or (arrays and builtins.any(_is_int(k) for k in entries)):
        raise VkgradIndexError("vkgrad supports one integer-array index, without int indices "
                               "beside it (numpy's mixed advanced indexing reorders axes); use "
                               "vnp.take", source=user_source())

    start, limit, step, reverse, plan = [], [], [], [], []
    array_at, d = None, 0
    for k in entries:
        if k is None:
            plan.append(("new",))
            continue
        n = x.shape[d]
        if _is_int(k):
            i = int(k) + n if k < 0 else int(k)
            if not 0 <= i < n:
                raise VkgradIndexError(f"index {k} is out of bounds for axis {d} with size {n}",
                                       source=user_source())
            start.append(i), limit.append(i + 1), step.append(1)
        elif isinstance(k, slice):
            if k.step == 0:
                raise VkgradIndexError("slice step cannot be zero", source=user_source())
            s, stop, st = k.indices(n)
            m = len(range(s, stop, st))
            if st > 0:
                start.append(s), limit.append(s + (m - 1) * st + 1 if m else s), step.append(st)
            else:   # negative step: a gather of the indices s, s+st, ... (below)
                start.append(0), limit.append(n), step.append(1)
                reverse.append((d, s, st, m))
            plan.append(("keep", m))
        else:
            start.append(0), limit.append(n), step.append(1)
            idx = _index_array(k[1], n, d)
            array_at = (d, idx)
            plan.append(("array", tuple(idx.shape)))
        d += 1
    y = x
    if (tuple(start), tuple(limit), tuple(step)) != ((0,) * x.ndim, tuple(x.shape),
                                                     (1,) * x.ndim):
        y = P.slice_(x, start, limit, step)
    for dim, s, st, m in reverse:
        y = P.take(y, P.add(P.mul(P.iota((m,), 0, "i32"), st), s), dim)
    if array_at is not None:
        y = P.take(y, array_at[1], array_at[0])
    out_shape = []
    for p in plan:
        out_shape += [1] if p[0] == "new" else [p[1]] if p[0] == "keep" else list(p[1])
    return P.reshape(y, out_shape) if tuple(out_shape) != tuple(y.shape) else y


# ----------------------------------------------------------------------------------- more math
# numpy's elementwise functions beyond the basic set (issue 14): a primitive where GLSL has the
# function (vkgrad/primitives/lax.py), compositions for the rest.

def floor(x): return _unary(P.floor, x)
def ceil(x): return _unary(P.ceil, x)
def trunc(x): return where(less(x, 0), ceil(x), floor(x))
def rint(x): return _unary(P.round_even, x)


def round(a, decimals=0, out=None):
    """numpy's round: half to even; decimals < 0 round to tens, hundreds, ..."""
    _no_out(out)
    a = asarray(a)
    if _dtype_of(a) in ("i32", "bool") and decimals >= 0:
        return a
    if decimals == 0:
        return rint(a)
    s = 10.0 ** decimals
    return divide(rint(multiply(a, s)), s)


around = round
fix = trunc


def tan(x): return _unary(P.tan, x)
def sinh(x): return _unary(P.sinh, x)
def cosh(x): return _unary(P.cosh, x)
def arcsin(x): return _unary(P.asin, x)
def arccos(x): return _unary(P.acos, x)
def arctan(x): return _unary(P.atan, x)
def arcsinh(x): return _unary(P.asinh, x)
def arccosh(x): return _unary(P.acosh, x)
def arctanh(x): return _unary(P.atanh, x)
def arctan2(y, x): return _binary(P.atan2, y, x, floating=True)


def exp2(x): return exp(multiply(_float(x), math.log(2.0)))
def log2(x): return multiply(log(x), 1.0 / math.log(2.0))
def log10(x): return multiply(log(x), 1.0 / math.log(10.0))
def deg2rad(x): return multiply(_float(x), math.pi / 180.0)
def rad2deg(x): return multiply(_float(x), 180.0 / math.pi)


degrees, radians = rad2deg, deg2rad


def expm1(x):
    """exp(x) - 1 without losing a small x's digits: a 5-term series below |x| < 1e-2 (exact to
    ~x^5/720), exp(x) - 1 above (log1p's treatment, vkgrad/primitives/lax.py)."""
    x = _float(x)
    series = multiply(x, add(1.0, multiply(x, add(0.5, multiply(x, add(
        1.0 / 6.0, multiply(x, add(1.0 / 24.0, multiply(x, 1.0 / 120.0)))))))))
    return where(less(abs(x), 1e-2), series, subtract(exp(x), 1.0))


def logaddexp(x, y):
    """log(exp(x) + exp(y)) without overflow: m + log(exp(x-m) + exp(y-m)), m = max(x, y) held
    constant for differentiation (the result does not depend on it), so at x == y each side
    gets half the gradient."""
    x, y = _args(x, y)
    dt = _promoted(x, y)
    dt = dt if is_float(dt) else "f32"
    x, y = asarray(_promote(x, dt)), asarray(_promote(y, dt))
    m = stop_gradient(maximum(x, y))
    return add(log(add(exp(subtract(x, m)), exp(subtract(y, m)))), m)


def logaddexp2(x, y):
    return multiply(logaddexp(multiply(x, math.log(2.0)), multiply(y, math.log(2.0))),
                    1.0 / math.log(2.0))


def hypot(x, y): return sqrt(add(square(_float(x)), square(_float(y))))


def sinc(x):
    """sin(pi x) / (pi x), 1 at 0 (the 0/0 branch never sees a 0: no nan gradient)."""
    x = _float(x)
    zero = equal(x, 0)
    px = multiply(where(zero, 1.0, x), math.pi)
    return where(zero, 1.0, divide(sin(px), px))


def _int_result(fn, x, y):
    """fn on x, y computed in float; int operands give an int result (exact while |x| < 2**24:
    the Vulkan kernels have no 64-bit floats)."""
    x, y = _args(x, y)
    dt = _promoted(x, y)
    if dt == "bool":
        dt = "i32"
    r = fn(_float(_promote(x, dt)), _float(_promote(y, dt)))
    return r if is_float(dt) else astype(r, dt)


def floor_divide(x, y): return _int_result(lambda a, b: floor(divide(a, b)), x, y)


def remainder(x, y):
    """numpy's mod: x - floor(x / y) * y, with the sign of y."""
    return _int_result(lambda a, b: subtract(a, multiply(floor(divide(a, b)), b)), x, y)


def fmod(x, y):
    """C's fmod: x - trunc(x / y) * y, with the sign of x."""
    return _int_result(lambda a, b: subtract(a, multiply(trunc(divide(a, b)), b)), x, y)


mod = remainder


def divmod(x, y): return floor_divide(x, y), remainder(x, y)


def isnan(x):
    x = asarray(x)
    return P.isnan(x) if is_float(_dtype_of(x)) else full_like(x, False, "bool")


def isinf(x):
    x = asarray(x)
    return P.isinf(x) if is_float(_dtype_of(x)) else full_like(x, False, "bool")


def isfinite(x): return logical_not(logical_or(isnan(x), isinf(x)))
def isposinf(x): return logical_and(isinf(x), greater(x, 0))
def isneginf(x): return logical_and(isinf(x), less(x, 0))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """nan -> `nan`, +inf -> `posinf` (the dtype's largest finite value), -inf -> `neginf`."""
    x = asarray(x)
    dt = _dtype_of(x)
    if not is_float(dt):
        return x
    big = float(_np.finfo(np_dtype(dt)).max)
    r = where(isnan(x), nan, x)
    r = where(isposinf(x), big if posinf is None else posinf, r)
    return where(isneginf(x), -big if neginf is None else neginf, r)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| (numpy's asymmetric test); equal infinities are close."""
    a, b = _args(a, b)
    dt = _promoted(a, b)
    dt = dt if is_float(dt) else "f32"
    a, b = asarray(_promote(a, dt)), asarray(_promote(b, dt))
    finite = logical_and(isfinite(a), isfinite(b))
    near = less_equal(abs(subtract(a, b)), add(atol, multiply(rtol, abs(b))))
    r = logical_or(logical_and(finite, near), equal(a, b))
    return logical_or(r, logical_and(isnan(a), isnan(b))) if equal_nan else r


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


# ----------------------------------------------------------------------------------- reductions+

def any(a, axis=None, out=None, keepdims=False):
    """A max of 0/1 floats (exact; the reduction kernels compute in f32) compared with 0."""
    _no_out(out)
    a = asarray(a)
    return greater(max(astype(_bool(a), "f32"), axis, keepdims=keepdims), 0)


def all(a, axis=None, out=None, keepdims=False):
    _no_out(out)
    a = asarray(a)
    return greater(min(astype(_bool(a), "f32"), axis, keepdims=keepdims), 0)


def count_nonzero(a, axis=None, keepdims=False):
    """Counted in f32 (exact below 2**24 elements), returned as int32."""
    a = asarray(a)
    return astype(sum(astype(_bool(a), "f32"), axis, keepdims=keepdims), "i32")


def _halving(a, ax, op, unit):
    """Reduce axis `ax` of a with the elementwise `op` in log2(n) halving steps (an odd length is
    padded with `unit`): elementwise and layout ops only, so it fuses into one kernel on Vulkan
    and its gradient is exact where a value is 0 (a product as exp(sum(log)) is not)."""
    while a.shape[ax] > 1:
        n = a.shape[ax]
        if n % 2:
            pad_shape = list(a.shape)
            pad_shape[ax] = 1
            a = concatenate([a, full(pad_shape, unit, _dtype_of(a))], ax)
            n += 1
        lo = [slice(None)] * a.ndim
        hi = [slice(None)] * a.ndim
        lo[ax], hi[ax] = slice(0, n // 2), slice(n // 2, n)
        a = op(_getitem(a, tuple(lo)), _getitem(a, tuple(hi)))
    return a


def prod(a, axis=None, dtype=None, out=None, keepdims=False):
    _no_out(out)
    a = asarray(a) if dtype is None else astype(a, dtype)
    if _dtype_of(a) == "bool":
        a = astype(a, "i32")
    axes = _axes(axis, a.ndim)
    shape = a.shape
    for ax in axes:
        if a.shape[ax] == 0:
            a = full(tuple(1 if i == ax else d for i, d in enumerate(a.shape)), 1, _dtype_of(a))
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
    return concatenate([full(lead, fill, _dtype_of(a)), _getitem(a, tuple(keep))], ax)


def _scan(a, axis, op, unit, dtype):
    """Inclusive scan along `axis` (Hillis-Steele: log2(n) steps of shift-and-combine; fusible
    elementwise and layout ops, gradients by composition)."""
    a = asarray(a) if dtype is None else astype(a, dtype)
    if _dtype_of(a) == "bool":
        a = astype(a, "i32")
    if axis is None:
        a, axis = ravel(a), 0
    ax = _axes(axis, a.ndim)[0]
    s = 1
    while s < a.shape[ax]:
        a = op(a, _shifted(a, ax, s, unit))
        s *= 2
    return a


def cumsum(a, axis=None, dtype=None, out=None):
    _no_out(out)
    return _scan(a, axis, add, 0, dtype)


def cumprod(a, axis=None, dtype=None, out=None):
    _no_out(out)
    return _scan(a, axis, multiply, 1, dtype)


def diff(a, n=1, axis=-1, prepend=None, append=None):
    a = asarray(a)
    ax = _axes(axis, a.ndim)[0]
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
        a = subtract(_getitem(a, tuple(hi)), _getitem(a, tuple(lo)))
    return a


def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    a = asarray(a)
    return sum(where(isnan(a), 0, a), axis, dtype, out, keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    a = _float(a)
    ok = logical_not(isnan(a))
    return divide(sum(where(ok, a, 0), axis, dtype, out, keepdims),
                  sum(astype(ok, _dtype_of(a)), axis, keepdims=keepdims))


def nanmax(a, axis=None, out=None, keepdims=False):
    a = asarray(a)
    return max(where(isnan(a), -inf, a), axis, out, keepdims)


def nanmin(a, axis=None, out=None, keepdims=False):
    a = asarray(a)
    return min(where(isnan(a), inf, a), axis, out, keepdims)


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """numpy's average: sum(a * w) / sum(w); 1-D weights apply along a single axis."""
    a = _float(a)
    if weights is None:
        r = mean(a, axis, keepdims=keepdims)
        n = math.prod(a.shape[i] for i in _axes(axis, a.ndim))
        return (r, full_like(r, n)) if returned else r
    w = asarray(weights)
    dt = _promoted(a, w)
    a, w = asarray(_promote(a, dt)), asarray(_promote(w, dt))
    if tuple(w.shape) != tuple(a.shape):
        ax = _axes(axis, a.ndim)
        if axis is None or len(ax) != 1 or w.ndim != 1 or w.shape[0] != a.shape[ax[0]]:
            raise ShapeError(f"average: weights {_tstr(w)} must have the shape of {_tstr(a)}, "
                             "or be 1-D along the one axis averaged over",
                             source=user_source())
        w = reshape(w, [w.shape[0] if i == ax[0] else 1 for i in range(a.ndim)])
        w = broadcast_to(w, a.shape)
    scl = sum(w, axis, keepdims=keepdims)
    r = divide(sum(multiply(a, w), axis, keepdims=keepdims), scl)
    return (r, scl) if returned else r


# ----------------------------------------------------------------------------------- sorting
# One primitive, argsort (stable, last axis; vkgrad/primitives/lax.py; a bitonic sort per row
# on Vulkan): sort, median and percentile gather with it (docs/numpy.md, "Sorting").

def _along_last(fn, a, axis):
    """fn applied along `axis` of a (moved to the last axis and back)."""
    if axis is None:
        return fn(ravel(a))
    ax = _axes(axis, a.ndim)[0]
    if ax == a.ndim - 1:
        return fn(a)
    return moveaxis(fn(moveaxis(a, ax, -1)), -1, ax)


def _sortable(a):
    a = asarray(a)
    if a.ndim == 0:
        raise ShapeError("cannot sort a 0-d array", source=user_source())
    return a if _dtype_of(a) != "bool" else astype(a, "i32")


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """Stable indices that sort `a` along `axis` (int32); descending=True for largest first."""
    if order is not None:
        raise ArgumentError("argsort(order=...) sorts structured arrays, which vkgrad does not "
                            "have", source=user_source())
    return _along_last(lambda x: P.argsort(x, descending), _sortable(a), axis)


def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """Sorted copy along `axis` (its gradient sends each value's cotangent back to where it
    came from)."""
    a = _sortable(a)

    def by_rows(x):
        return P.take_last(x, P.argsort(x, descending))
    return _along_last(by_rows, a, axis)


def take_along_axis(arr, indices, axis):
    """numpy's take_along_axis: out[..., j, ...] = arr[..., indices[..., j, ...], ...]."""
    arr = asarray(arr)
    idx = _index_array(indices, arr.shape[_axes(axis, arr.ndim)[0]] if axis is not None
                       else size(arr), axis)
    if axis is None:
        return P.take(ravel(arr), ravel(idx), 0)
    ax = _axes(axis, arr.ndim)[0]
    if idx.ndim != arr.ndim:
        raise ShapeError(f"take_along_axis: indices {_tstr(idx)} need as many dimensions as "
                         f"{_tstr(arr)}", source=user_source())
    lead = [builtins.max(p, q) for i, (p, q) in enumerate(zip(arr.shape, idx.shape)) if i != ax]
    arr = broadcast_to(arr, [arr.shape[ax] if i == ax else lead[i - (i > ax)]
                             for i in range(arr.ndim)])
    idx = broadcast_to(idx, [idx.shape[ax] if i == ax else lead[i - (i > ax)]
                             for i in range(idx.ndim)])
    return moveaxis(P.take_last(moveaxis(arr, ax, -1), moveaxis(idx, ax, -1)), -1, ax)


def _concrete_q(q, what):
    if isinstance(q, ArrayOps):
        raise ArgumentError(f"vnp.{what}: q must be a Python number or a numpy array (it "
                            "decides which sorted elements are read)", source=user_source())
    return _np.asarray(q, _np.float64)


def _quantiles(a, q, axis, keepdims, what):
    """Linear interpolation between the sorted values (numpy's default method), q in [0, 1]."""
    a = _float(a)
    qs = _np.asarray(q, _np.float64)
    if qs.size and (qs.min() < 0 or qs.max() > 1):
        raise ArgumentError(f"{what}: q must lie in [0, {100 if what == 'percentile' else 1}]",
                            source=user_source())
    axes = _axes(axis, a.ndim)
    kept = [i for i in range(a.ndim) if i not in axes]
    x = reshape(transpose(a, kept + list(axes)), [a.shape[i] for i in kept] + [-1])
    n = x.shape[-1]
    s = sort(x, axis=-1)
    outs = []
    for qi in qs.reshape(-1):
        pos = qi * (n - 1)
        lo, frac = int(math.floor(pos)), float(pos - math.floor(pos))
        hi = builtins.min(lo + 1, n - 1)
        v = s[..., lo]
        if frac:
            v = add(multiply(v, 1.0 - frac), multiply(s[..., hi], frac))
        if keepdims:
            v = reshape(v, [1 if i in axes else a.shape[i] for i in range(a.ndim)])
        outs.append(v)
    r = stack(outs) if outs else zeros((0,))
    return reshape(r, qs.shape + tuple(r.shape[1:]))


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False):
    _no_out(out)
    if method != "linear":
        raise ArgumentError(f"quantile(method={method!r}): vkgrad has numpy's default, "
                            "'linear'", source=user_source())
    return _quantiles(a, _concrete_q(q, "quantile"), axis, keepdims, "quantile")


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False):
    _no_out(out)
    if method != "linear":
        raise ArgumentError(f"percentile(method={method!r}): vkgrad has numpy's default, "
                            "'linear'", source=user_source())
    return _quantiles(a, _concrete_q(q, "percentile") / 100.0, axis, keepdims, "percentile")


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _no_out(out)
    return _quantiles(a, 0.5, axis, keepdims, "median")


# ----------------------------------------------------------------------------------- contractions
# tensordot, dot, inner, outer and einsum lower to transposes, reshapes and ONE matmul per pair
# of operands (the kernel the GPU is fast at), with reductions for indices only one operand has.

def _contract(a, b, ca, cb):
    """sum over a's axes ca against b's axes cb: a's other axes, then b's, as in tensordot."""
    fa = [i for i in range(a.ndim) if i not in ca]
    fb = [i for i in range(b.ndim) if i not in cb]
    for i, j in zip(ca, cb):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"contraction of {_tstr(a)} with {_tstr(b)}: axis {i} ({a.shape[i]})"
                             f" does not match axis {j} ({b.shape[j]})", source=user_source())
    out_shape = [a.shape[i] for i in fa] + [b.shape[j] for j in fb]
    k = math.prod(a.shape[i] for i in ca)
    m, n = math.prod(a.shape[i] for i in fa), math.prod(b.shape[j] for j in fb)
    dt = _promoted(a, b)
    dt = dt if is_float(dt) else "f32"
    a2 = reshape(transpose(_promote(a, dt), fa + list(ca)), (m, k))
    b2 = reshape(transpose(_promote(b, dt), list(cb) + fb), (k, n))
    return reshape(P.matmul(a2, b2), out_shape)


def tensordot(a, b, axes=2):
    a, b = asarray(a), asarray(b)
    if isinstance(axes, (int, _np.integer)):
        ca, cb = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        ca, cb = ([axes[0]] if _is_int(axes[0]) else list(axes[0]),
                  [axes[1]] if _is_int(axes[1]) else list(axes[1]))
        if len(ca) != len(cb):
            raise ShapeError(f"tensordot: axes {axes} pair unequal numbers of axes",
                             source=user_source())
        ca = [_axes(i, a.ndim)[0] for i in ca]
        cb = [_axes(i, b.ndim)[0] for i in cb]
    return _contract(a, b, ca, cb)


def dot(a, b, out=None):
    """numpy's dot: a product with a scalar; 1-D and 2-D as matmul; N-D sums a's last axis
    against b's second-to-last."""
    _no_out(out)
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    if a.ndim <= 2 and b.ndim <= 2:
        return matmul(a, b)
    return _contract(a, b, [a.ndim - 1], [builtins.max(b.ndim - 2, 0)])


def vdot(a, b): return dot(ravel(a), ravel(b))


def inner(a, b):
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    return _contract(a, b, [a.ndim - 1], [b.ndim - 1])


def outer(a, b, out=None):
    _no_out(out)
    a, b = ravel(a), ravel(b)
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def _arranged(x, term, order, shape):
    """x, whose axes `term` labels, with its axes in `order` and reshaped to `shape`."""
    if list(order) != list(term):
        x = transpose(x, [term.index(c) for c in order])
    return reshape(x, shape) if tuple(shape) != tuple(x.shape) else x


def einsum(subscripts, *operands, out=None, optimize=None, dtype=None, precision=None):
    """numpy's einsum, any subscripts (repeated indices take diagonals, '...' broadcasts,
    implicit output when there is no '->'). Lowered to diagonals and sums per operand, then one
    transpose + matmul per pair of operands, left to right; `vg.make_ir` shows the result."""
    _no_out(out)
    if not isinstance(subscripts, str):
        raise ArgumentError("einsum takes its subscripts as a string ('ij,jk->ik'); the "
                            "interleaved form is not supported", source=user_source())
    ops = [asarray(o) for o in operands]
    if dtype is not None:
        ops = [astype(o, dtype) for o in ops]
    spec = subscripts.replace(" ", "")
    ins, arrow, out_spec = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(ops):
        raise ArgumentError(f"einsum: {subscripts!r} names {len(terms)} operand(s), "
                            f"{len(ops)} given", source=user_source())
    pool = [chr(0x3B1 + i) for i in range(24)]   # greek letters stand for the '...' axes
    n_ell = builtins.max([o.ndim - (len(t) - 3) for t, o in zip(terms, ops) if "..." in t],
                         default=0)
    for i, (t, o) in enumerate(zip(terms, ops)):
        if "..." in t:
            k = o.ndim - (len(t) - 3)
            terms[i] = t.replace("...", "".join(pool[n_ell - k:n_ell]))
        if len(terms[i]) != o.ndim or not builtins.all(c.isalpha() for c in terms[i]):
            raise ShapeError(f"einsum: {t!r} does not label the {o.ndim} axes of operand {i} "
                             f"({_tstr(o)})", source=user_source())
    if arrow:
        out_t = out_spec.replace("...", "".join(pool[:n_ell]))
    else:
        once = [c for c in sorted(set("".join(terms))) if "".join(terms).count(c) == 1
                and c not in pool]
        out_t = "".join(pool[:n_ell]) + "".join(once)
    if len(set(out_t)) != len(out_t) or builtins.any(c not in "".join(terms) for c in out_t):
        raise ShapeError(f"einsum: output {out_spec!r} repeats an index or names one no operand "
                         "has", source=user_source())
    sizes: dict = {}
    for t, o in zip(terms, ops):
        for c, d in zip(t, o.shape):
            if sizes.get(c, 1) not in (1, d) and d != 1:
                raise ShapeError(f"einsum: index {c!r} has sizes {sizes[c]} and {d}",
                                 source=user_source())
            sizes[c] = builtins.max(sizes.get(c, 1), d)
    # per operand: diagonals of repeated indices, broadcasting, sums of indices no one else has
    for i in range(len(ops)):
        o, t = ops[i], terms[i]
        while len(set(t)) != len(t):
            c = next(c for c in t if t.count(c) > 1)
            p, q = t.index(c), t.index(c, t.index(c) + 1)
            o = diagonal(o, 0, p, q)
            t = "".join(x for j, x in enumerate(t) if j not in (p, q)) + c
        if tuple(o.shape) != tuple(sizes[c] for c in t):
            o = broadcast_to(o, [sizes[c] for c in t])
        others = "".join(terms[j] for j in range(len(ops)) if j != i) + out_t
        lone = [j for j, c in enumerate(t) if c not in others]
        if lone:
            o = sum(o, tuple(lone))
            t = "".join(c for j, c in enumerate(t) if j not in lone)
        ops[i], terms[i] = o, t
    a, ta = ops[0], terms[0]
    for k in range(1, len(ops)):
        b, tb = ops[k], terms[k]
        needed = set(out_t + "".join(terms[k + 1:]))
        batch = [c for c in ta if c in tb and c in needed]
        summed = [c for c in ta if c in tb and c not in needed]
        a_only = [c for c in ta if c not in tb]
        b_only = [c for c in tb if c not in ta]
        t = batch + a_only + b_only
        dims = [sizes[c] for c in t]
        if not summed:   # nothing to sum: a broadcast product
            a = multiply(_arranged(a, ta, batch + a_only, dims[:len(batch) + len(a_only)]
                                   + [1] * len(b_only)),
                         _arranged(b, tb, batch + b_only, dims[:len(batch)] + [1] * len(a_only)
                                   + dims[len(batch) + len(a_only):]))
        else:            # one (batched) matmul: [batch, a_only, summed] @ [batch, summed, b_only]
            nb, m, kk, n = (math.prod(sizes[c] for c in group)
                            for group in (batch, a_only, summed, b_only))
            a3 = _arranged(a, ta, batch + a_only + summed, (nb, m, kk))
            b3 = _arranged(b, tb, batch + summed + b_only, (nb, kk, n))
            a = reshape(matmul(a3[0], b3[0]) if nb == 1 else matmul(a3, b3), dims)
        ta = "".join(t)
    lone = [j for j, c in enumerate(ta) if c not in out_t]
    if lone:
        a = sum(a, tuple(lone))
        ta = "".join(c for j, c in enumerate(ta) if j not in lone)
    return transpose(a, [ta.index(c) for c in out_t]) if ta != out_t else asarray(a)


# ----------------------------------------------------------------------------------- matrices

def diagonal(a, offset=0, axis1=0, axis2=1):
    """numpy's diagonal: the diagonal of axes (axis1, axis2), as a new LAST axis. A strided
    slice of the two axes flattened together (a layout op: no gather)."""
    a = asarray(a)
    i, j = _axes(axis1, a.ndim)[0], _axes(axis2, a.ndim)[0]
    if i == j:
        raise ShapeError("diagonal: axis1 and axis2 cannot be the same", source=user_source())
    rest = [d for d in range(a.ndim) if d not in (i, j)]
    x = transpose(a, rest + [i, j])
    n, m = x.shape[-2], x.shape[-1]
    if offset >= 0:
        x = x[..., :, builtins.min(offset, m):]
    else:
        x = x[..., builtins.min(-offset, n):, :]
    n, m = x.shape[-2], x.shape[-1]
    k = builtins.min(n, m)
    flat = reshape(x, x.shape[:-2] + (n * m,))
    if k == 0:
        return flat[..., :0]
    return flat[..., : (k - 1) * (m + 1) + 1: m + 1]


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _no_out(out)
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _tri_mask(n, m, k):
    """bool[n, m]: j <= i + k."""
    return P.le(P.iota((n, m), 1, "i32"), P.add(P.iota((n, m), 0, "i32"), int(k)))


def tri(N, M=None, k=0, dtype=float32):
    return astype(_tri_mask(N, N if M is None else M, k), dtype)


def eye(N, M=None, k=0, dtype=float32):
    M = N if M is None else M
    return astype(P.eq(P.iota((N, M), 1, "i32"), P.add(P.iota((N, M), 0, "i32"), int(k))), dtype)


def identity(n, dtype=float32): return eye(n, dtype=dtype)


def tril(m, k=0):
    m = asarray(m)
    return where(_tri_mask(m.shape[-2], m.shape[-1], k), m, zeros((), _dtype_of(m)))


def triu(m, k=0):
    m = asarray(m)
    return where(_tri_mask(m.shape[-2], m.shape[-1], k - 1), zeros((), _dtype_of(m)), m)


def diag(v, k=0):
    """1-D v: the square matrix with v on diagonal k; 2-D: its diagonal k."""
    v = asarray(v)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ShapeError(f"diag takes a 1-D or 2-D array, got {_tstr(v)}", source=user_source())
    n = v.shape[0] + builtins.abs(k)
    col = P.pad(v, (builtins.max(-k, 0),), (builtins.max(k, 0),)) if k else v
    return where(P.eq(P.iota((n, n), 1, "i32"), P.add(P.iota((n, n), 0, "i32"), int(k))),
                 reshape(col, (n, 1)), zeros((), _dtype_of(v)))


# ----------------------------------------------------------------------------------- creation+

def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """Concrete ends: numpy's values (computed in float64, then cast). Traced ends (arrays):
    start + i * step, along a new axis `axis`."""
    num = int(num)
    div = (num - 1) if endpoint else num
    if not isinstance(start, ArrayOps) and not isinstance(stop, ArrayOps):
        dt = _to_dtype_name(dtype) if dtype is not None else "f32"
        r, step = _np.linspace(start, stop, num, endpoint=endpoint, retstep=True, axis=axis)
        r = asarray(r.astype(np_dtype(dt)))
        return (r, step) if retstep else r
    start, stop = _float(start), _float(stop)
    dt = _to_dtype_name(dtype) if dtype is not None else _promoted(start, stop)
    step = divide(subtract(stop, start), div) if div > 0 else multiply(subtract(stop, start), 0.0)
    shape = P.broadcast_shapes("linspace", [P.TensorType(tuple(start.shape), "f32"),
                                           P.TensorType(tuple(stop.shape), "f32")])
    i = P.iota((num,) + tuple(shape), 0, _dtype_of(start))
    r = add(multiply(i, step), start)
    if endpoint and num > 1:
        r = concatenate([r[:-1], expand_dims(broadcast_to(stop, shape), 0)], 0)
    r = moveaxis(r, 0, axis) if axis != 0 else r
    r = astype(r, dt)
    return (r, step) if retstep else r


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    if not isinstance(start, ArrayOps) and not isinstance(stop, ArrayOps):
        r = _np.logspace(start, stop, num, endpoint, base, axis=axis)
        return asarray(r.astype(np_dtype(_to_dtype_name(dtype) if dtype is not None else "f32")))
    r = power(base, linspace(start, stop, num, endpoint, axis=axis))
    return astype(r, dtype) if dtype is not None else r


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    return logspace(math.log10(start), math.log10(stop), num, endpoint, 10.0, dtype, axis)


def meshgrid(*xi, indexing="xy", sparse=False, copy=True):
    if indexing not in ("xy", "ij"):
        raise ArgumentError("meshgrid: indexing is 'xy' or 'ij'", source=user_source())
    xs = [ravel(x) for x in xi]
    nd = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and nd > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        ax = (1 if i == 0 else 0 if i == 1 else i) if indexing == "xy" and nd > 1 else i
        r = reshape(x, [x.shape[0] if j == ax else 1 for j in range(nd)])
        out.append(r if sparse else broadcast_to(r, shape))
    return out


def empty(shape, dtype=float32): return zeros(shape, dtype)
def empty_like(a, dtype=None): return zeros_like(a, dtype)


# ----------------------------------------------------------------------------------- shapes+

def _atleast(arys, padded) -> list:
    """Each array reshaped to padded(its shape): numpy's atleast_nd."""
    out = []
    for a in map(asarray, arys):
        shape = padded(tuple(a.shape))
        out.append(reshape(a, shape) if shape != tuple(a.shape) else a)
    return out


def _pad1(s): return s or (1,)
def _pad2(s): return (1,) * (2 - len(s)) + s if len(s) < 2 else s
def _pad3(s): return {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s)
def _one_or_list(r): return r[0] if len(r) == 1 else r
def atleast_1d(*arys): return _one_or_list(_atleast(arys, _pad1))
def atleast_2d(*arys): return _one_or_list(_atleast(arys, _pad2))
def atleast_3d(*arys): return _one_or_list(_atleast(arys, _pad3))


def hstack(tup):
    arrs = _atleast(tup, _pad1)
    return concatenate(arrs, 0 if arrs[0].ndim == 1 else 1)


def vstack(tup): return concatenate(_atleast(tup, _pad2), 0)
def dstack(tup): return concatenate(_atleast(tup, _pad3), 2)


row_stack = vstack


def column_stack(tup):
    arrs = [asarray(a) for a in tup]
    return concatenate([reshape(a, (-1, 1)) if a.ndim < 2 else a for a in arrs], 1)


def append(arr, values, axis=None):
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def broadcast_arrays(*args):
    args = [asarray(a) for a in args]
    shape = P.broadcast_shapes("broadcast_arrays",
                               [P.TensorType(tuple(a.shape), "f32") for a in args])
    return [a if tuple(a.shape) == shape else broadcast_to(a, shape) for a in args]


def broadcast_shapes(*shapes) -> tuple:
    return P.broadcast_shapes("broadcast_shapes", [P.TensorType(tuple(s), "f32")
                                                   for s in shapes])


def flip(m, axis=None):
    m = asarray(m)
    axes = _axes(axis, m.ndim)
    return _getitem(m, tuple(slice(None, None, -1) if i in axes else slice(None)
                             for i in range(m.ndim)))


def fliplr(m): return flip(m, 1)
def flipud(m): return flip(m, 0)


def rot90(m, k=1, axes=(0, 1)):
    m = asarray(m)
    k %= 4
    a0, a1 = _axes(axes[0], m.ndim)[0], _axes(axes[1], m.ndim)[0]
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return transpose(flip(m, a1), perm) if k == 1 else flip(transpose(m, perm), a1)


def roll(a, shift, axis=None):
    a = asarray(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) != len(axes):
        shifts = shifts * len(axes) if len(shifts) == 1 else shifts
    for s, ax in zip(shifts, axes):
        ax = _axes(ax, a.ndim)[0]
        n = a.shape[ax]
        s = int(s) % n if n else 0
        if s:
            lo = [slice(None)] * a.ndim
            hi = [slice(None)] * a.ndim
            lo[ax], hi[ax] = slice(n - s, n), slice(0, n - s)
            a = concatenate([_getitem(a, tuple(lo)), _getitem(a, tuple(hi))], ax)
    return a


def repeat(a, repeats, axis=None):
    a = asarray(a)
    if axis is None:
        a, axis = ravel(a), 0
    ax = _axes(axis, a.ndim)[0]
    if _is_int(repeats):
        r = int(repeats)
        x = expand_dims(a, ax + 1)
        x = broadcast_to(x, a.shape[:ax + 1] + (r,) + a.shape[ax + 1:])
        return reshape(x, a.shape[:ax] + (a.shape[ax] * r,) + a.shape[ax + 1:])
    if isinstance(repeats, Tracer):
        raise concretization_error(repeats, "vnp.repeat with per-element counts (the result's "
                                   "shape depends on them)", "pass the counts as a numpy "
                                   "array or list")
    counts = _np.broadcast_to(_np.asarray(repeats), (a.shape[ax],))
    return P.take(a, _np.repeat(_np.arange(a.shape[ax]), counts).astype(_np.int32), ax)


def tile(A, reps):
    A = asarray(A)
    reps = (reps,) if _is_int(reps) else tuple(reps)
    nd = builtins.max(A.ndim, len(reps))
    A = reshape(A, (1,) * (nd - A.ndim) + tuple(A.shape))
    reps = (1,) * (nd - len(reps)) + reps
    x = reshape(A, [d for s in A.shape for d in (1, s)])
    x = broadcast_to(x, [d for r, s in zip(reps, A.shape) for d in (r, s)])
    return reshape(x, [r * s for r, s in zip(reps, A.shape)])


def array_split(ary, indices_or_sections, axis=0):
    a = asarray(ary)
    ax = _axes(axis, a.ndim)[0]
    n = a.shape[ax]
    if _is_int(indices_or_sections):
        k = int(indices_or_sections)
        if k <= 0:
            raise ArgumentError("number of sections must be larger than 0",
                                source=user_source())
        each, extra = builtins.divmod(n, k)
        sizes = [each + 1] * extra + [each] * (k - extra)
        bounds = [0] + list(_np.cumsum(sizes))
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i) + (n if i < 0 else 0), 0), n)
                        for i in indices_or_sections] + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        key = [slice(None)] * a.ndim
        key[ax] = slice(int(lo), builtins.max(int(hi), int(lo)))
        out.append(_getitem(a, tuple(key)))
    return out


def split(ary, indices_or_sections, axis=0):
    a = asarray(ary)
    if _is_int(indices_or_sections) and a.shape[_axes(axis, a.ndim)[0]] % indices_or_sections:
        raise ShapeError(f"split: {_tstr(a)} does not divide into {indices_or_sections} equal "
                         f"parts along axis {axis} (vnp.array_split allows unequal ones)",
                         source=user_source())
    return array_split(a, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 0 if asarray(ary).ndim == 1 else 1)


def vsplit(ary, indices_or_sections): return split(ary, indices_or_sections, 0)
def dsplit(ary, indices_or_sections): return split(ary, indices_or_sections, 2)


def pad(array, pad_width, mode="constant", constant_values=0):
    """numpy's pad, modes 'constant', 'edge' and 'reflect' (what people use for images and
    sequences; the others are refused by name)."""
    a = asarray(array)
    pw = _np.broadcast_to(_np.asarray(pad_width, dtype=_np.int64), (a.ndim, 2)).tolist()
    if builtins.any(p < 0 for row in pw for p in row):
        raise ArgumentError("pad: pad widths must be non-negative", source=user_source())
    if mode == "constant":
        cv = _np.broadcast_to(_np.asarray(constant_values), (a.ndim, 2))
        r = P.pad(a, [lo for lo, _ in pw], [hi for _, hi in pw])
        if not cv.any():
            return r
        for ax, ((lo, hi), (vlo, vhi)) in enumerate(zip(pw, cv.tolist())):
            idx = P.iota(r.shape, ax, "i32")
            inside = logical_and(greater_equal(idx, lo), less(idx, r.shape[ax] - hi))
            before = less(idx, lo)
            r = where(inside, r, where(before, vlo, vhi))
        return astype(r, _dtype_of(a))
    if mode not in ("edge", "reflect"):
        raise ArgumentError(f"pad(mode={mode!r}): vkgrad pads in modes 'constant', 'edge' and "
                            "'reflect'", source=user_source())
    for ax, (lo, hi) in enumerate(pw):
        n = a.shape[ax]
        if (lo or hi) and n == 0:
            raise ShapeError(f"pad: cannot pad an empty axis {ax} in mode {mode!r}",
                             source=user_source())
        if mode == "edge":
            before = [0] * lo
            after = [n - 1] * hi
        else:
            if n == 1:
                before, after = [0] * lo, [0] * hi
            else:
                period = 2 * (n - 1)

                def refl(i):
                    i %= period
                    return i if i < n else period - i
                before = [refl(-i) for i in range(lo, 0, -1)]
                after = [refl(n - 1 + i) for i in range(1, hi + 1)]
        if before or after:
            idx = _np.asarray(before + list(range(n)) + after, _np.int32)
            a = P.take(a, idx, ax)
    return a


class _IndexHelper:
    """numpy's r_ and c_: concatenate arrays, scalars and slices (an int step is arange, a
    complex step `1j * num` is linspace) along the first axis (r_) or as columns (c_)."""

    def __init__(self, columns: bool):
        self.columns = columns

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        parts = []
        for k in key:
            if isinstance(k, str):
                raise ArgumentError(f"{'c_' if self.columns else 'r_'}[{k!r}, ...]: the string "
                                    "directives of numpy's index helpers are not supported; "
                                    "use vnp.concatenate / vnp.stack", source=user_source())
            if isinstance(k, slice):
                start = 0 if k.start is None else k.start
                step = 1 if k.step is None else k.step
                if isinstance(step, complex):
                    parts.append(linspace(start, k.stop, int(builtins.abs(step))))
                else:
                    parts.append(arange(start, k.stop, step))
            else:
                parts.append(atleast_1d(k))
        if self.columns:
            parts = [reshape(p, (-1, 1)) if p.ndim == 1 else p for p in parts]
            return concatenate(parts, -1)
        return concatenate(parts, 0)


r_ = _IndexHelper(columns=False)
c_ = _IndexHelper(columns=True)


def nonzero(a):
    """Indices of the non-zero entries: concrete values only (the number of results is data)."""
    a = asarray(a)
    if isinstance(a, Tracer):
        raise concretization_error(
            a, "vnp.nonzero / one-argument vnp.where (their result's shape depends on the "
            "data)", "use vnp.where(cond, x, y) to select values, or vnp.sum(cond) to count")
    return tuple(i.astype(_np.int32) for i in _np.nonzero(_np.asarray(a)))


def argwhere(a): return _np.stack(nonzero(a), axis=-1)
def flatnonzero(a): return nonzero(ravel(a))[0]


# ----------------------------------------------------------------------------------- x.at[...]
# JAX's functional updates: x.at[idx].set(v) returns a new array (arrays are immutable). The
# updated positions are found by indexing an array of flat positions with idx (the same
# indexing as x[idx]), then updates are gathered and scattered on the flattened x.

class _At:
    __slots__ = ("_x",)

    def __init__(self, x):
        self._x = x

    def __getitem__(self, idx):
        return _AtRef(self._x, idx)


class _AtRef:
    """x.at[idx]: .get(), .set(v), .add(v), .multiply(v) (.mul), .divide(v), .power(v),
    .min(v), .max(v). Repeated indices: add/mul/min/max combine every update (as JAX);
    set keeps the last one (numpy's order) where the indices are concrete."""

    __slots__ = ("x", "idx")

    def __init__(self, x, idx):
        self.x, self.idx = asarray(x), idx

    def get(self, *, mode=None, fill_value=None):
        return _getitem(self.x, self.idx)

    def _positions(self):
        """The flat positions idx selects, shaped like x[idx]: a numpy array when idx is
        concrete (any numpy index works, boolean masks too), else a traced i32 array."""
        x, idx = self.x, self.idx
        n = math.prod(x.shape)
        keys = idx if isinstance(idx, tuple) else (idx,)
        if not builtins.any(isinstance(k, ArrayOps) for k in keys):
            try:
                return _np.arange(n, dtype=_np.int32).reshape(x.shape)[idx]
            except IndexError as e:
                raise VkgradIndexError(f"x.at[...]: {e}", source=user_source()) from None
        # gathered as f32 (exact below 2**24; the gather kernel moves f32) and cast back
        return astype(_getitem(reshape(P.iota((n,), 0, "f32"), x.shape), idx), "i32")

    def _apply(self, v, combine):
        """x with combine(x[idx], v) at idx (combine None: v itself)."""
        x, idx = self.x, self.idx
        if isinstance(idx, ArrayOps) and _dtype_of(idx) == "bool" and \
                tuple(idx.shape) == tuple(x.shape):   # a traced mask: a select, no scatter
            v = astype(asarray(v), _dtype_of(x))
            return where(idx, v if combine is None else combine(x, v), x)
        pos = self._positions()
        dt = _dtype_of(x)
        n = math.prod(x.shape)
        v = astype(broadcast_to(asarray(v), tuple(pos.shape)), dt)
        flat_x, flat_v = ravel(x), ravel(v)
        if isinstance(pos, _np.ndarray):   # concrete: rounds of distinct positions
            for slots, at_ in _duplicate_rounds(pos.reshape(-1), keep_last=combine is None):
                hit = _np.zeros(n, bool)
                hit[at_] = True
                upd = P.scatter_add(P.take(flat_v, slots.astype(_np.int32), 0),
                                    at_.astype(_np.int32), 0, (n,))
                flat_x = where(hit, upd if combine is None else combine(flat_x, upd), flat_x)
            return reshape(flat_x, x.shape)
        p = ravel(pos)   # traced positions: every update lands
        if combine is add:
            return reshape(add(flat_x, P.scatter_add(flat_v, p, 0, (n,))), x.shape)
        if combine is not None:
            raise VkgradIndexError(
                "x.at[traced indices].mul/min/max/...: vkgrad needs concrete indices for these "
                "(repeated indices must be grouped at trace time); use .add, .set, or numpy "
                "indices", source=user_source())
        count = P.scatter_add(ones(tuple(p.shape), dt), p, 0, (n,))   # set: repeats -> mean
        upd = divide(P.scatter_add(flat_v, p, 0, (n,)), maximum(count, 1))
        return reshape(where(greater(count, 0), astype(upd, dt), flat_x), x.shape)

    def set(self, values, **kw): return self._apply(values, None)
    def add(self, values, **kw): return self._apply(values, add)
    def multiply(self, values, **kw): return self._apply(values, multiply)
    def divide(self, values, **kw): return self._apply(values, divide)
    def power(self, values, **kw): return self._apply(values, power)
    def min(self, values, **kw): return self._apply(values, minimum)
    def max(self, values, **kw): return self._apply(values, maximum)
    mul = multiply


def _duplicate_rounds(pos, keep_last):
    """Split the update slots into rounds with distinct positions each: [(slots, positions)].
    keep_last: one round, the last update of each position (numpy's x[idx] = v)."""
    if keep_last:
        _, first_rev = _np.unique(pos[::-1], return_index=True)
        slots = len(pos) - 1 - first_rev
        return [(slots, pos[slots])] if len(slots) else []
    rounds, slots = [], _np.arange(len(pos))
    while len(slots):
        _, first = _np.unique(pos[slots], return_index=True)
        rounds.append((slots[first], pos[slots[first]]))
        slots = _np.delete(slots, first)
    return rounds


def at(x):
    """`vnp.at(x)[idx].set(v)`: the same as x.at[idx] for any array, numpy's too (outside a
    transformed function vnp returns numpy arrays, which have no .at)."""
    return _At(x)


def _setitem(self, key, value):
    raise ArgumentError(
        "vkgrad arrays are immutable: x[idx] = v cannot change x. Use x = x.at[idx].set(v) "
        "(also .add, .mul, .min, .max), which returns the updated array",
        source=user_source())


# ----------------------------------------------------------------------------------- linalg

class _Linalg:
    """vnp.linalg: norm (what vkgrad has of numpy.linalg; decompositions are not supported)."""

    @staticmethod
    def norm(x, ord=None, axis=None, keepdims=False):
        """Vector norms (ord None/2, 1, inf, -inf, 0, any p) over one axis; matrix norms
        (None/'fro', 1, -1, inf, -inf) over two; axis=None with ord=None: the 2-norm of the
        flattened array. ord=2 and 'nuc' on matrices need singular values: not supported."""
        x = _float(x)
        if axis is None:
            if ord is None:
                r = sqrt(sum(multiply(x, x)))
                return reshape(r, (1,) * x.ndim) if keepdims else r
            if x.ndim not in (1, 2):
                raise ShapeError(f"norm(ord={ord!r}) of {_tstr(x)}: give axis (numpy takes "
                                 "1-D or 2-D arrays here)", source=user_source())
            axis = tuple(range(x.ndim))
        ax = [_axes(a, x.ndim)[0] for a in ((axis,) if _is_int(axis) else tuple(axis))]
        if len(ax) == 1:
            a = abs(x)
            if ord is None or ord == 2:
                return sqrt(sum(multiply(x, x), ax, keepdims=keepdims))
            if isinstance(ord, str):
                raise ArgumentError(f"norm: ord={ord!r} is a matrix norm; give two axes",
                                    source=user_source())
            if ord == inf:
                return max(a, ax, keepdims=keepdims)
            if ord == -inf:
                return min(a, ax, keepdims=keepdims)
            if ord == 0:
                return sum(astype(not_equal(x, 0), _dtype_of(x)), ax, keepdims=keepdims)
            if ord == 1:
                return sum(a, ax, keepdims=keepdims)
            return power(sum(power(a, float(ord)), ax, keepdims=keepdims), 1.0 / ord)
        if len(ax) != 2 or ax[0] == ax[1]:
            raise ArgumentError(f"norm: axis={axis!r} must name one axis (a vector norm) or two "
                                "(a matrix norm)", source=user_source())
        row, col = ax
        if ord in (None, "fro"):
            return sqrt(sum(multiply(x, x), ax, keepdims=keepdims))
        if ord not in (1, -1, inf, -inf):
            raise ArgumentError(f"norm(ord={ord!r}) of a matrix needs its singular values (an "
                                "SVD), which vkgrad does not have; ord 'fro', 1, -1, inf and "
                                "-inf are supported", source=user_source())
        summed, chosen = (row, col) if ord in (1, -1) else (col, row)  # 1: largest column sum
        s = sum(abs(x), summed, keepdims=True)
        r = (max if ord > 0 else min)(s, chosen, keepdims=True)
        return r if keepdims else squeeze(r, (row, col))


linalg = _Linalg()


# ----------------------------------------------------------------------------------- dtype names
# numpy's dtype names, mapped by the dtype policy (module docstring): float16 is refused where a
# dtype is asked for (astype, dtype=), narrower or wider ints are int32.
float16, int64, int16, int8, uint8, uint32 = (_np.float16, _np.int64, _np.int16, _np.int8,
                                               _np.uint8, _np.uint32)
bool8 = _np.bool_
dtype = _np.dtype
finfo, iinfo = _np.finfo, _np.iinfo


def issubdtype(arg1, arg2) -> bool:
    return _np.issubdtype(arg1, arg2)


floating, integer, number, inexact, signedinteger = (_np.floating, _np.integer, _np.number,
                                                      _np.inexact, _np.signedinteger)


# ----------------------------------------------------------------------------------- array methods
# What operators and numpy's method names mean on vkgrad's arrays (Tracer and vkgrad.Array share
# ArrayOps): defined here, installed once on import, so the trace core needs no knowledge of them.

def _operator(fn, reflected=False):
    if reflected:
        def method(self, other):
            return fn(other, self)
    else:
        def method(self, other):
            return fn(self, other)
    return method


def _method_reshape(self, *shape, order="C"):
    return reshape(self, shape[0] if len(shape) == 1 else shape)


def _method_transpose(self, *axes):
    return transpose(self, (axes[0] if len(axes) == 1 else axes) or None)


_OPERATORS = {"add": add, "sub": subtract, "mul": multiply, "truediv": divide, "pow": power,
              "matmul": matmul, "and": logical_and, "or": logical_or, "mod": remainder,
              "floordiv": floor_divide}
_COMPARISONS = {"lt": less, "le": less_equal, "gt": greater, "ge": greater_equal, "eq": equal,
                "ne": not_equal}
_METHODS = {
    "__neg__": negative, "__pos__": lambda self: self, "__abs__": abs,
    "__invert__": logical_not, "__getitem__": _getitem,
    "T": property(lambda self: transpose(self)),
    "reshape": _method_reshape, "transpose": _method_transpose, "astype": astype,
    "swapaxes": swapaxes, "squeeze": lambda self, axis=None: squeeze(self, axis),
    "ravel": ravel, "flatten": ravel, "dot": dot,
    "sum": lambda self, axis=None, dtype=None, out=None, keepdims=False:
        sum(self, axis=axis, dtype=dtype, keepdims=keepdims),
    "mean": lambda self, axis=None, dtype=None, out=None, keepdims=False:
        mean(self, axis=axis, dtype=dtype, keepdims=keepdims),
    "var": lambda self, axis=None, dtype=None, out=None, ddof=0, keepdims=False:
        var(self, axis=axis, ddof=ddof, keepdims=keepdims),
    "max": lambda self, axis=None, out=None, keepdims=False: max(self, axis=axis,
                                                                  keepdims=keepdims),
    "min": lambda self, axis=None, out=None, keepdims=False: min(self, axis=axis,
                                                                  keepdims=keepdims),
    "clip": lambda self, min=None, max=None: clip(self, min, max),
    "__setitem__": _setitem, "at": property(_At),
    "std": lambda self, axis=None, dtype=None, out=None, ddof=0, keepdims=False:
        std(self, axis=axis, out=out, ddof=ddof, keepdims=keepdims),
    "prod": lambda self, axis=None, dtype=None, out=None, keepdims=False:
        prod(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims),
    "cumsum": lambda self, axis=None, dtype=None, out=None: cumsum(self, axis, dtype, out),
    "cumprod": lambda self, axis=None, dtype=None, out=None: cumprod(self, axis, dtype, out),
    "any": lambda self, axis=None, out=None, keepdims=False: any(self, axis, out, keepdims),
    "all": lambda self, axis=None, out=None, keepdims=False: all(self, axis, out, keepdims),
    "argmax": lambda self, axis=None, out=None, keepdims=False: argmax(self, axis, keepdims),
    "argmin": lambda self, axis=None, out=None, keepdims=False: argmin(self, axis, keepdims),
    "argsort": lambda self, axis=-1, kind=None, order=None: argsort(self, axis, kind, order),
    "round": lambda self, decimals=0, out=None: round(self, decimals, out),
    "repeat": lambda self, repeats, axis=None: repeat(self, repeats, axis),
    "trace": lambda self, offset=0, axis1=0, axis2=1, dtype=None, out=None:
        trace(self, offset, axis1, axis2, dtype, out),
    "diagonal": lambda self, offset=0, axis1=0, axis2=1: diagonal(self, offset, axis1, axis2),
    "nonzero": nonzero,
}


def _tracer_array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """np.exp(tracer) works (it is vnp.exp); other ufunc methods need a concrete value."""
    fn = _public(ufunc.__name__)
    if method == "__call__" and not kwargs and fn is not None:
        return fn(*inputs)
    if method != "__call__":
        raise concretization_error(self, f"numpy's {ufunc.__name__}.{method}",
                                   "use vkgrad.numpy's functions (vnp.cumsum, vnp.cumprod, "
                                   "vnp.sum, vnp.outer, ...): vkgrad has no ufunc methods")
    raise concretization_error(self, f"numpy's {ufunc.__name__}"
                               + (f" with {', '.join(kwargs)}=" if kwargs else ""),
                               _instead(ufunc.__name__, fn))


def _public(name):
    """The vkgrad.numpy function of that name, or None."""
    fn = globals().get(name)
    return fn if callable(fn) and not name.startswith("_") and not isinstance(fn, type) \
        and name not in ("asarray", "array") else None


def _instead(name, fn) -> str:
    if fn is not None:
        return f"use vkgrad.numpy.{name} instead"
    return (f"vkgrad.numpy does not support {name} yet; compute it from the functions it has "
            "(docs/numpy.md lists them), or outside the transformed function")


def _tracer_array_function(self, func, types, args, kwargs):
    fn = (getattr(linalg, func.__name__, None) if func.__module__.endswith("linalg") else
          _public(func.__name__))
    if fn is None or func.__name__ in ("asarray", "array"):
        raise concretization_error(self, f"numpy.{func.__name__}", _instead(
            func.__name__, globals().get(func.__name__) if func.__name__ in ("asarray", "array")
            else None))
    return fn(*args, **kwargs)


def _install_array_methods() -> None:
    for name, fn in _OPERATORS.items():
        setattr(ArrayOps, f"__{name}__", _operator(fn))
        setattr(ArrayOps, f"__r{name}__", _operator(fn, reflected=True))
    for name, fn in _COMPARISONS.items():
        setattr(ArrayOps, f"__{name}__", _operator(fn))
    for name, fn in _METHODS.items():
        setattr(ArrayOps, name, fn)
    Tracer.__array_ufunc__ = _tracer_array_ufunc
    Tracer.__array_function__ = _tracer_array_function


_install_array_methods()
