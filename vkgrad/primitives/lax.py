"""The basic primitives (elementwise, reductions, layout, gathers, matmul, softmax), each
defined once with its rules right below it.

For each primitive, beside its definition (the tables are vkgrad.ir.core's, except `impls`,
vkgrad.ir.interpreter's):
    abstract_eval_rules[p]   shape/dtype rule
    impls[p]                 numpy implementation
    vjp_rules[p]             VJP rule
    param_defaults[p]        params the printer elides (where useful)
Their GLSL, with the driver workarounds, is the lowering's (vkgrad/lowering/glsl.py).

The functions below the primitives (`add`, `matmul`, `reduce_sum`, ...) bind them: this is the
lax-like layer that vkgrad.numpy (numpy semantics: promotion, keepdims, axis=-1, ...) is built
on. Python scalars passed to them are weakly typed: they take the other operand's dtype.

VJP rules have the signature `rule(g, ans, *inputs, **params) -> tuple` (one cotangent per
input; None where the input gets none: integer operands, zero gradients). They are written with
these same operations and run under the autodiff trace, so the backward pass is IR that prints,
optimises and differentiates again. Comparisons produce bool and need no VJP rule: autodiff
never sends a cotangent into an eqn whose outputs are not float.

Elementwise primitives broadcast like numpy (rank-aligned from the right, size-1 dims stretch);
their VJPs sum the cotangent back to each operand's shape (`_unbroadcast`): a bias added in the
forward is a reduction in the backward.
"""

from __future__ import annotations

import math

import numpy as np

from vkgrad.dtypes import (ALL_DTYPES, FLOAT_DTYPES, NUMERIC_DTYPES, canonical_dtype, dtype_name,
                           np_dtype)
from vkgrad.errors import DTypeError, ShapeError, VkgradIndexError
from vkgrad.ir.core import (Primitive, TensorType, abstract_eval_rules, batching_rules,
                            param_defaults, vjp_rules)
from vkgrad.ir.interpreter import impls
from vkgrad.tracer.core import ArrayOps, bind

# ----------------------------------------------------------------------------------- helpers


def dtype_of(x) -> str | None:
    """dtype name of an operand; None for a (weakly typed) Python scalar."""
    if isinstance(x, ArrayOps):   # a tracer, or a vkgrad.Array on a device
        return x.aval.dtype
    if isinstance(x, (np.ndarray, np.generic)):
        return canonical_dtype(x.dtype)
    return None


def _shape(x) -> tuple:
    return x.shape if isinstance(x, ArrayOps) else np.shape(x)


def _coerce(*xs):
    """Give Python scalars the dtype of the first typed operand (weak typing)."""
    dt = next((d for d in map(dtype_of, xs) if d is not None), None)
    if dt is None:
        return xs
    return tuple(np_dtype(dt).type(x) if dtype_of(x) is None else x for x in xs)


def broadcast_shapes(name: str, types) -> tuple:
    """numpy's broadcasting of the operand shapes, or a ShapeError naming them."""
    ndim = max((len(t.shape) for t in types), default=0)
    padded = [(1,) * (ndim - len(t.shape)) + tuple(t.shape) for t in types]
    out = []
    for dims in zip(*padded):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise ShapeError(f"{name}: operands {', '.join(str(t) for t in types)} cannot be "
                             "broadcast together (numpy rules: aligned from the right, each "
                             "dimension equal or 1)")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _check_dtypes(name, types, allowed):
    dts = sorted({t.dtype for t in types})
    if len(dts) > 1:
        raise DTypeError(f"{name}: operands have different dtypes ({', '.join(map(str, types))});"
                         " convert one with .astype()")
    if dts and dts[0] not in allowed:
        raise DTypeError(f"{name} is not defined for {dts[0]} operands "
                         f"(it takes {', '.join(sorted(allowed))})")
    return dts[0] if dts else None


def _elementwise_rule(name, nargs, allowed, out_dtype=None):
    def rule(*types):
        if len(types) != nargs:
            raise ShapeError(f"{name} takes {nargs} operand(s), got {len(types)}")
        dt = _check_dtypes(name, types, allowed)
        return TensorType(broadcast_shapes(name, types), out_dtype or dt)
    return rule


def _elementwise(name, nargs, impl, allowed=FLOAT_DTYPES, *, out_dtype=None, traits=()):
    """Define an elementwise primitive: shape rule and numpy impl in one line (its GLSL is the
    lowering's, vkgrad/lowering/glsl.py)."""
    p = Primitive(name, ("pure", "elementwise", *traits))
    abstract_eval_rules[p] = _elementwise_rule(name, nargs, allowed, out_dtype)
    impls[p] = impl
    batching_rules[p] = elementwise_batcher(p)
    return p


def _unbroadcast(g, x):
    """Sum g (the broadcast result's cotangent) back to x's shape: the backward of broadcasting."""
    shape, gshape = tuple(_shape(x)), tuple(_shape(g))
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and gshape[lead + i] != 1)
    r = reduce_sum(g, axes) if axes else g
    return reshape(r, shape) if tuple(_shape(r)) != shape else r


def keep_shape(shape, axes) -> tuple:
    """`shape` with the reduced `axes` kept as size 1 (numpy's keepdims)."""
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _zeros_like(x):
    return broadcast_to(np_dtype(dtype_of(x)).type(0), _shape(x))


# ----------------------------------------------------------------------------------- batching
# What the batching rules (vmap; vkgrad.ir.core.batching_rules) are written with. A rule gets the
# operands with the mapped axis in them and `dims`, where that axis is in each (None: not
# mapped); it returns the result(s) and where the mapped axis is in each.


def mapped_size(args, dims) -> int:
    """The size of the mapped axis (the batch)."""
    return next(_shape(x)[d] for x, d in zip(args, dims) if d is not None)


def moveaxis(x, src: int, dst: int):
    """x with axis `src` moved to position `dst` (a transpose; x itself when src == dst)."""
    if src == dst:
        return x
    perm = [i for i in range(len(_shape(x))) if i != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def batch_to_front(x, d, size: int):
    """x with the mapped axis first: moved there, or broadcast there when x is not mapped."""
    if d is None:
        return broadcast_to(x, (size,) + tuple(_shape(x)))
    return moveaxis(x, d, 0)


def merge_batch(x, d, size: int):
    """The mapped axis folded into x's first axis: [size * n, ...] (a kernel's own batch)."""
    x = batch_to_front(x, d, size)
    s = tuple(_shape(x))
    return reshape(x, (s[0] * s[1],) + s[2:])


def split_batch(x, size: int):
    """merge_batch's inverse on a result: [size * n, ...] -> [size, n, ...]."""
    s = tuple(_shape(x))
    return reshape(x, (size, s[0] // size) + s[1:])


def elementwise_batcher(prim):
    """The batching rule of a broadcasting elementwise primitive: a mapped operand gets its
    mapped axis first and size-1 axes after it up to the result's rank, so the per-example
    axes still align from the right; unmapped operands broadcast as they are."""
    def rule(args, dims, **params):
        rank = max(len(_shape(x)) - (d is not None) for x, d in zip(args, dims))
        ins = []
        for x, d in zip(args, dims):
            if d is not None:
                x = moveaxis(x, d, 0)
                s = tuple(_shape(x))
                if len(s) - 1 < rank:
                    x = reshape(x, s[:1] + (1,) * (rank - len(s) + 1) + s[1:])
            ins.append(x)
        return bind(prim, *ins, **params), 0
    return rule


def unrolled_batcher(prim):
    """A batching rule for a primitive whose batch cannot fold into one call: the primitive
    once per example (index, bind, stack). Emits `size` calls: only where no rule can exist."""
    def rule(args, dims, **params):
        size = mapped_size(args, dims)
        outs = []
        for i in range(size):
            ex = [x if d is None else _index_axis(x, d, i) for x, d in zip(args, dims)]
            r = bind(prim, *ex, **params)
            outs.append(list(r) if prim.multiple_results else [r])
        stacked = [concatenate([reshape(o[j], (1,) + tuple(_shape(o[j]))) for o in outs], 0)
                   for j in range(len(outs[0]))]
        return (stacked, [0] * len(stacked)) if prim.multiple_results else (stacked[0], 0)
    return rule


def _index_axis(x, d, i):
    """x[..., i, ...] along axis d (the axis dropped)."""
    s = tuple(_shape(x))
    start, limit = [0] * len(s), list(s)
    start[d], limit[d] = i, i + 1
    return reshape(slice_(x, start, limit), s[:d] + s[d + 1:])


# =================================================================================== elementwise
# Binary arithmetic. Operands share a dtype (vkgrad.numpy promotes first).

add_p = _elementwise("add", 2, np.add, NUMERIC_DTYPES, traits=("commutative",))
vjp_rules[add_p] = lambda g, ans, x, y: (_unbroadcast(g, x), _unbroadcast(g, y))

mul_p = _elementwise("mul", 2, np.multiply, NUMERIC_DTYPES,
                     traits=("commutative",))
vjp_rules[mul_p] = lambda g, ans, x, y: (_unbroadcast(mul(g, y), x), _unbroadcast(mul(g, x), y))

div_p = _elementwise("div", 2, np.divide)
# d(x/y)/dy = -x/y^2 = -(x/y)/y
vjp_rules[div_p] = lambda g, ans, x, y: (_unbroadcast(div(g, y), x),
                                         _unbroadcast(neg(div(mul(g, ans), y)), y))

pow_p = _elementwise("pow", 2, np.power)


def _pow_vjp(g, ans, x, y):
    # d(x^y)/dx = y x^(y-1); where y == 0 it is 0 (x^0 is constant), not 0 * 0^-1 = nan at x = 0.
    # The base is replaced by 1 there too, so the second derivative sees no 0^-2 (the two-select
    # rule: a select alone still sends 0 * inf = nan back through the branch it did not take).
    y0 = eq(y, 0)
    dx = mul(g, select(y0, 0, mul(y, power(select(y0, 1, x), sub(y, 1)))))
    # d(x^y)/dy = x^y log x; where x == 0 the product is 0 (not 0 * -inf = nan)
    safe_log = log(select(eq(x, 0), 1, x))
    dy = mul(g, mul(ans, safe_log))
    return _unbroadcast(dx, x), _unbroadcast(dy, y)


vjp_rules[pow_p] = _pow_vjp


def _chosen_share(g, x, y, wins):
    """x's share of max(x, y)'s (or min's) cotangent, JAX's balanced rule: all of g where x
    alone is the result (`wins`: y < x for max), half where x and y tie (jax.grad of
    jnp.maximum(x, 2.) at x = 2 is 0.5), none where y wins or either is NaN. From the
    operands alone, not the result: the backward keeps no more residuals than x and y."""
    return select(wins, g, select(eq(x, y), mul(g, 0.5), 0))


def _chooser2_vjp(larger):
    def vjp(g, ans, x, y):
        x_wins, y_wins = (lt(y, x), lt(x, y)) if larger else (lt(x, y), lt(y, x))
        return (_unbroadcast(_chosen_share(g, x, y, x_wins), x),
                _unbroadcast(_chosen_share(g, y, x, y_wins), y))
    return vjp


def _signed_zero_max(x, y):
    """numpy's maximum, but max(-0.0, 0.0) is 0.0 in either order, as JAX's (IEEE 754-2019's
    maximum; numpy's returns whichever operand comes first, so it is not commutative there)."""
    r = np.maximum(x, y)
    if r.dtype.kind != "f":
        return r
    return np.where((x == 0) & (y == 0), np.add(x, y, dtype=r.dtype), r)   # -0 only if both


def _signed_zero_min(x, y):
    """numpy's minimum, with min(0.0, -0.0) = -0.0 in either order, as JAX's."""
    r = np.minimum(x, y)
    if r.dtype.kind != "f":
        return r
    return np.where((x == 0) & (y == 0), -np.add(-x, -y, dtype=r.dtype), r)


max_p = _elementwise("max", 2, _signed_zero_max, NUMERIC_DTYPES,
                     traits=("commutative",))
vjp_rules[max_p] = _chooser2_vjp(larger=True)

min_p = _elementwise("min", 2, _signed_zero_min, NUMERIC_DTYPES,
                     traits=("commutative",))
vjp_rules[min_p] = _chooser2_vjp(larger=False)

# Unary.
neg_p = _elementwise("neg", 1, np.negative, NUMERIC_DTYPES)
vjp_rules[neg_p] = lambda g, ans, x: (neg(g),)

exp_p = _elementwise("exp", 1, np.exp)
vjp_rules[exp_p] = lambda g, ans, x: (mul(g, ans),)

log_p = _elementwise("log", 1, np.log)
vjp_rules[log_p] = lambda g, ans, x: (div(g, x),)

log1p_p = _elementwise("log1p", 1, np.log1p)
vjp_rules[log1p_p] = lambda g, ans, x: (div(g, add(x, 1)),)

tanh_p = _elementwise("tanh", 1, np.tanh)
vjp_rules[tanh_p] = lambda g, ans, x: (mul(g, sub(1, mul(ans, ans))),)

sin_p = _elementwise("sin", 1, np.sin)
vjp_rules[sin_p] = lambda g, ans, x: (mul(g, cos(x)),)

cos_p = _elementwise("cos", 1, np.cos)
vjp_rules[cos_p] = lambda g, ans, x: (neg(mul(g, sin(x))),)

abs_p = _elementwise("abs", 1, np.abs, NUMERIC_DTYPES)
# JAX's: g where x >= 0 (abs'(0) = 1, jax.grad(jnp.abs)(0.) is 1.0), -g elsewhere
vjp_rules[abs_p] = lambda g, ans, x: (select(le(0, x), g, neg(g)),)

sign_p = _elementwise("sign", 1, np.sign, NUMERIC_DTYPES)
vjp_rules[sign_p] = lambda g, ans, x: (None,)      # piecewise constant: zero gradient

sqrt_p = _elementwise("sqrt", 1, np.sqrt)
vjp_rules[sqrt_p] = lambda g, ans, x: (div(g, mul(ans, 2)),)

stop_gradient_p = _elementwise("stop_gradient", 1, lambda x: x, ALL_DTYPES)
vjp_rules[stop_gradient_p] = lambda g, ans, x: (None,)   # identity forward, zero backward

# Bitwise operations on the two's-complement bits of i32 (no VJP: integer results). A shift by
# an amount outside [0, 32) gives what numpy and JAX give: 0 to the left, the sign bit to the
# right (shift_right is arithmetic, numpy's right_shift of a signed integer).
_INTS = frozenset({"i32"})
and_p = _elementwise("and", 2, np.bitwise_and, _INTS, traits=("commutative",))
or_p = _elementwise("or", 2, np.bitwise_or, _INTS, traits=("commutative",))
xor_p = _elementwise("xor", 2, np.bitwise_xor, _INTS, traits=("commutative",))


def _shift_left_impl(x, y):
    inside = (y >= 0) & (y < 32)
    return np.where(inside, np.left_shift(x, np.where(inside, y, 0)), 0).astype(np.int32)


def _shift_right_impl(x, y):
    return np.right_shift(x, np.where((y >= 0) & (y < 32), y, 31)).astype(np.int32)


shift_left_p = _elementwise("shift_left", 2, _shift_left_impl, _INTS)
shift_right_p = _elementwise("shift_right", 2, _shift_right_impl, _INTS)

# Comparisons produce bool (no VJP: nothing flows back through a bool). gt/ge swap operands.
lt_p = _elementwise("lt", 2, np.less, NUMERIC_DTYPES, out_dtype="bool")
le_p = _elementwise("le", 2, np.less_equal, NUMERIC_DTYPES, out_dtype="bool")
eq_p = _elementwise("eq", 2, np.equal, ALL_DTYPES, out_dtype="bool",
                    traits=("commutative",))
ne_p = _elementwise("ne", 2, np.not_equal, ALL_DTYPES, out_dtype="bool",
                    traits=("commutative",))

# select(cond, a, b): numpy's where, broadcasting all three.
select_p = Primitive("select", ("pure", "elementwise"))


def _select_rule(c, a, b):
    if c.dtype != "bool":
        raise DTypeError(f"select: the condition must be bool, got {c}")
    _check_dtypes("select", [a, b], ALL_DTYPES)
    return TensorType(broadcast_shapes("select", [c, a, b]), a.dtype)


abstract_eval_rules[select_p] = _select_rule
impls[select_p] = np.where
vjp_rules[select_p] = lambda g, ans, c, a, b: (None, _unbroadcast(select(c, g, 0), a),
                                               _unbroadcast(select(c, 0, g), b))
batching_rules[select_p] = elementwise_batcher(select_p)

# convert[dtype]: a cast (float -> int truncates, x -> bool is x != 0).
convert_p = Primitive("convert", ("pure", "elementwise"))
abstract_eval_rules[convert_p] = lambda x, *, dtype: TensorType(x.shape, dtype_name(dtype))
impls[convert_p] = lambda x, *, dtype: np.asarray(x).astype(np_dtype(dtype))
vjp_rules[convert_p] = lambda g, ans, x, *, dtype: (
    (convert(g, dtype_of(x)),) if dtype_of(x) in FLOAT_DTYPES else (None,))
batching_rules[convert_p] = elementwise_batcher(convert_p)

# =================================================================================== reductions
# reduce_*[axes]: axes is a sorted tuple; the reduced axes are dropped (vkgrad.numpy's keepdims
# is a reshape after the reduction, so the primitive has one output shape rule).


def _reduce_rule(name, allowed):
    def rule(x, *, axes):
        if any(not 0 <= a < x.ndim for a in axes) or list(axes) != sorted(set(axes)):
            raise VkgradIndexError(f"{name}: axes {axes} are not sorted distinct axes of {x}")
        _check_dtypes(name, [x], allowed)
        if name != "reduce_sum" and any(x.shape[a] == 0 for a in axes):
            # as numpy and JAX: an error, not a value (the interpreter failed inside numpy and
            # Vulkan gave -inf; found by tests/test_fuzz.py)
            raise ShapeError(f"{name} over an axis of length 0 of {x}: there is no element "
                             "to choose (numpy raises too)")
        return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)
    return rule


def _reduction(name, impl, allowed=NUMERIC_DTYPES):
    p = Primitive(name, ("pure",))
    abstract_eval_rules[p] = _reduce_rule(name, allowed)
    impls[p] = lambda x, *, axes: impl(x, axis=tuple(axes)) if axes else x
    batching_rules[p] = _reduce_batcher(p)
    return p


def _reduce_batcher(prim):
    """The reduced axes shift past the mapped axis, which stays where it is."""
    def rule(args, dims, *, axes):
        (x,), (d,) = args, dims
        phys = tuple(a + (a >= d) for a in axes)
        return bind(prim, x, axes=phys), d - sum(a < d for a in phys)
    return rule


reduce_sum_p = _reduction("reduce_sum", np.sum)
vjp_rules[reduce_sum_p] = lambda g, ans, x, *, axes: (
    broadcast_to(reshape(g, keep_shape(x.shape, axes)), x.shape),)

reduce_max_p = _reduction("reduce_max", np.max)
reduce_min_p = _reduction("reduce_min", np.min)


def _chooser_vjp(g, ans, x, *, axes):
    """max/min: the gradient goes to the elements equal to the result, shared among ties."""
    keep = keep_shape(x.shape, axes)
    hit = convert(eq(x, broadcast_to(reshape(ans, keep), x.shape)), dtype_of(x))
    share = div(g, reduce_sum(hit, axes))
    return (mul(broadcast_to(reshape(share, keep), x.shape), hit),)


vjp_rules[reduce_max_p] = _chooser_vjp
vjp_rules[reduce_min_p] = _chooser_vjp

# =================================================================================== shapes

# broadcast_to[shape]: numpy's broadcast_to (operand dims aligned with the result's last dims).
broadcast_to_p = Primitive("broadcast_to", ("pure", "layout"))


def _broadcast_to_rule(x, *, shape):
    lead = len(shape) - x.ndim
    if lead < 0 or any(d not in (1, shape[lead + i]) for i, d in enumerate(x.shape)):
        raise ShapeError(f"broadcast_to: cannot broadcast {x} to shape {tuple(shape)} (numpy "
                         "rules: aligned from the right, each dimension equal or 1)")
    return TensorType(tuple(shape), x.dtype)


abstract_eval_rules[broadcast_to_p] = _broadcast_to_rule
impls[broadcast_to_p] = lambda x, *, shape: np.broadcast_to(x, shape)
vjp_rules[broadcast_to_p] = lambda g, ans, x, *, shape: (_unbroadcast(g, x),)


def _broadcast_to_batcher(args, dims, *, shape):
    x = moveaxis(args[0], dims[0], 0)          # [B, *s], then size-1 axes up to len(shape)
    s = tuple(_shape(x))
    x = reshape(x, s[:1] + (1,) * (len(shape) - len(s) + 1) + s[1:])
    return broadcast_to(x, s[:1] + tuple(shape)), 0


batching_rules[broadcast_to_p] = _broadcast_to_batcher

# reshape[shape]: row-major, same number of elements.
reshape_p = Primitive("reshape", ("pure", "layout"))


def _reshape_rule(x, *, shape):
    if math.prod(shape) != x.size or any(d < 0 for d in shape):
        raise ShapeError(f"reshape: cannot reshape {x} ({x.size} elements) to shape "
                         f"{tuple(shape)}")
    return TensorType(tuple(shape), x.dtype)


abstract_eval_rules[reshape_p] = _reshape_rule
impls[reshape_p] = lambda x, *, shape: np.reshape(x, shape)
vjp_rules[reshape_p] = lambda g, ans, x, *, shape: (reshape(g, _shape(x)),)
batching_rules[reshape_p] = lambda args, dims, *, shape: (
    reshape(moveaxis(args[0], dims[0], 0), (_shape(args[0])[dims[0]],) + tuple(shape)), 0)

# transpose[perm]: result dim i is operand dim perm[i].
transpose_p = Primitive("transpose", ("pure", "layout"))


def _transpose_rule(x, *, perm):
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"transpose: {tuple(perm)} is not a permutation of the axes of {x}")
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype)


abstract_eval_rules[transpose_p] = _transpose_rule
impls[transpose_p] = lambda x, *, perm: np.transpose(x, perm)
vjp_rules[transpose_p] = lambda g, ans, x, *, perm: (transpose(g, tuple(np.argsort(perm))),)
# the mapped axis goes first; per-example axis p is axis p + (p >= d) of the operand
batching_rules[transpose_p] = lambda args, dims, *, perm: (transpose(
    args[0], (dims[0],) + tuple(p + (p >= dims[0]) for p in perm)), 0)

# slice[start, limit, step]: x[start:limit:step] per dimension, 0 <= start <= limit <= n, step >= 1.
slice_p = Primitive("slice", ("pure", "layout"))


def _slice_rule(x, *, start, limit, step):
    if not len(start) == len(limit) == len(step) == x.ndim:
        raise ShapeError(f"slice: start/limit/step need one entry per dimension of {x}")
    for s, l, k, n in zip(start, limit, step, x.shape):
        if not (0 <= s <= l <= n and k >= 1):
            raise VkgradIndexError(f"slice: [{s}:{l}:{k}] is out of range for a dimension of "
                                   f"size {n} in {x}")
    return TensorType(tuple(max(0, -(-(l - s) // k)) for s, l, k in zip(start, limit, step)),
                      x.dtype)


abstract_eval_rules[slice_p] = _slice_rule
impls[slice_p] = lambda x, *, start, limit, step: x[tuple(map(slice, start, limit, step))]


def _slice_vjp(g, ans, x, *, start, limit, step):
    if 0 in _shape(ans):
        return (_zeros_like(x),)
    # the cotangent lands at start, start+step, ...: pad with step-1 zeros between elements
    high = [n - (s + (m - 1) * k + 1) for n, s, m, k in zip(_shape(x), start, _shape(ans), step)]
    return (pad(g, start, high, [k - 1 for k in step]),)


vjp_rules[slice_p] = _slice_vjp


def _slice_batcher(args, dims, *, start, limit, step):
    (x,), (d,) = args, dims
    ins = lambda t, v: tuple(t[:d]) + (v,) + tuple(t[d:])   # the mapped axis, whole
    return slice_(x, ins(start, 0), ins(limit, _shape(x)[d]), ins(step, 1)), d


batching_rules[slice_p] = _slice_batcher

# pad[low, high, interior]: zeros before, after and between the elements of each dimension.
pad_p = Primitive("pad", ("pure", "layout"))


def _pad_rule(x, *, low, high, interior):
    if not len(low) == len(high) == len(interior) == x.ndim or min((*low, *high, *interior),
                                                                    default=0) < 0:
        raise ShapeError(f"pad: low/high/interior need one non-negative entry per dimension "
                         f"of {x}")
    return TensorType(tuple(lo + hi + n + max(n - 1, 0) * i
                            for lo, hi, i, n in zip(low, high, interior, x.shape)), x.dtype)


def _pad_impl(x, *, low, high, interior):
    out = np.zeros([lo + hi + n + max(n - 1, 0) * i
                    for lo, hi, i, n in zip(low, high, interior, x.shape)], x.dtype)
    out[tuple(slice(lo, lo + max(n - 1, 0) * (i + 1) + 1, i + 1)
              for lo, i, n in zip(low, interior, x.shape))] = x
    return out


abstract_eval_rules[pad_p] = _pad_rule
impls[pad_p] = _pad_impl
vjp_rules[pad_p] = lambda g, ans, x, *, low, high, interior: (slice_(
    g, low, [lo + max(n - 1, 0) * (i + 1) + (1 if n else 0)
             for lo, i, n in zip(low, interior, _shape(x))], [i + 1 for i in interior]),)
batching_rules[pad_p] = lambda args, dims, *, low, high, interior: (pad(
    args[0], *(tuple(t[:dims[0]]) + (0,) + tuple(t[dims[0]:]) for t in (low, high, interior))),
    dims[0])

# concatenate[axis]: any number of operands of one dtype, equal except along axis.
concatenate_p = Primitive("concatenate", ("pure", "layout"))


def _concatenate_rule(*xs, axis):
    if not xs:
        raise ShapeError("concatenate needs at least one operand")
    _check_dtypes("concatenate", xs, ALL_DTYPES)
    nd = xs[0].ndim
    if not 0 <= axis < nd or any(x.ndim != nd or any(a != b for i, (a, b) in
                                                     enumerate(zip(x.shape, xs[0].shape))
                                                     if i != axis) for x in xs):
        raise ShapeError(f"concatenate along axis {axis}: operands "
                         f"{', '.join(map(str, xs))} must match in every other dimension")
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return TensorType(tuple(shape), xs[0].dtype)


def _concatenate_vjp(g, ans, *xs, axis):
    out, off = [], 0
    for x in xs:
        shape = _shape(x)
        start = [0] * len(shape)
        start[axis] = off
        limit = list(_shape(ans))
        limit[axis] = off + shape[axis]
        out.append(slice_(g, start, limit, [1] * len(shape)))
        off += shape[axis]
    return tuple(out)


abstract_eval_rules[concatenate_p] = _concatenate_rule
impls[concatenate_p] = lambda *xs, axis: np.concatenate(xs, axis=axis)
vjp_rules[concatenate_p] = _concatenate_vjp
batching_rules[concatenate_p] = lambda args, dims, *, axis: (concatenate(
    [batch_to_front(x, d, mapped_size(args, dims)) for x, d in zip(args, dims)], axis + 1), 0)

# iota[shape, dimension, dtype]: the index along `dimension` (arange, one_hot, reversal).
iota_p = Primitive("iota", ("pure", "layout"))


def _iota_rule(*, shape, dimension, dtype):
    if not 0 <= dimension < len(shape):
        raise VkgradIndexError(f"iota: dimension {dimension} out of range for shape {shape}")
    return TensorType(tuple(shape), dtype_name(dtype))


def _iota_impl(*, shape, dimension, dtype):
    r = np.arange(shape[dimension]).reshape([-1 if i == dimension else 1
                                             for i in range(len(shape))])
    return np.broadcast_to(r, shape).astype(np_dtype(dtype))


abstract_eval_rules[iota_p] = _iota_rule
impls[iota_p] = _iota_impl
# (no batching rule: iota has no operands, so it is never mapped)

# =================================================================================== gathers
# take[axis](x, idx): x.shape[:axis] + idx.shape + x.shape[axis+1:] (embeddings: axis=0).
# Indices are clamped into [0, n) in the interpreter, as a GPU kernel does.
take_p = Primitive("take")


def _take_rule(x, idx, *, axis):
    if idx.dtype != "i32":
        raise DTypeError(f"take: indices must be i32, got {idx}")
    if not 0 <= axis < x.ndim:
        raise VkgradIndexError(f"take: axis {axis} out of range for {x}")
    return TensorType(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)


abstract_eval_rules[take_p] = _take_rule
impls[take_p] = lambda x, idx, *, axis: np.take(x, np.clip(idx, 0, x.shape[axis] - 1), axis)
vjp_rules[take_p] = lambda g, ans, x, idx, *, axis: (scatter_add(g, idx, axis, _shape(x)), None)


def _flat_indices(idx, n):
    """Per-example indices [B, ...] (clamped into [0, n) as take does) as indices into the
    [B * n] rows of the examples' tables stacked: idx + b * n."""
    s = tuple(_shape(idx))
    return add(maximum(minimum(idx, n - 1), 0), mul(iota(s, 0), n))


def _take_batcher(args, dims, *, axis):
    (x, idx), (dx, di) = args, dims
    if di is None:                      # mapped table, shared indices
        return take(moveaxis(x, dx, 0), idx, axis + 1), 0
    if dx is None:                      # shared table: the mapped axis is among idx's axes
        return take(x, idx, axis), axis + di
    # both mapped: one gather from the tables stacked as rows [B * n, pre..., post...]
    x = moveaxis(moveaxis(x, dx, 0), axis + 1, 1)
    b, n, *rest = _shape(x)
    idx = moveaxis(idx, di, 0)
    k = len(_shape(idx)) - 1
    g = take(reshape(x, (b * n, *rest)), _flat_indices(idx, n), 0)   # [B, *idx, pre, post]
    perm = [0, *range(1 + k, 1 + k + axis), *range(1, 1 + k), *range(1 + k + axis, len(_shape(g)))]
    return transpose(g, perm), 0


batching_rules[take_p] = _take_batcher

# scatter_add[axis, shape](g, idx): zeros of `shape`, g's slices added at the indexed rows (the
# transpose of take: repeated indices accumulate).
scatter_add_p = Primitive("scatter_add")


def _scatter_add_rule(g, idx, *, axis, shape):
    if idx.dtype != "i32":
        raise DTypeError(f"scatter_add: indices must be i32, got {idx}")
    if not 0 <= axis < len(shape) or tuple(g.shape) != tuple(shape[:axis]) + idx.shape + \
            tuple(shape[axis + 1:]):
        raise ShapeError(f"scatter_add: updates {g} do not fit indices {idx} into shape "
                         f"{tuple(shape)} along axis {axis}")
    return TensorType(tuple(shape), g.dtype)


def _scatter_add_impl(g, idx, *, axis, shape):
    out = np.zeros(shape, g.dtype)
    np.add.at(out, (slice(None),) * axis + (np.clip(idx, 0, shape[axis] - 1),), g)
    return out


abstract_eval_rules[scatter_add_p] = _scatter_add_rule
impls[scatter_add_p] = _scatter_add_impl
vjp_rules[scatter_add_p] = lambda ct, ans, g, idx, *, axis, shape: (take(ct, idx, axis), None)


def _scatter_add_batcher(args, dims, *, axis, shape):
    (g, idx), (dg, di) = args, dims
    size = mapped_size(args, dims)
    if di is None:                      # shared indices: scatter each example's slices
        return scatter_add(moveaxis(g, dg, 0), idx, axis + 1, (size,) + tuple(shape)), 0
    # mapped indices: scatter into the examples' results stacked as rows [B * n, pre, post]
    g, idx, n = batch_to_front(g, dg, size), moveaxis(idx, di, 0), shape[axis]
    k = len(_shape(idx)) - 1
    g = transpose(g, [0, *range(1 + axis, 1 + axis + k), *range(1, 1 + axis),
                      *range(1 + axis + k, len(_shape(g)))])           # [B, *idx, pre, post]
    rest = tuple(shape[:axis]) + tuple(shape[axis + 1:])
    ni = math.prod(_shape(idx))
    r = scatter_add(reshape(g, (ni,) + rest), reshape(_flat_indices(idx, n), (ni,)), 0,
                    (size * n,) + rest)
    r = reshape(r, (size, n) + rest)                                    # [B, n, pre, post]
    return moveaxis(r, 1, 1 + axis), 0


batching_rules[scatter_add_p] = _scatter_add_batcher

# =================================================================================== matmul
# matmul[transpose_a, transpose_b](A, B) = op(A) @ op(B), op = swap of the last two dims when its
# flag is set. 2-D, or 3-D with equal batch dims (vkgrad.numpy broadcasts batches first). The
# flags let `A @ B.T` and the whole backward run without a transpose kernel (docs/compiler.md).
# preferred_element_type (JAX's dot_general parameter): "f32" makes the product of 16-bit
# operands an f32 result, the f32 accumulator unrounded (the cooperative-matrix kernel's f32
# output; attention's scores, lowering/attention_scores.py); None: the operands' dtype.
matmul_p = Primitive("matmul")
param_defaults[matmul_p] = {"transpose_a": False, "transpose_b": False,
                            "preferred_element_type": None}


def _matmul_rule(a, b, *, transpose_a, transpose_b, preferred_element_type=None):
    flags = "".join([" (A transposed)" if transpose_a else "", " (B transposed)" if transpose_b
                     else ""])
    if a.ndim != b.ndim or a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[0] != b.shape[0]):
        raise ShapeError(f"matmul of {a} by {b}{flags}: needs two 2-D operands, or two 3-D "
                         "operands with the same batch size")
    m, k = a.shape[-2:][::-1] if transpose_a else a.shape[-2:]
    k2, n = b.shape[-2:][::-1] if transpose_b else b.shape[-2:]
    if k != k2:
        raise ShapeError(f"matmul of {a} by {b}{flags}: inner dimensions differ ({k} vs {k2})")
    _check_dtypes("matmul", [a, b], FLOAT_DTYPES)
    if preferred_element_type not in (None, "f32"):
        raise DTypeError(f"matmul of {a} by {b}: preferred_element_type "
                         f"{preferred_element_type} (it takes f32, or None)")
    return TensorType(a.shape[:-2] + (m, n), preferred_element_type or a.dtype)


def _matmul_impl(a, b, *, transpose_a, transpose_b, preferred_element_type=None):
    a = np.swapaxes(a, -1, -2) if transpose_a else a
    b = np.swapaxes(b, -1, -2) if transpose_b else b
    if np.isfinite(a).all() and np.isfinite(b).all():
        return np.matmul(a, b)
    # BLAS skips the products of a zero (reference gemv/gemm test x[k] != 0), so numpy's matmul
    # of 0 and inf gives inf where IEEE (and the kernel, and XLA) give nan: sum the products
    return np.einsum("...ik,...kj->...ij", a, b, optimize=False)


def _matmul_vjp(g, ans, a, b, *, transpose_a, transpose_b, preferred_element_type=None):
    ta, tb = transpose_a, transpose_b
    if preferred_element_type is not None:
        # a 16-bit product with an f32 result: its f32 cotangent meets the operands in f32
        # (as XLA's transpose of such a dot does), each gradient rounded to its operand's dtype
        da, db = _matmul_vjp(g, ans, convert(a, "f32"), convert(b, "f32"),
                             transpose_a=ta, transpose_b=tb)
        return convert(da, dtype_of(a)), convert(db, dtype_of(b))
    # C = op(A) op(B): dop(A) = g op(B)^T, dop(B) = op(A)^T g -- expressed through the flags.
    da = matmul(g, b, False, not tb) if not ta else matmul(b, g, tb, True)
    db = matmul(a, g, not ta, False) if not tb else matmul(g, a, True, ta)
    return da, db


abstract_eval_rules[matmul_p] = _matmul_rule
impls[matmul_p] = _matmul_impl
vjp_rules[matmul_p] = _matmul_vjp


def _matmul_batcher(args, dims, *, transpose_a, transpose_b, preferred_element_type=None):
    """Both mapped: a batched matmul (the mapped axis joins the batch). One mapped: its mapped
    axis folds into its rows (A) or columns (B) beside the shared operand: one bigger matmul,
    which is what the per-example gradient of a dense layer needs."""
    (a, b), (da, db) = args, dims
    ta, tb, pet = transpose_a, transpose_b, preferred_element_type
    size = mapped_size(args, dims)
    if da is not None and db is not None:
        a, b = moveaxis(a, da, 0), moveaxis(b, db, 0)
        if len(_shape(a)) == 3:
            return matmul(a, b, ta, tb, pet), 0
        r = matmul(merge_batch(a, 0, size), merge_batch(b, 0, size), ta, tb, pet)
        return split_batch(r, size), 0
    if da is not None:                  # A's rows: the m axis, the last but one (last if ta)
        nd = len(_shape(a)) - 1
        m_axis = nd - 1 if ta else nd - 2
        a = moveaxis(a, da, m_axis)
        s = tuple(_shape(a))
        r = matmul(reshape(a, s[:m_axis] + (s[m_axis] * s[m_axis + 1],) + s[m_axis + 2:]), b,
                   ta, tb, pet)
        rs = tuple(_shape(r))
        return reshape(r, rs[:-2] + (size, rs[-2] // size, rs[-1])), nd - 2
    nd = len(_shape(b)) - 1             # B's columns: the n axis, the last (last but one if tb)
    n_axis = nd - 2 if tb else nd - 1
    b = moveaxis(b, db, n_axis)
    s = tuple(_shape(b))
    r = matmul(a, reshape(b, s[:n_axis] + (s[n_axis] * s[n_axis + 1],) + s[n_axis + 2:]), ta, tb,
               pet)
    rs = tuple(_shape(r))
    return reshape(r, rs[:-1] + (size, rs[-1] // size)), nd - 1


batching_rules[matmul_p] = _matmul_batcher

# =================================================================================== softmax
# softmax[axis], log_softmax[axis] over the LAST axis (axis == ndim-1; vkgrad.numpy transposes
# other axes there), each with a backward primitive that a hand-written kernel can implement:
#   softmax_bwd(y, g)     = y * (g - sum(g*y))            y = softmax(x)
#   log_softmax_bwd(y, g) = g - exp(y) * sum(g)           y = log_softmax(x)
# The backward primitives' own VJPs are compositions, so grad-of-grad works.


def _last_axis_rule(name, nargs):
    def rule(*xs, axis):
        if len(xs) != nargs:
            raise ShapeError(f"{name} takes {nargs} operand(s), got {len(xs)}")
        x = xs[0]
        _check_dtypes(name, xs, FLOAT_DTYPES)
        if x.ndim == 0 or axis != x.ndim - 1 or any(y.shape != x.shape for y in xs):
            raise ShapeError(f"{name}: works along the last axis (axis={x.ndim - 1}) of "
                             f"equal-shaped operands, got axis={axis} for "
                             f"{', '.join(map(str, xs))}")
        return TensorType(x.shape, x.dtype)
    return rule


def _sum_last(x):
    return np.sum(x, axis=-1, keepdims=True)


def _softmax_impl(x, *, axis):   # initial: rows of length 0 give empty results, no error
    e = np.exp(x - np.max(x, axis=-1, keepdims=True, initial=-np.inf))
    return e / _sum_last(e)


def _log_softmax_impl(x, *, axis):
    s = x - np.max(x, axis=-1, keepdims=True, initial=-np.inf)
    return s - np.log(_sum_last(np.exp(s)))


def _bsum(x, axis):
    """sum over `axis`, broadcast back to x's shape (keepdims + broadcast)."""
    shape = _shape(x)
    return broadcast_to(reshape(reduce_sum(x, (axis,)), keep_shape(shape, (axis,))), shape)


softmax_p = Primitive("softmax")
abstract_eval_rules[softmax_p] = _last_axis_rule("softmax", 1)
impls[softmax_p] = _softmax_impl
vjp_rules[softmax_p] = lambda g, ans, x, *, axis: (softmax_bwd(ans, g, axis),)


def _last_axis_batcher(prim):
    """softmax and friends work along the last axis: the mapped axis goes first."""
    def rule(args, dims, *, axis):
        size = mapped_size(args, dims)
        return bind(prim, *(batch_to_front(x, d, size) for x, d in zip(args, dims)),
                    axis=axis + 1), 0
    return rule


batching_rules[softmax_p] = _last_axis_batcher(softmax_p)

log_softmax_p = Primitive("log_softmax")
abstract_eval_rules[log_softmax_p] = _last_axis_rule("log_softmax", 1)
impls[log_softmax_p] = _log_softmax_impl
vjp_rules[log_softmax_p] = lambda g, ans, x, *, axis: (log_softmax_bwd(ans, g, axis),)
batching_rules[log_softmax_p] = _last_axis_batcher(log_softmax_p)

softmax_bwd_p = Primitive("softmax_bwd")
abstract_eval_rules[softmax_bwd_p] = _last_axis_rule("softmax_bwd", 2)
impls[softmax_bwd_p] = lambda y, g, *, axis: y * (g - _sum_last(g * y))


def _softmax_bwd_vjp(h, ans, y, g, *, axis):
    # out = y*g - y*s, s = sum(g*y):  dy = h*(g - s) - g*sum(h*y);  dg = y*(h - sum(h*y))
    t = _bsum(mul(h, y), axis)
    dy = sub(mul(h, sub(g, _bsum(mul(g, y), axis))), mul(g, t))
    return dy, softmax_bwd(y, h, axis)


vjp_rules[softmax_bwd_p] = _softmax_bwd_vjp
batching_rules[softmax_bwd_p] = _last_axis_batcher(softmax_bwd_p)

log_softmax_bwd_p = Primitive("log_softmax_bwd")
abstract_eval_rules[log_softmax_bwd_p] = _last_axis_rule("log_softmax_bwd", 2)
impls[log_softmax_bwd_p] = lambda y, g, *, axis: g - np.exp(y) * _sum_last(g)


def _log_softmax_bwd_vjp(h, ans, y, g, *, axis):
    # out = g - p*S, p = exp(y), S = sum(g):  dy = -h*p*S;  dg = h - sum(h*p)
    p = exp(y)
    dy = neg(mul(mul(h, p), _bsum(g, axis)))
    return dy, sub(h, _bsum(mul(h, p), axis))


vjp_rules[log_softmax_bwd_p] = _log_softmax_bwd_vjp
batching_rules[log_softmax_bwd_p] = _last_axis_batcher(log_softmax_bwd_p)

# =================================================================================== the lax layer
# One function per primitive (plus sub): what vkgrad.numpy and the VJP rules call.


def add(x, y): return bind(add_p, *_coerce(x, y))
def mul(x, y): return bind(mul_p, *_coerce(x, y))
def div(x, y): return bind(div_p, *_coerce(x, y))
def power(x, y): return bind(pow_p, *_coerce(x, y))
def maximum(x, y): return bind(max_p, *_coerce(x, y))
def minimum(x, y): return bind(min_p, *_coerce(x, y))
def sub(x, y): return add(x, neg(y) if dtype_of(y) else -y)   # micrograd: a - b = a + (-b)
def neg(x): return bind(neg_p, x)
def exp(x): return bind(exp_p, x)
def log(x): return bind(log_p, x)
def log1p(x): return bind(log1p_p, x)
def tanh(x): return bind(tanh_p, x)
def sin(x): return bind(sin_p, x)
def cos(x): return bind(cos_p, x)
def absolute(x): return bind(abs_p, x)
def sign(x): return bind(sign_p, x)
def sqrt(x): return bind(sqrt_p, x)
def stop_gradient(x): return bind(stop_gradient_p, x)
def lt(x, y): return bind(lt_p, *_coerce(x, y))
def le(x, y): return bind(le_p, *_coerce(x, y))
def eq(x, y): return bind(eq_p, *_coerce(x, y))
def ne(x, y): return bind(ne_p, *_coerce(x, y))
def select(c, a, b): return bind(select_p, c, *_coerce(a, b))


def convert(x, dtype):
    dtype = dtype_name(dtype)
    if dtype_of(x) is None:                       # a Python scalar: just a typed scalar
        return np_dtype(dtype).type(x)
    return x if dtype_of(x) == dtype else bind(convert_p, x, dtype=dtype)


def reduce_sum(x, axes): return bind(reduce_sum_p, x, axes=tuple(sorted(axes)))
def reduce_max(x, axes): return bind(reduce_max_p, x, axes=tuple(sorted(axes)))
def reduce_min(x, axes): return bind(reduce_min_p, x, axes=tuple(sorted(axes)))
def broadcast_to(x, shape): return bind(broadcast_to_p, x, shape=tuple(shape))
def reshape(x, shape): return bind(reshape_p, x, shape=tuple(shape))
def transpose(x, perm): return bind(transpose_p, x, perm=tuple(perm))


def slice_(x, start, limit, step=None):
    step = (1,) * len(start) if step is None else step
    return bind(slice_p, x, start=tuple(start), limit=tuple(limit), step=tuple(step))


def pad(x, low, high, interior=None):
    interior = (0,) * len(low) if interior is None else interior
    return bind(pad_p, x, low=tuple(low), high=tuple(high), interior=tuple(interior))


def concatenate(xs, axis): return bind(concatenate_p, *xs, axis=int(axis))


def iota(shape, dimension, dtype="i32"):
    return bind(iota_p, shape=tuple(shape), dimension=int(dimension), dtype=dtype_name(dtype))


def take(x, idx, axis): return bind(take_p, x, idx, axis=int(axis))


def scatter_add(g, idx, axis, shape):
    return bind(scatter_add_p, g, idx, axis=int(axis), shape=tuple(shape))


def matmul(a, b, transpose_a=False, transpose_b=False, preferred_element_type=None):
    """op(a) @ op(b); `preferred_element_type` "f32" gives 16-bit operands an f32 result
    (None, or the operands' own dtype: theirs)."""
    pet = None if preferred_element_type is None else dtype_name(preferred_element_type)
    if pet is not None and pet == dtype_of(a):
        pet = None
    params = dict(transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))
    if pet is not None:
        params["preferred_element_type"] = pet
    return bind(matmul_p, a, b, **params)


def softmax(x, axis): return bind(softmax_p, x, axis=int(axis))
def log_softmax(x, axis): return bind(log_softmax_p, x, axis=int(axis))
def softmax_bwd(y, g, axis): return bind(softmax_bwd_p, y, g, axis=int(axis))
def log_softmax_bwd(y, g, axis): return bind(log_softmax_bwd_p, y, g, axis=int(axis))


# =================================================================================== more elementwise
# numpy's rounding, hyperbolic and inverse trigonometric functions, and the float tests: one
# GLSL built-in (or helper) each, so a primitive each is a line, and a composition would cost
# precision (asinh = log(x + sqrt(x^2 + 1)) cancels for x << 0; sinh = (e^x - e^-x)/2 near 0).
# exp2, log2, log10, expm1 and the rest are compositions in vkgrad.numpy.

# Rounding: piecewise constant, zero gradient (like sign). numpy's round is half to even.
floor_p = _elementwise("floor", 1, np.floor)
vjp_rules[floor_p] = lambda g, ans, x: (None,)
ceil_p = _elementwise("ceil", 1, np.ceil)
vjp_rules[ceil_p] = lambda g, ans, x: (None,)
round_p = _elementwise("round", 1, np.rint)
vjp_rules[round_p] = lambda g, ans, x: (None,)

tan_p = _elementwise("tan", 1, np.tan)
vjp_rules[tan_p] = lambda g, ans, x: (mul(g, add(mul(ans, ans), 1)),)         # 1 + tan^2
sinh_p = _elementwise("sinh", 1, np.sinh)
vjp_rules[sinh_p] = lambda g, ans, x: (mul(g, cosh(x)),)
cosh_p = _elementwise("cosh", 1, np.cosh)
vjp_rules[cosh_p] = lambda g, ans, x: (mul(g, sinh(x)),)
asin_p = _elementwise("asin", 1, np.arcsin)
vjp_rules[asin_p] = lambda g, ans, x: (div(g, sqrt(sub(1, mul(x, x)))),)      # 1/sqrt(1-x^2)
acos_p = _elementwise("acos", 1, np.arccos)
vjp_rules[acos_p] = lambda g, ans, x: (neg(div(g, sqrt(sub(1, mul(x, x))))),)
atan_p = _elementwise("atan", 1, np.arctan)
vjp_rules[atan_p] = lambda g, ans, x: (div(g, add(mul(x, x), 1)),)            # 1/(1+x^2)
asinh_p = _elementwise("asinh", 1, np.arcsinh)
vjp_rules[asinh_p] = lambda g, ans, x: (div(g, sqrt(add(mul(x, x), 1))),)
acosh_p = _elementwise("acosh", 1, np.arccosh)
vjp_rules[acosh_p] = lambda g, ans, x: (div(g, sqrt(sub(mul(x, x), 1))),)
atanh_p = _elementwise("atanh", 1, np.arctanh)
vjp_rules[atanh_p] = lambda g, ans, x: (div(g, sub(1, mul(x, x))),)           # 1/(1-x^2)

# atan2(y, x): the angle of the point (x, y); at y == x == 0 numpy gives +-0 (x >= +0) or +-pi
# (x <= -0), the sign y's.
atan2_p = _elementwise("atan2", 2, np.arctan2)


def _atan2_vjp(g, ans, y, x):
    r2 = add(mul(x, x), mul(y, y))    # d/dy = x / r^2, d/dx = -y / r^2
    return _unbroadcast(div(mul(g, x), r2), y), _unbroadcast(neg(div(mul(g, y), r2)), x)


vjp_rules[atan2_p] = _atan2_vjp

# Float tests (bool results: no VJP, like the comparisons).
isnan_p = _elementwise("isnan", 1, np.isnan, out_dtype="bool")
isinf_p = _elementwise("isinf", 1, np.isinf, out_dtype="bool")


def floor(x): return bind(floor_p, x)
def ceil(x): return bind(ceil_p, x)
def round_even(x): return bind(round_p, x)
def tan(x): return bind(tan_p, x)
def sinh(x): return bind(sinh_p, x)
def cosh(x): return bind(cosh_p, x)
def asin(x): return bind(asin_p, x)
def acos(x): return bind(acos_p, x)
def atan(x): return bind(atan_p, x)
def asinh(x): return bind(asinh_p, x)
def acosh(x): return bind(acosh_p, x)
def atanh(x): return bind(atanh_p, x)
def atan2(y, x): return bind(atan2_p, *_coerce(y, x))
def isnan(x): return bind(isnan_p, x)
def isinf(x): return bind(isinf_p, x)
def bitwise_and(x, y): return bind(and_p, *_coerce(x, y))
def bitwise_or(x, y): return bind(or_p, *_coerce(x, y))
def bitwise_xor(x, y): return bind(xor_p, *_coerce(x, y))
def shift_left(x, y): return bind(shift_left_p, *_coerce(x, y))
def shift_right(x, y): return bind(shift_right_p, *_coerce(x, y))

# =================================================================================== sorting
# argsort[descending](x): the stable sorting permutation of x's LAST axis, as i32 indices
# (vkgrad.numpy moves other axes there). The one sorting primitive: sort, top_k, median and
# percentile gather with it, so their gradients are take's (scatter_add). On Vulkan a bitonic
# sort in shared memory, one workgroup per row (kernels_glsl/argsort.comp, lowering/sort.py),
# for rows up to 4096 elements; longer rows are a counted fallback (docs/numpy.md).
argsort_p = Primitive("argsort", ("pure",))
param_defaults[argsort_p] = {"descending": False}


def _argsort_rule(x, *, descending):
    if x.ndim == 0:
        raise ShapeError(f"argsort of {x}: needs at least one axis")
    _check_dtypes("argsort", [x], NUMERIC_DTYPES)
    return TensorType(x.shape, "i32")


def _argsort_impl(x, *, descending):
    # stable both ways: ties keep their order; NaN sorts last both ways (numpy's argsort of -x)
    key = -x.astype(np.float64) if descending else x
    return np.argsort(key, axis=-1, kind="stable")


abstract_eval_rules[argsort_p] = _argsort_rule
impls[argsort_p] = _argsort_impl
# along the last axis: the mapped axis goes first
batching_rules[argsort_p] = lambda args, dims, *, descending: (
    bind(argsort_p, batch_to_front(args[0], dims[0], mapped_size(args, dims)),
         descending=descending), 0)


def argsort(x, descending=False): return bind(argsort_p, x, descending=bool(descending))


def take_last(x, idx):
    """x[..., idx[..., j]] per row: a gather of x's last axis by indices of the same leading
    shape (numpy's take_along_axis on the last axis), as ONE take of the flattened x with
    row offsets added, so its gradient is one scatter_add."""
    shape, ishape = _shape(x), _shape(idx)
    rows, n, m = math.prod(shape[:-1]), shape[-1], ishape[-1]
    flat_idx = add(reshape(idx, (rows, m)), mul(iota((rows, m), 0, "i32"), n))
    return reshape(take(reshape(x, (rows * n,)), flat_idx, 0), ishape)


def argsort_descending(x, k=None):
    """The first k (all by default) of the stable largest-first sorting permutation of x's
    last axis with NaN first, as JAX sorts it (jnp.argsort(descending=True), lax.top_k):
    argsort(descending) puts the NaNs last, so each row is read rotated right by its count
    of NaNs c (position j reads (j - c) mod n)."""
    idx = argsort(x, descending=True)
    shape = _shape(idx)
    lead, n = tuple(shape[:-1]), shape[-1]
    k = n if k is None else k
    if dtype_of(x) not in FLOAT_DTYPES:       # no NaNs: the first k as they are
        return slice_(idx, (0,) * len(shape), lead + (k,))
    # the count in f32 and converted: exact below 2**24 elements, as the reduce kernel sums
    nans = reduce_sum(convert(isnan(x), "f32"), (len(shape) - 1,))
    pos = sub(iota(lead + (k,), len(shape) - 1), reshape(convert(nans, "i32"), lead + (1,)))
    return take_last(idx, select(lt(pos, 0), add(pos, n), pos))


def top_k(x, k):
    """(values, indices) of the k largest entries of x's last axis, largest first (ties: the
    lower index first; NaN larger than everything), like jax.lax.top_k."""
    k = int(k)
    n = _shape(x)[-1]
    if not 0 <= k <= n:
        raise ShapeError(f"top_k: k={k} is out of range for a last axis of size {n}")
    idx = argsort_descending(x, k)
    return take_last(x, idx), idx
