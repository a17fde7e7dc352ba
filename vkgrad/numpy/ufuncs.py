"""Elementwise functions (numpy's ufuncs): a primitive where GLSL has the function
(vkgrad/primitives/lax.py), compositions that fuse on Vulkan for the rest. The one-primitive
functions are rows of the tables below."""

from __future__ import annotations

import math

import numpy as _np

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, DTypeError
from vkgrad.ir.core import is_float, np_dtype
from vkgrad.numpy.dtypes import (as_float, asarray, astype, dtype_of, is_weak, no_out, operands,
                                 promote, promoted_dtype)
from vkgrad.numpy.dtypes import finfo as _finfo      # ml_dtypes': bfloat16 too
from vkgrad.numpy.util import define_wrappers, type_string
from vkgrad.tracer.core import Tracer, concretization_error, user_source


def _binary(fn, x, y, floating=False, arith=True):
    x, y = operands(x, y)
    dt = promoted_dtype(x, y)
    if floating and not is_float(dt):
        dt = "f32"
    elif arith and dt == "bool":
        if fn in _ON_BOOLS:   # numpy and JAX: bool + bool is a bool (or), bool * bool (and)
            return _ON_BOOLS[fn](x, y)
        _refuse_bools(fn)
        dt = "i32"
    return fn(promote(x, dt), promote(y, dt))


def _refuse_bools(fn):
    if fn in (P.sub, P.neg):
        raise DTypeError("- on bool arrays is refused (numpy and JAX refuse it too): use ~x or "
                         "vnp.logical_xor(x, y) for bools, or convert first (x.astype(int))",
                         source=user_source())


def _unary(fn, x, floating=True):
    x = asarray(x)
    dt = dtype_of(x)
    if floating and not is_float(dt):
        dt = "f32"
    elif dt == "bool":
        _refuse_bools(fn)
        dt = "i32"
    return fn(promote(x, dt))


def _binary_ufunc(primitive, floating):
    def ufunc(x, y):
        return _binary(primitive, x, y, floating=floating)
    return ufunc


def _comparison(primitive, swapped):
    def ufunc(x, y):
        return _binary(primitive, y, x, arith=False) if swapped else \
            _binary(primitive, x, y, arith=False)
    return ufunc


def _unary_ufunc(primitive, floating):
    def ufunc(x):
        return _unary(primitive, x, floating=floating)
    return ufunc


def _square(v):
    return P.mul(v, v)


_BINARY = {   # name: (primitive, computes in float, docstring); bools compute in int32
    "add": (P.add, False, "x + y, elementwise."),
    "subtract": (P.sub, False, "x - y, elementwise."),
    "multiply": (P.mul, False, "x * y, elementwise."),
    "divide": (P.div, True, "x / y, elementwise, in float (integers divide as float32)."),
    "maximum": (P.maximum, False, "The larger of x and y, elementwise."),
    "minimum": (P.minimum, False, "The smaller of x and y, elementwise."),
}
_COMPARISONS = {   # name: (primitive, operands swapped, docstring); the result is bool
    "less": (P.lt, False, "x < y, elementwise."),
    "less_equal": (P.le, False, "x <= y, elementwise."),
    "greater": (P.lt, True, "x > y, elementwise (computed as y < x)."),
    "greater_equal": (P.le, True, "x >= y, elementwise (computed as y <= x)."),
    "equal": (P.eq, False, "x == y, elementwise."),
    "not_equal": (P.ne, False, "x != y, elementwise."),
}
_UNARY = {   # name: (primitive, computes in float, docstring); bools compute in int32
    "negative": (P.neg, False, "-x, elementwise."),
    "square": (_square, False, "x * x, elementwise."),
    "abs": (P.absolute, False, "|x|, elementwise."),
    "sign": (P.sign, False, "-1, 0 or 1: the sign of x, elementwise."),
    "sqrt": (P.sqrt, True, "The square root, elementwise."),
    "exp": (P.exp, True, "e ** x, elementwise."),
    "log": (P.log, True, "The natural logarithm, elementwise."),
    "log1p": (P.log1p, True, "log(1 + x), accurate for a small x."),
    "sin": (P.sin, True, "The sine, elementwise."),
    "cos": (P.cos, True, "The cosine, elementwise."),
    "tan": (P.tan, True, "The tangent, elementwise."),
    "arcsin": (P.asin, True, "The inverse sine, elementwise."),
    "arccos": (P.acos, True, "The inverse cosine, elementwise."),
    "arctan": (P.atan, True, "The inverse tangent, elementwise."),
    "sinh": (P.sinh, True, "The hyperbolic sine, elementwise."),
    "cosh": (P.cosh, True, "The hyperbolic cosine, elementwise."),
    "tanh": (P.tanh, True, "The hyperbolic tangent, elementwise."),
    "arcsinh": (P.asinh, True, "The inverse hyperbolic sine, elementwise."),
    "arccosh": (P.acosh, True, "The inverse hyperbolic cosine, elementwise."),
    "arctanh": (P.atanh, True, "The inverse hyperbolic tangent, elementwise."),
    "fabs": (P.absolute, True, "|x| in float, elementwise (numpy's fabs)."),
}


def _integral_unary_ufunc(primitive, floating):
    """floor, ceil, rint: an integer or bool input is already integral and is returned as it is
    (numpy 2 and JAX keep its dtype)."""
    def ufunc(x):
        x = asarray(x)
        return x if dtype_of(x) in ("i32", "bool") else _unary(primitive, x, floating=floating)
    return ufunc


_INTEGRAL = {   # as _UNARY, for functions whose integer input is already their result
    "floor": (P.floor, True, "The largest integer <= x, elementwise."),
    "ceil": (P.ceil, True, "The smallest integer >= x, elementwise."),
    "rint": (P.round_even, True, "x rounded to the nearest integer (halves to even)."),
}

__all__ = (define_wrappers(globals(), _INTEGRAL, _integral_unary_ufunc)
           + define_wrappers(globals(), _BINARY, _binary_ufunc)
           + define_wrappers(globals(), _COMPARISONS, _comparison)
           + define_wrappers(globals(), _UNARY, _unary_ufunc)
           + ["power", "invert", "bitwise_not", "true_divide", "absolute", "arctan2", "positive",
              "reciprocal", "clip", "logical_and", "logical_or", "logical_not", "logical_xor",
              "where", "nonzero", "stop_gradient", "trunc", "fix", "round", "around", "exp2",
              "degrees", "radians", "expm1", "logaddexp", "logaddexp2", "hypot", "sinc",
              "floor_divide", "remainder", "mod", "fmod", "divmod", "isnan", "isinf", "isfinite",
              "isposinf", "isneginf", "nan_to_num", "isclose", "select", "fmax", "fmin", "real",
              "imag", "conj", "conjugate", "angle", "isreal", "iscomplex", "isrealobj",
              "iscomplexobj", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
              "right_shift", "bitwise_left_shift", "bitwise_right_shift", "bitwise_invert"])

true_divide, absolute = divide, abs   # the tables above define divide and abs


def power(x, y):
    """x ** y, elementwise: in float, except integer ** integer, which stays an integer (numpy,
    JAX): by repeated squaring for a Python int exponent (wrapping in int32 as numpy does), in
    float then converted for an array exponent (exact while the result is below 2**24)."""
    x, y = operands(x, y)
    dt = promoted_dtype(x, y)
    if is_float(dt):
        return _binary(P.power, x, y, floating=True)
    dt = "i32"
    if not is_weak(y):
        return astype(P.power(as_float(promote(x, dt)), as_float(promote(y, dt))), dt)
    if y < 0:
        raise ArgumentError(f"power: integers cannot be raised to a negative integer power "
                            f"({y}); use a float base (x.astype(float)) or divide",
                            source=user_source())
    x, result = asarray(promote(x, dt)), None
    while y:
        if y & 1:
            result = x if result is None else P.mul(result, x)
        y >>= 1
        if y:
            x = P.mul(x, x)
    return P.broadcast_to(_np.int32(1), tuple(x.shape)) if result is None else result


def invert(x):
    """~x: logical not of a bool, bitwise not of an integer (-x - 1 in two's complement); floats
    are refused, as numpy and JAX refuse them."""
    x = asarray(x)
    dt = dtype_of(x)
    if dt == "bool":
        return logical_not(x)
    if dt == "i32":
        return P.sub(P.neg(x), _np.int32(1))
    raise DTypeError(f"~ (invert) takes bool or integer arrays, got {type_string(x)}: use "
                     "vnp.logical_not(x != 0), or 1 - x for a float mask", source=user_source())


bitwise_not = invert


def arctan2(y, x):
    """The angle of the point (x, y), in the right quadrant, elementwise."""
    return _binary(P.atan2, y, x, floating=True)


def positive(x): return asarray(x)
def reciprocal(x): return divide(1.0, x)


def clip(a, a_min=None, a_max=None):
    if a_min is not None:
        a = maximum(a, a_min)
    if a_max is not None:
        a = minimum(a, a_max)
    return asarray(a)


def as_bool(x):
    """x as a bool array (x != 0 unless it is one)."""
    x = asarray(x)
    return x if dtype_of(x) == "bool" else not_equal(x, 0)


def logical_and(a, b): return P.select(as_bool(a), as_bool(b), False)   # a ? b : False


def logical_or(a, b): return P.select(as_bool(a), True, as_bool(b))     # a ? True : b


def logical_not(a): return P.eq(as_bool(a), False)


def logical_xor(a, b): return P.ne(as_bool(a), as_bool(b))


def _integer_operands(name, x, y, on_bools):
    """x and y of an integer-only function (the bitwise ones), as int32, or as they are where
    both are bool and the function has a bool meaning (`on_bools`); floats are refused, as
    numpy and JAX refuse them."""
    x, y = operands(x, y)
    dt = promoted_dtype(x, y)
    if dt == "bool" and on_bools:
        return x, y, dt
    if dt not in ("i32", "bool"):
        v = next(v for v in (x, y) if dtype_of(asarray(v)) not in ("i32", "bool"))
        raise DTypeError(f"{name} takes integer or bool arrays, got {type_string(asarray(v))} "
                         "(numpy and JAX refuse floats too): convert first, e.g. "
                         "x.astype(int)", source=user_source())
    return promote(x, "i32"), promote(y, "i32"), "i32"


def _bitwise(name, primitive, logical):
    def ufunc(x, y):
        x, y, dt = _integer_operands(name, x, y, on_bools=logical is not None)
        return logical(x, y) if dt == "bool" else primitive(x, y)
    ufunc.__name__ = name
    return ufunc


# numpy's bitwise functions: on the two's-complement bits of integers, logical on bools (and,
# or and xor; numpy's and JAX's meaning of & | ^ for bool arrays); shifts of a bool are int32's
bitwise_and = _bitwise("bitwise_and", P.bitwise_and, logical_and)
bitwise_or = _bitwise("bitwise_or", P.bitwise_or, logical_or)
bitwise_xor = _bitwise("bitwise_xor", P.bitwise_xor, logical_xor)
left_shift = _bitwise("left_shift", P.shift_left, None)
right_shift = _bitwise("right_shift", P.shift_right, None)
bitwise_left_shift, bitwise_right_shift, bitwise_invert = left_shift, right_shift, invert

_ON_BOOLS = {P.add: logical_or, P.mul: logical_and, P.maximum: logical_or,
             P.minimum: logical_and}


def where(condition, x=None, y=None):
    """numpy's where(cond, x, y); where(cond) alone is nonzero(cond) (concrete values only)."""
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise ArgumentError("where takes a condition alone, or a condition, x and y",
                            source=user_source())
    x, y = operands(x, y)
    dt = promoted_dtype(x, y)
    return P.select(as_bool(condition), promote(x, dt), promote(y, dt))


def nonzero(a):
    """Indices of the non-zero entries: concrete values only (the number of results is data)."""
    a = asarray(a)
    if isinstance(a, Tracer):
        raise concretization_error(
            a, "vnp.nonzero / one-argument vnp.where (their result's shape depends on the "
            "data)", "use vnp.where(cond, x, y) to select values, or vnp.sum(cond) to count")
    return tuple(i.astype(_np.int32) for i in _np.nonzero(_np.asarray(a)))


def stop_gradient(x):
    """x, with no gradient flowing back through it."""
    return P.stop_gradient(asarray(x))


def trunc(x): return where(less(x, 0), ceil(x), floor(x))


def round(a, decimals=0, out=None):
    """numpy's round: half to even; decimals < 0 round to tens, hundreds, ..."""
    no_out(out)
    a = asarray(a)
    if dtype_of(a) in ("i32", "bool") and decimals >= 0:
        return a
    if decimals == 0:
        return rint(a)
    s = 10.0 ** decimals
    return divide(rint(multiply(a, s)), s)


around = round
fix = trunc


def exp2(x): return exp(multiply(as_float(x), math.log(2.0)))


def _scaled(function, factor):
    def scaled(x):
        return multiply(function(x), factor)
    return scaled


_SCALED = {   # name: (function, factor, docstring): function(x) * factor
    "log2": (log, 1.0 / math.log(2.0), "The base-2 logarithm: log(x) / log(2)."),
    "log10": (log, 1.0 / math.log(10.0), "The base-10 logarithm: log(x) / log(10)."),
    "deg2rad": (as_float, math.pi / 180.0, "Degrees to radians: x * pi / 180."),
    "rad2deg": (as_float, 180.0 / math.pi, "Radians to degrees: x * 180 / pi."),
}
__all__ += define_wrappers(globals(), _SCALED, _scaled)


degrees, radians = rad2deg, deg2rad


def expm1(x):
    """exp(x) - 1 without losing a small x's digits: a 5-term series below |x| < 1e-2 (exact to
    ~x^5/720), exp(x) - 1 above (log1p's treatment, vkgrad/primitives/lax.py)."""
    x = as_float(x)
    series = multiply(x, add(1.0, multiply(x, add(0.5, multiply(x, add(
        1.0 / 6.0, multiply(x, add(1.0 / 24.0, multiply(x, 1.0 / 120.0)))))))))
    return where(less(abs(x), 1e-2), series, subtract(exp(x), 1.0))


def logaddexp(x, y):
    """log(exp(x) + exp(y)) without overflow: m + log(exp(x-m) + exp(y-m)), m = max(x, y) held
    constant for differentiation (the result does not depend on it), so at x == y each side
    gets half the gradient."""
    x, y = operands(x, y)
    dt = promoted_dtype(x, y)
    dt = dt if is_float(dt) else "f32"
    x, y = asarray(promote(x, dt)), asarray(promote(y, dt))
    m = maximum(x, y)
    m = stop_gradient(where(isfinite(m), m, 0.0))   # both -inf: log(0) = -inf; an inf: inf
    return add(log(add(exp(subtract(x, m)), exp(subtract(y, m)))), m)


def logaddexp2(x, y):
    return multiply(logaddexp(multiply(x, math.log(2.0)), multiply(y, math.log(2.0))),
                    1.0 / math.log(2.0))


def hypot(x, y):
    """sqrt(x*x + y*y) without overflow or underflow: m * sqrt(1 + (n/m)**2), m = max(|x|, |y|),
    n the other (JAX's form); 0 where both are 0, inf where either is (a NaN beside it too). m and n are picked by
    one select, not by maximum/minimum: their tie rule splits the cotangent, which keeps the
    first derivative at |x| == |y| but zeroes the second (JAX's hessian of hypot at (2, 2)
    is 0; sqrt(x*x + y*y)'s is [[4, -4], [-4, 4]] / 8**1.5). At (0, 0) the gradient is JAX's
    (1/2, 1/2)."""
    x, y = operands(x, y)
    dt = promoted_dtype(x, y)
    dt = dt if is_float(dt) else "f32"
    x, y = abs(asarray(promote(x, dt))), abs(asarray(promote(y, dt)))
    first = greater_equal(x, y)
    m, n = where(first, x, y), where(first, y, x)
    r = divide(n, where(equal(m, 0), 1.0, m))
    h = where(equal(m, 0), multiply(0.5, add(x, y)), multiply(m, sqrt(add(1.0, square(r)))))
    return where(logical_or(isinf(x), isinf(y)), _np.inf, h)   # inf even beside a NaN, as JAX


def sinc(x):
    """sin(pi x) / (pi x), 1 at 0 (the 0/0 branch never sees a 0: no nan gradient)."""
    x = as_float(x)
    zero = equal(x, 0)
    px = multiply(where(zero, 1.0, x), math.pi)
    return where(zero, 1.0, divide(sin(px), px))


def _division(float_fn, int_fn, x, y):
    """float_fn on float operands; int_fn on integer ones (bools as int32), with the floor
    quotient and remainder of _int_divmod."""
    x, y = operands(x, y)
    dt = promoted_dtype(x, y)
    if is_float(dt):
        return float_fn(asarray(promote(x, dt)), asarray(promote(y, dt)))
    x, y = asarray(promote(x, "i32")), asarray(promote(y, "i32"))
    return int_fn(x, y, *_int_divmod(x, y))


def _int_divmod(x, y):
    """(x // y, x % y) of int32 arrays, exact over the whole int32 range: a float quotient (off
    by up to |x / y| / 2**24), corrected once by the float quotient of the (exact, int32)
    remainder, then by one step either way. Division by 0 gives garbage (_by_zero replaces
    it)."""
    yf = as_float(y)
    q = astype(floor(divide(as_float(x), yf)), "i32")
    q = add(q, astype(floor(divide(as_float(subtract(x, multiply(q, y))), yf)), "i32"))
    r = subtract(x, multiply(q, y))
    low = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(y, 0)))  # sign not y's
    high = logical_or(logical_and(less(0, y), less_equal(y, r)),
                      logical_and(less(y, 0), less_equal(r, y)))              # |r| >= |y|
    q = where(low, subtract(q, 1), where(high, add(q, 1), q))
    return q, where(low, add(r, y), where(high, subtract(r, y), r))


def _by_zero(r, y, value):
    """r, with `value` where the integer y is 0."""
    return where(equal(y, 0), value, r)


def floor_divide(x, y):
    """x // y; an integer divided by 0 gives JAX's value (-1 for 0 // 0, -2 otherwise: XLA's
    quotient -1, floored)."""
    return _division(lambda a, b: floor(divide(a, b)),
                     lambda a, b, q, r: _by_zero(q, b, where(equal(a, 0), -1, -2)), x, y)


def _float_mod(a, b):
    """x - floor(x / y) * y; x % inf is x for a finite x of y's sign (0 too), else y (numpy)."""
    r = subtract(a, multiply(floor(divide(a, b)), b))
    same = logical_or(equal(a, 0), equal(less(a, 0), less(b, 0)))
    return where(logical_and(isinf(b), isfinite(a)), where(same, a, b), r)


def remainder(x, y):
    """numpy's mod, with the sign of y; x % 0 is 0 for integers (numpy, JAX)."""
    return _division(_float_mod, lambda a, b, q, r: _by_zero(r, b, 0), x, y)


def fmod(x, y):
    """C's fmod: x - trunc(x / y) * y, with the sign of x; 0 for an integer x by 0 (numpy)."""
    def int_fmod(a, b, q, r):   # the floor remainder moved to x's sign
        return _by_zero(where(logical_and(not_equal(r, 0), not_equal(less(a, 0), less(b, 0))),
                              subtract(r, b), r), b, 0)
    return _division(lambda a, b: subtract(a, multiply(trunc(divide(a, b)), b)), int_fmod, x, y)


mod = remainder


def divmod(x, y): return floor_divide(x, y), remainder(x, y)


def _false_like(x):
    return P.broadcast_to(_np.bool_(False), tuple(x.shape))   # full_like(x, False, "bool")


def isnan(x):
    x = asarray(x)
    return P.isnan(x) if is_float(dtype_of(x)) else _false_like(x)


def isinf(x):
    x = asarray(x)
    return P.isinf(x) if is_float(dtype_of(x)) else _false_like(x)


def isfinite(x): return logical_not(logical_or(isnan(x), isinf(x)))


def isposinf(x): return logical_and(isinf(x), greater(x, 0))


def isneginf(x): return logical_and(isinf(x), less(x, 0))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """nan -> `nan`, +inf -> `posinf` (the dtype's largest finite value), -inf -> `neginf`."""
    x = asarray(x)
    dt = dtype_of(x)
    if not is_float(dt):
        return x
    big = float(_finfo(np_dtype(dt)).max)
    r = where(isnan(x), nan, x)
    r = where(isposinf(x), big if posinf is None else posinf, r)
    return where(isneginf(x), -big if neginf is None else neginf, r)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| (numpy's asymmetric test); equal infinities are close."""
    a, b = operands(a, b)
    dt = promoted_dtype(a, b)
    dt = dt if is_float(dt) else "f32"
    a, b = asarray(promote(a, dt)), asarray(promote(b, dt))
    finite = logical_and(isfinite(a), isfinite(b))
    near = less_equal(abs(subtract(a, b)), add(atol, multiply(rtol, abs(b))))
    r = logical_or(logical_and(finite, near), equal(a, b))
    return logical_or(r, logical_and(isnan(a), isnan(b))) if equal_nan else r


def fmax(x, y):
    """The larger of x and y, elementwise, ignoring a NaN (NaN only where both are). JAX's
    form, so its gradient: a tie goes to y."""
    x, y = operands(x, y)
    return where(logical_or(greater(x, y), isnan(y)), x, y)


def fmin(x, y):
    """The smaller of x and y, elementwise, ignoring a NaN (NaN only where both are). JAX's
    form, so its gradient: a tie goes to y."""
    x, y = operands(x, y)
    return where(logical_or(less(x, y), isnan(y)), x, y)


# vkgrad has no complex dtype (docs/numpy.md, "What it refuses"): every array is real, so these
# are numpy's (and JAX's) values for real arrays, and a complex input is refused by asarray.
def _zeros_float(x):
    x = as_float(x)
    return P.broadcast_to(_np.zeros((), np_dtype(dtype_of(x))), tuple(x.shape))


def real(val): return asarray(val)
def imag(val): return _zeros_float(val)
def conj(x): return asarray(x)


conjugate = conj


def angle(z, deg=False):
    """The angle of a real number: pi for negatives, 0 otherwise (180 and 0 with deg)."""
    return where(less(z, 0), 180.0 if deg else math.pi, _zeros_float(z))


def isreal(x): return logical_not(_false_like(asarray(x)))
def iscomplex(x): return _false_like(asarray(x))
def iscomplexobj(x): return bool(_np.iscomplexobj(x))
def isrealobj(x): return not _np.iscomplexobj(x)


def select(condlist, choicelist, default=0):
    """numpy's select: for each element, the choice of the first condition that holds (default
    where none does)."""
    if len(condlist) != len(choicelist):
        raise ArgumentError(f"select: condlist has {len(condlist)} conditions but choicelist "
                            f"{len(choicelist)} choices; they pair up", source=user_source())
    r = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        r = where(as_bool(cond), choice, r)
    return asarray(r)


pow = power   # the array API's name (jnp.pow)


def cbrt(x):
    """The real cube root, elementwise: sign(x) * |x| ** (1/3) (-8 gives -2; NaN, +-inf and +-0
    keep themselves, as jnp.cbrt)."""
    x = as_float(x)
    a = abs(x)
    y = power(a, 1.0 / 3.0)
    # one Newton step on y^3 = |x|: pow's exp(log(x) / 3) is 1 ulp off for cubes (27 gives
    # 3.0000002); 0 and inf keep pow's value
    step = divide(subtract(multiply(multiply(y, y), y), a), multiply(3.0, multiply(y, y)))
    y = where(logical_and(isfinite(y), greater(y, 0)), subtract(y, step), y)
    return copysign(y, x)


def signbit(x):
    """True where x's sign bit is set: negative numbers, -0.0 and a NaN with the sign set
    (jnp.signbit); ints are < 0, bools False."""
    x = asarray(x)
    if not is_float(dtype_of(x)):
        return less(x, 0)
    # -0.0 < 0 is false: 1 / -0.0 = -inf tells it; a NaN's sign bit is not visible to IEEE
    # comparisons, so NaN counts as positive (numpy gives True for -nan only)
    return logical_or(less(x, 0), logical_and(equal(x, 0), less(divide(1.0, x), 0)))


def copysign(x, y):
    """|x| with the sign of y, elementwise (jnp.copysign; y's -0.0 counts as negative)."""
    x, y = operands(x, y)
    dt = promoted_dtype(x, y)
    dt = dt if is_float(dt) else "f32"
    x, y = asarray(promote(x, dt)), asarray(promote(y, dt))
    return where(signbit(y), negative(abs(x)), abs(x))


def heaviside(x1, x2):
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0; NaN for a NaN x1 (jnp.heaviside)."""
    x1, x2 = operands(x1, x2)
    dt = promoted_dtype(x1, x2)
    dt = dt if is_float(dt) else "f32"
    x1, x2 = asarray(promote(x1, dt)), asarray(promote(x2, dt))
    return where(less(x1, 0), 0.0, where(equal(x1, 0), x2, where(isnan(x1), x1, 1.0)))


def float_power(x, y):
    """x ** y in the widest float (jnp.float_power: float32 with x64 off)."""
    return power(as_float(x), as_float(y))


__all__ += ["pow", "cbrt", "signbit", "copysign", "heaviside", "float_power"]

# numpy 2's (and the array API's) names of the inverse trigonometric functions
acos, acosh, asin, asinh, atan, atanh, atan2 = (arccos, arccosh, arcsin, arcsinh, arctan,
                                                arctanh, arctan2)
__all__ += ["acos", "acosh", "asin", "asinh", "atan", "atanh", "atan2"]


def _integers(name, x):
    """x as int32 (a bool as 0 and 1); floats are refused, as numpy and JAX refuse them."""
    x = asarray(x)
    if dtype_of(x) not in ("i32", "bool"):
        raise DTypeError(f"{name} takes integer or bool arrays, got {type_string(x)} (numpy and "
                         "JAX refuse floats too)", source=user_source())
    return promote(x, "i32")


def population_count(x):
    """The number of set bits of each int32 (of its two's complement), by shifts and masks
    (vg.lax.population_count checks its operand and calls this)."""
    x = subtract(x, bitwise_and(right_shift(x, 1), 0x55555555))
    x = add(bitwise_and(x, 0x33333333), bitwise_and(right_shift(x, 2), 0x33333333))
    x = bitwise_and(add(x, right_shift(x, 4)), 0x0F0F0F0F)
    x = add(x, right_shift(x, 8))
    return bitwise_and(add(x, right_shift(x, 16)), 0x3F)


def bitwise_count(x):
    """The number of 1 bits in |x| (numpy's and JAX's; their uint8 result is int32 here)."""
    return population_count(abs(_integers("bitwise_count", x)))


def gcd(x1, x2):
    """The greatest common divisor of |x1| and |x2| (gcd(0, 0) is 0), elementwise, integers
    only: JAX's Euclid steps, a fixed 46 of them (enough for any pair of int32s: the
    Fibonacci bound), so it traces without a loop."""
    a, b = _integers("gcd", x1), _integers("gcd", x2)
    a, b = abs(a), abs(b)
    for _ in range(46):
        nz = not_equal(b, 0)
        a, b = where(nz, b, a), where(nz, remainder(a, where(nz, b, 1)), 0)
    return a


def lcm(x1, x2):
    """The least common multiple of |x1| and |x2| (0 if either is 0), integers only."""
    a, b = abs(_integers("lcm", x1)), abs(_integers("lcm", x2))
    d = gcd(a, b)
    return where(equal(d, 0), 0, multiply(a, floor_divide(b, where(equal(d, 0), 1, d))))


def modf(x, out=None):
    """(fractional part, integral part) of x, both with x's sign (JAX's: x - trunc(x) and
    trunc(x), so inf gives (nan, inf) where numpy gives (0, inf))."""
    no_out(out)
    x = as_float(x)
    whole = where(greater_equal(x, 0), floor(x), ceil(x))
    return subtract(x, whole), whole


def _pow2(e, dtype):
    """2.0 ** e exactly for an integer-valued float array e (exp2 is exp(e log 2), a few ulp
    off): a product of the powers 2^(+-2^j) that e's bits pick, over the dtype's range."""
    fi = _finfo(dtype)
    n = astype(e, _np.int32)
    out = P.broadcast_to(_np.asarray(1.0, dtype), tuple(_np.shape(e)))
    ranges = ((1, maximum(n, 0), (fi.maxexp - 1).bit_length()),
              (-1, maximum(negative(n), 0), (fi.nmant - fi.minexp).bit_length()))
    for sign, m, bits in ranges:
        for j in range(bits):
            bit = equal(bitwise_and(right_shift(m, j), 1), 1)
            out = multiply(out, where(bit, _np.asarray(2.0 ** (sign * 2 ** j), dtype),
                                      _np.asarray(1.0, dtype)))
    return astype(out, dtype)


def _exponent(a, dtype):
    """floor(log2(a)) exactly for positive finite normal a (log2, corrected by one either
    way by exact powers of two)."""
    fi = _finfo(dtype)
    e = minimum(floor(log2(a)), fi.maxexp - 1)      # log2(max) rounds to maxexp
    e = where(greater(_pow2(e, dtype), a), subtract(e, 1), e)
    up = logical_and(less(e, fi.maxexp - 1), less_equal(_pow2(add(e, 1), dtype), a))
    return where(up, add(e, 1), e)


def _float_pair(x1, x2):
    x1, x2 = operands(x1, x2)
    dt = promoted_dtype(x1, x2)
    dt = dt if is_float(dt) else "f32"
    return asarray(promote(x1, dt)), asarray(promote(x2, dt))


def nextafter(x1, x2):
    """The next representable float after x1 in the direction of x2 (numpy's values,
    subnormals and infinities included). No bitcast: x1's binary exponent e gives its ulp
    2^(e - nmant), half that below a power of two toward zero; subnormals step by the
    smallest one."""
    x, y = _float_pair(x1, x2)
    dt = np_dtype(dtype_of(x))
    fi = _finfo(dt)
    a = minimum(maximum(abs(x), fi.tiny), fi.max)   # subnormals: tiny's step
    e = _exponent(a, dt)
    ulp = _pow2(subtract(e, fi.nmant), dt)
    toward_zero = equal(less(y, x), greater(x, 0))
    half = logical_and(logical_and(toward_zero, equal(abs(x), _pow2(e, dt))),
                       greater(e, fi.minexp))
    step = where(half, divide(ulp, 2), ulp)
    out = add(x, where(greater(y, x), step, negative(step)))
    out = where(isinf(x), multiply(sign(x), fi.max), out)
    out = where(equal(x, 0), multiply(where(greater(y, 0), 1, -1), fi.smallest_subnormal), out)
    out = where(equal(x, y), y, out)
    return astype(where(logical_or(isnan(x), isnan(y)), _np.nan, out), dt)


def spacing(x):
    """The distance from x to the next float away from zero (JAX's: nextafter(x, +-inf) - x,
    the smallest subnormal, signed, where that is 0)."""
    x = as_float(x)
    fi = _finfo(np_dtype(dtype_of(x)))
    r = subtract(nextafter(x, copysign(_np.inf, x)), x)
    return where(equal(r, 0), copysign(fi.smallest_subnormal, x), r)


def frexp(x):
    """(mantissa, exponent) with x = mantissa * 2 ** exponent, |mantissa| in [0.5, 1) (0, inf
    and NaN: themselves and 0), exponent int32. Subnormals are scaled by 2^nmant first, as
    JAX does; no bitcast: the exponent is found as nextafter's."""
    x = as_float(x)
    dt = np_dtype(dtype_of(x))
    fi = _finfo(dt)
    small = less(abs(x), fi.tiny)
    xs = where(small, multiply(x, float(2 ** fi.nmant)), x)
    e = _exponent(minimum(maximum(abs(xs), fi.tiny), fi.max), dt)
    m = multiply(divide(xs, _pow2(e, dt)), 0.5)          # exact: a power of two
    ex = add(add(astype(e, "i32"), 1), where(small, -fi.nmant, 0))
    special = logical_or(logical_or(isinf(x), isnan(x)), equal(x, 0))
    return where(special, x, m), where(special, 0, ex)


def ldexp(x1, x2):
    """x1 * 2 ** x2 for an integer x2 (JAX's: frexp splits x1 first, so a small x1 with a large
    x2 does not overflow on the way; the power is exact)."""
    x1 = as_float(x1)
    x2 = asarray(x2)
    if dtype_of(x2) not in ("i32", "bool"):
        raise DTypeError(f"ldexp: the exponent must be an integer array, got {type_string(x2)} "
                         "(numpy and JAX refuse floats too)", source=user_source())
    dt = np_dtype(dtype_of(x1))
    fi = _finfo(dt)
    m, e = frexp(x1)
    e = add(e, astype(x2, "i32"))
    m, e = where(greater(e, 0), multiply(m, 2), m), where(greater(e, 0), subtract(e, 1), e)
    big = greater(e, fi.maxexp - 1)
    low = fi.minexp - fi.nmant - 2                 # below it every result rounds to 0
    p = _pow2(astype(clip(e, low, fi.maxexp - 1), dt), dt)
    x = where(big, multiply(sign(m), _np.inf), multiply(m, p))
    return where(logical_or(isinf(x1), equal(x1, 0)), x1, x)


def packbits(a, axis=None, bitorder="big"):
    """The bits of `a` (nonzero: 1) packed 8 to a number along `axis` (flattened if None),
    the last group padded with zeros; bitorder 'big' puts the first bit highest. numpy's
    uint8 results are int32 here (vkgrad's integers)."""
    bits, a = _bit_weights("packbits", a, bitorder), asarray(a)
    if dtype_of(a) not in ("i32", "bool"):
        raise DTypeError(f"packbits takes integer or bool arrays, got {type_string(a)}",
                         source=user_source())
    a = astype(not_equal(a, 0), "i32")
    a, axis = (P.reshape(a, (math.prod(a.shape),)), 0) if axis is None else (a, axis)
    a = P.transpose(a, _swap_last(a.ndim, axis))
    n = a.shape[-1]
    if n % 8:
        pad = P.broadcast_to(_np.int32(0), tuple(a.shape[:-1]) + (8 - n % 8,))
        a = P.concatenate([a, pad], a.ndim - 1)
    a = P.reshape(a, tuple(a.shape[:-1]) + (a.shape[-1] // 8, 8))
    packed = P.reduce_sum(astype(left_shift(a, bits), "f32"), (a.ndim - 1,))
    return P.transpose(astype(packed, "i32"), _swap_last(packed.ndim, axis))


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """Each number's 8 low bits as 0/1 entries along `axis` (flattened if None), the first
    highest with bitorder 'big'; count keeps that many bits (padding with zeros past them).
    numpy wants uint8 input: any integer array here (vkgrad has no uint8 arrays), its low 8
    bits read."""
    bits, a = _bit_weights("unpackbits", a, bitorder), asarray(a)
    if dtype_of(a) != "i32":
        raise DTypeError(f"unpackbits takes an integer array (numpy's uint8), got "
                         f"{type_string(a)}", source=user_source())
    a, axis = (P.reshape(a, (math.prod(a.shape),)), 0) if axis is None else (a, axis)
    a = P.transpose(a, _swap_last(a.ndim, axis))
    col = P.reshape(a, tuple(a.shape) + (1,))
    out = astype(greater(bitwise_and(col, left_shift(1, bits)), 0), "i32")
    out = P.reshape(out, tuple(a.shape[:-1]) + (a.shape[-1] * 8,))
    if count is not None:
        n = out.shape[-1]
        if count > n:
            pad = P.broadcast_to(_np.int32(0), tuple(out.shape[:-1]) + (count - n,))
            out = P.concatenate([out, pad], out.ndim - 1)
        else:
            out = P.slice_(out, (0,) * out.ndim, tuple(out.shape[:-1]) + (count,))
    return P.transpose(out, _swap_last(out.ndim, axis))


def _bit_weights(name, a, bitorder):
    if bitorder not in ("big", "little"):
        raise ArgumentError(f"{name}: bitorder must be 'big' or 'little', got {bitorder!r}",
                            source=user_source())
    bits = _np.arange(8, dtype=_np.int32)
    return bits[::-1].copy() if bitorder == "big" else bits


def _swap_last(ndim, axis):
    """The permutation swapping `axis` with the last axis (its own inverse)."""
    ax = axis % ndim if -ndim <= axis < ndim else _bad_axis(axis, ndim)
    perm = list(range(ndim))
    perm[ax], perm[-1] = perm[-1], perm[ax]
    return perm


def _bad_axis(axis, ndim):
    raise ArgumentError(f"axis {axis} is out of bounds for an array of dimension {ndim}",
                        source=user_source())


__all__ += ["bitwise_count", "gcd", "lcm", "modf", "nextafter", "spacing", "frexp", "ldexp",
            "packbits", "unpackbits"]


_NO_UFUNC_OBJECTS = ("vkgrad.numpy's elementwise functions are plain functions, without numpy's "
                     "ufunc methods (.reduce, .accumulate, .at, .outer; docs/numpy.md, 'What it "
                     "refuses'): use vnp.sum, vnp.cumsum, x.at[...], vnp.outer, or "
                     "vnp.vectorize for a Python function")


class ufunc:
    """jnp.ufunc's name: refused (no vkgrad function is one, so isinstance(f, vnp.ufunc) is
    False); building one raises an ArgumentError."""

    def __new__(cls, *args, **kwargs):
        raise ArgumentError(f"vnp.ufunc: {_NO_UFUNC_OBJECTS}", source=user_source())


def frompyfunc(func, /, nin, nout, *, identity=None):
    """Refused: numpy's ufunc objects are not built (see ufunc)."""
    raise ArgumentError(f"vnp.frompyfunc: {_NO_UFUNC_OBJECTS}", source=user_source())


__all__ += ["ufunc", "frompyfunc"]
