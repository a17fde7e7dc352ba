"""vkgrad.numpy (`vnp`): numpy's names and semantics, on traced values and on numpy arrays.

Inside a transformed function every call here emits IR; outside one it computes now (through
the single eager path, numpy today) and returns numpy arrays.

Semantics follow numpy, with these choices:
* dtypes are float32 (the default for Python floats and float lists), float64, int32 (other
  integer inputs are narrowed) and bool;
* promotion: bool < i32 < f32 < f64; Python scalars are weakly typed (`x * 2.0` keeps an f32 x
  f32; `i * 0.5` for an int i is f32); arithmetic on bools computes in i32; divide, power and the
  transcendental functions on integers compute in f32;
* `take` clamps traced indices into range (a GPU kernel cannot raise); negative indices are
  allowed where the index is a concrete array or a Python int;
* indexing supports ints, slices (negative bounds and steps), None, Ellipsis and ONE integer
  array index without int indices beside it (numpy's mixed advanced-indexing rules move axes;
  use vnp.take for those); boolean masks give data-dependent shapes: use vnp.where.
* softmax, log_softmax and logsumexp live here too (jax.nn / scipy.special names), and
  stop_gradient.
"""

from __future__ import annotations

import builtins
import math

import numpy as _np

from vkgrad.errors import DTypeError, ShapeError, VkgradIndexError
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


def result_type(*xs) -> _np.dtype:
    """The dtype operations on xs compute in (numpy's name; vkgrad's promotion rules)."""
    return np_dtype(_promoted(*xs))


def _promoted(*xs) -> str:
    """numpy-style promotion with weakly typed Python scalars (see the module docstring)."""
    strong = [d for d in map(_dtype_of, xs) if d is not None]
    weak = [_weak_kind(x) for x in xs if _is_weak(x)]
    if not strong:
        return builtins.max(weak, key=_ORDER.get) if weak else "f32"
    dt = builtins.max(strong, key=_ORDER.get)
    for w in weak:
        if _ORDER[w] > _ORDER[dt] and not (w == "f32" and dt == "f64"):
            dt = "f32" if w == "f32" else builtins.max(dt, w, key=_ORDER.get)
    return dt


def _to_dtype_name(dtype) -> str:
    return canonical_dtype(dtype) if not isinstance(dtype, str) or dtype not in _ORDER \
        else dtype


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
    return [x if isinstance(x, ArrayOps) or _is_weak(x) else asarray(x) for x in xs]


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


def where(condition, x, y):
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
    a = asarray(a)
    if dtype is not None:
        a = astype(a, dtype)
    elif _dtype_of(a) == "bool":
        a = astype(a, "i32")
    axes = _axes(axis, a.ndim)
    return _keepdims(P.reduce_sum(a, axes), a.shape, axes, keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims=False):
    a = asarray(a) if dtype is None else astype(a, dtype)
    a = _float(a)
    axes = _axes(axis, a.ndim)
    n = math.prod(a.shape[i] for i in axes)
    return P.mul(sum(a, axes, keepdims=keepdims), 1.0 / n if n else _np.nan)   # mean = sum*scale


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    a = _float(a)
    axes = _axes(axis, a.ndim)
    n = math.prod(a.shape[i] for i in axes)
    d = subtract(a, mean(a, axes, keepdims=True))
    v = mean(multiply(d, d), axes, keepdims=keepdims)
    # numpy: sum(d*d) / (n - ddof), which is inf (nan for a zero sum) when ddof >= n
    return v if ddof == 0 else P.mul(v, n / (n - ddof) if n > ddof else _np.inf)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    a = _float(a)
    v = var(a, axis, ddof=ddof, keepdims=keepdims)
    if ddof == 0 and math.prod(a.shape[i] for i in _axes(axis, a.ndim)) == 1:
        return v   # over one element the variance is identically 0: so is std, and its
    return sqrt(v)  # gradient (sqrt's at 0 would be 0 * inf = nan)


def max(a, axis=None, out=None, keepdims=False):
    a = asarray(a)
    axes = _axes(axis, a.ndim)
    return _keepdims(P.reduce_max(a, axes), a.shape, axes, keepdims)


def min(a, axis=None, out=None, keepdims=False):
    a = asarray(a)
    axes = _axes(axis, a.ndim)
    return _keepdims(P.reduce_min(a, axes), a.shape, axes, keepdims)


amax, amin = max, min


def _arg_extreme(a, axis, keepdims, reduce):
    """The first index of the max (min) along `axis`: the smallest index where a equals its
    extreme. Built from eq, where and a min reduction (no primitive of its own); the indices are
    float32 inside (exact below 2**24), so the float reduction kernels serve it."""
    a = asarray(a)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    ax = _axes(axis, a.ndim)[0]
    n = a.shape[ax]
    hit = P.eq(a, reduce(a, axis=ax, keepdims=True))
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


def dot(a, b):
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    if a.ndim > 2 or b.ndim > 2:
        raise ShapeError("vnp.dot supports 1-D and 2-D operands; use vnp.matmul (@) for "
                         "batches", source=user_source())
    return matmul(a, b)


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
              "matmul": matmul, "and": logical_and, "or": logical_or}
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
}


def _tracer_array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """np.exp(tracer) works (it is vnp.exp); other ufunc methods need a concrete value."""
    fn = globals().get(ufunc.__name__)
    if method == "__call__" and not kwargs and callable(fn):
        return fn(*inputs)
    raise concretization_error(self, f"numpy's {ufunc.__name__}.{method}",
                               f"use vkgrad.numpy.{ufunc.__name__} instead")


def _tracer_array_function(self, func, types, args, kwargs):
    fn = globals().get(func.__name__)
    if not callable(fn) or func.__name__.startswith("_") or func.__name__ in ("asarray",
                                                                               "array"):
        instead = (f"use vkgrad.numpy.{func.__name__}" if callable(fn) else
                   f"vkgrad.numpy has no {func.__name__} yet; compute it from the functions "
                   "it has, or outside the traced function")
        raise concretization_error(self, f"numpy.{func.__name__}", instead)
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
