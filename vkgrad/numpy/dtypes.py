"""dtype names and the dtype policy of vkgrad.numpy (the package docstring states it), and
asarray / astype, which apply it.

numpy's dtype names map by the policy: narrower or wider ints are int32; float16 and bfloat16
(ml_dtypes's, as JAX's) are storage types computed in float32 (vkgrad/dtypes.py).
"""

from __future__ import annotations

import builtins

import ml_dtypes as _ml_dtypes
import numpy as _np

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, DTypeError, VkgradError
from vkgrad.config import requested_dtype
from vkgrad.dtypes import INT32_RANGE, bfloat16, canonical_array, check_int, is_half
from vkgrad.ir.core import DTYPES, canonical_dtype, is_float, np_dtype
from vkgrad.tracer.array import host_array
from vkgrad.tracer.core import ArrayOps, api_name, current_trace, user_source

__all__ = ["float32", "float64", "int32", "bool_", "float16", "bfloat16", "int64", "int16", "int8", "uint8",
           "uint32", "bool8", "dtype", "finfo", "iinfo", "floating", "integer", "number",
           "inexact", "signedinteger", "issubdtype", "result_type", "asarray", "array", "astype"]

float32, float64, int32, bool_ = _np.float32, _np.float64, _np.int32, _np.bool_
float16, int64, int16, int8, uint8, uint32 = (_np.float16, _np.int64, _np.int16, _np.int8,
                                               _np.uint8, _np.uint32)
bool8 = _np.bool_
dtype = _np.dtype
iinfo = _np.iinfo
floating, integer, number, inexact, signedinteger = (_np.floating, _np.integer, _np.number,
                                                      _np.inexact, _np.signedinteger)

bfloat16 = bfloat16.type


def finfo(dt):
    """Machine limits of a float dtype (ml_dtypes's finfo knows bfloat16 too, as in JAX)."""
    d = dt.dtype if isinstance(dt, (_np.ndarray, _np.generic, ArrayOps)) else dt
    return _ml_dtypes.finfo(np_dtype(dtype_name(d)))


# JAX's type promotion lattice (jax/_src/dtypes.py, docs/type_promotion.rst), restricted to
# vkgrad's dtypes: each dtype and what it promotes to directly; i* and f* are weakly typed
# Python scalars, which take the dtype of the array beside them. f16 and bf16 join at f32.
_LATTICE = {"bool": ("i*",), "i*": ("i32",), "i32": ("f*",), "f*": ("f16", "bf16"),
            "f16": ("f32",), "bf16": ("f32",), "f32": ("f64",), "f64": ()}


def _upper(node, memo={}) -> frozenset:
    if node not in memo:
        memo[node] = frozenset({node}).union(*(_upper(n) for n in _LATTICE[node]))
    return memo[node]


def _join(a: str, b: str) -> str:
    """The least dtype both a and b promote to."""
    common = _upper(a) & _upper(b)
    return builtins.max(common, key=lambda n: len(_upper(n)))


_STRONG = {"i*": "i32", "f*": "f32"}      # a weak result alone: the default int and float

dtype_of = P.dtype_of


def issubdtype(arg1, arg2) -> bool:
    """numpy's, with bfloat16 a floating type as in JAX (numpy sees ml_dtypes's as void)."""
    if arg1 is bfloat16 or (isinstance(arg1, _np.dtype) and arg1 == np_dtype("bf16")):
        arg1 = _np.float16
    return _np.issubdtype(arg1, arg2)


def is_weak(x) -> bool:
    """A Python scalar (weakly typed: it takes the dtype of the array beside it)."""
    return isinstance(x, (bool, int, float)) and not isinstance(x, _np.generic)


def _weak_kind(x) -> str:
    return "bool" if isinstance(x, bool) else "i32" if isinstance(x, int) else "f32"


def _lattice_node(x) -> str:
    return "bool" if isinstance(x, bool) else "i*" if isinstance(x, int) else "f*"


def _is_np_scalar(x) -> bool:
    return isinstance(x, _np.generic) and x.dtype.kind in "biuf"


def result_type(*xs) -> _np.dtype:
    """The dtype operations on xs compute in (numpy's name; vkgrad's promotion rules)."""
    return np_dtype(promoted_dtype(*xs))


def promoted_dtype(*xs) -> str:
    """JAX's promotion (its lattice, `_LATTICE`) with weakly typed Python scalars: `x * 2.0`
    keeps x's f16; i32 with f16 is f16; f16 with f32 is f32; f16 with bf16 is f32. NumPy
    scalars beside an array are weakly typed too: `x * (1.0 / np.sqrt(d))` keeps an f32 x f32,
    as in JAX (docs/reliability.md, float64 policy); alone they keep their dtype."""
    arrays = [x for x in xs if not is_weak(x) and not _is_np_scalar(x)]
    if arrays:
        xs = [x.item() if _is_np_scalar(x) else x for x in xs]   # as Python scalars
    nodes = [_lattice_node(x) if is_weak(x) else dtype_of(x) for x in xs]
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        return "f32"
    out = nodes[0]
    for n in nodes[1:]:
        out = _join(out, n)
    return _STRONG.get(out, out)


def no_out(out) -> None:
    """numpy's `out=` writes into an existing array; vkgrad's arrays are immutable."""
    if out is not None:
        raise ArgumentError("out= is not supported: vkgrad arrays are immutable; use the "
                            "returned array (x = vnp.f(...)), or x.at[...].set(...) to update "
                            "part of one", source=user_source())


def dtype_name(dtype) -> str:
    """The dtype an operation asked for `dtype` computes in: numpy's names map by the dtype
    policy (vkgrad/config.py: int64 and other ints -> int32, float64 -> float32 unless x64 is
    on, with JAX's warning for a 64-bit dtype truncated); 'float16', 'bfloat16' and 'f16',
    'bf16' name the 16-bit floats."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    try:
        d = _np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{dtype!r} is not a dtype", source=user_source()) from None
    try:
        name = canonical_dtype(d)
    except DTypeError as e:
        raise DTypeError(e.message + (" (complex numbers: docs/numpy.md says why not)"
                                      if d.kind == "c" else ""), source=user_source()) from None
    return requested_dtype(d, name, api_name())


def asarray(x, dtype=None):
    """An array for x: tracers and Arrays stay as they are; Python data (float32 for Python
    floats) and numpy arrays (other ints -> int32) become a vkgrad.Array holding a copy, or,
    inside a transformed function, a numpy constant."""
    if isinstance(x, ArrayOps):
        out = x
    elif isinstance(x, (list, tuple)):
        if _contains_tracer(x):
            out = _stacked(x)
        else:
            a = _np.asarray(x)
            kinds = {type(v) for v in _leaves_of(x)}
            weak = kinds and builtins.all(issubclass(k, (bool, int, float)) and
                                          not issubclass(k, _np.generic) for k in kinds)
            if weak and a.dtype.kind == "f":
                a = a.astype(_np.float32)
            out = canonical_array(a)
    elif is_weak(x):
        if _weak_kind(x) == "i32":
            check_int(x)   # a Python int int32 cannot hold: an error, as JAX's
        out = _np.asarray(x, dtype=np_dtype(_weak_kind(x)))
    elif isinstance(x, (_np.ndarray, _np.generic)):
        out = canonical_array(_np.asarray(x))
    else:
        raise DTypeError(f"cannot make an array from a {type(x).__name__}")
    if not isinstance(out, ArrayOps) and current_trace() is None:
        out = host_array(out)   # outside a trace, a vkgrad.Array (inside, a constant)
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


def _stacked(values):
    """A list holding tracers: its entries stacked along a new first axis (vnp.stack's
    equations: a reshape each, converts to the common dtype, one concatenate)."""
    parts = [asarray(v) for v in values]
    parts = [P.reshape(p, [1, *p.shape]) for p in parts]
    dt = promoted_dtype(*parts)
    return P.concatenate([promote(p, dt) for p in parts], 0)


def astype(x, dtype):
    dt = dtype_name(dtype)
    x = asarray(x)
    src = x.aval.dtype if isinstance(x, ArrayOps) else canonical_dtype(x.dtype)
    if src == dt:
        r = x
    elif dt == "i32" and is_float(src):   # halves through f32, where the int32 bounds exist
        r = _float_to_int32(P.convert(x, "f32") if is_half(src) else x)
    else:
        r = P.convert(x, dt)
    return _narrowed(r, dtype, is_float(src)) if dt == "i32" and src != "bool" else r


def _narrowed(x, dtype, saturate: bool):
    """An int32 x converted to a narrower integer dtype (stored as int32), with the value JAX
    gives: an integer wrapped into the dtype's range (astype(np.uint8) of 300 is 44), a float
    saturated at its bounds (300.5 is 255)."""
    d = _np.dtype(dtype) if not isinstance(dtype, str) or dtype not in DTYPES else None
    if d is None or d.kind not in "iu" or d.itemsize >= 4:
        return x
    bits = 8 * d.itemsize
    lo, hi = (0, (1 << bits) - 1) if d.kind == "u" else (-(1 << bits - 1), (1 << bits - 1) - 1)
    if saturate:
        return P.minimum(P.maximum(x, _np.int32(lo)), _np.int32(hi))
    return P.add(P.bitwise_and(P.sub(x, _np.int32(lo)), _np.int32((1 << bits) - 1)),
                 _np.int32(lo))


def _float_to_int32(x):
    """Floats to int32 as JAX converts them: truncated, saturated at the int32 range, NaN as 0.
    A bare conversion of NaN, inf or a float beyond the range is undefined (x86, so numpy and
    lavapipe, give INT_MIN; an NVIDIA GPU saturates), so the backends would disagree."""
    lo, hi = float(INT32_RANGE[0]), -float(INT32_RANGE[0])   # -2**31 and 2**31, exact floats
    inside = P.select(P.le(lo, x), P.lt(x, hi), False)        # False for NaN
    r = P.convert(P.select(inside, x, 0.0), "i32")
    r = P.select(P.le(hi, x), _np.int32(INT32_RANGE[1]), r)
    return P.select(P.lt(x, lo), _np.int32(INT32_RANGE[0]), r)


def promote(x, dt: str):
    """x as dtype dt: tracers get a convert eqn, constants are cast now."""
    if isinstance(x, ArrayOps):
        return P.convert(x, dt)
    if is_weak(x):
        if type(x) is int and not is_float(dt):   # numpy's OverflowError, in the user's terms
            try:
                check_int(x)
            except VkgradError as e:
                raise e.with_context(source=user_source()) from None
        return np_dtype(dt).type(x)
    a = asarray(x)
    return a if a.dtype == np_dtype(dt) else a.astype(np_dtype(dt))


def operands(*xs):
    """The operands of an op: scalars kept as they are (weakly typed), the rest as arrays."""
    return [x if isinstance(x, ArrayOps) or is_weak(x) or _is_np_scalar(x) else asarray(x)
            for x in xs]


def as_float(x):
    """x as an array of a float dtype (integers and bools as float32)."""
    x = asarray(x)
    return x if is_float(dtype_of(x)) else promote(x, "f32")
