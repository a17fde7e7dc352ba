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
    if isinstance(dtype, RefusedDType):
        raise dtype.error()
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


# numpy's other names of these dtypes (jnp's): a double is float64 (float32 with x64 off, as
# JAX truncates it), a single float32, int_ int32 (JAX's default int with 64 bits off);
# numpy's abstract classes for issubdtype; the unsigned names are stored as int32, as uint8 is
double = float_ = _np.float64
single = _np.float32
int_ = _np.int32
uint, uint16, uint64 = _np.uint, _np.uint16, _np.uint64
generic, character, flexible, unsignedinteger = (_np.generic, _np.character, _np.flexible,
                                                 _np.unsignedinteger)
# nothing in vkgrad is complex: issubdtype(x.dtype, complexfloating) is False for every array
complexfloating = _np.complexfloating
can_cast = _np.can_cast
ComplexWarning = _np.exceptions.ComplexWarning

__all__ += ["double", "float_", "single", "int_", "uint", "uint16", "uint64", "generic",
            "character", "flexible", "unsignedinteger", "complexfloating", "can_cast",
            "ComplexWarning"]


def promote_types(a, b) -> _np.dtype:
    """The dtype two dtypes promote to, by vkgrad's rules (JAX's lattice, as result_type;
    numpy's names map by the dtype policy)."""
    return np_dtype(_join(dtype_name(a), dtype_name(b)))


_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
          "real floating": "f", "complex floating": "c", "numeric": "iufc"}


def isdtype(dtype, kind) -> bool:
    """The array API's isdtype (jnp's): whether `dtype` is `kind`, a dtype or one of the
    names 'bool', 'signed integer', 'unsigned integer', 'integral', 'real floating',
    'complex floating', 'numeric', or a tuple of them. bfloat16 is a real floating type."""
    d = _np.dtype(dtype)
    d_kind = "f" if d == np_dtype("bf16") else d.kind
    for k in kind if isinstance(kind, tuple) else (kind,):
        if isinstance(k, str) and k in _KINDS:
            if d_kind in _KINDS[k]:
                return True
            continue
        try:
            if d == _np.dtype(k):
                return True
        except TypeError:
            raise ArgumentError(f"isdtype: kind {k!r} is not a dtype or one of {list(_KINDS)}",
                                source=user_source()) from None
    return False


def isscalar(element) -> bool:
    """jnp's isscalar: a Python or NumPy scalar, or a 0-d array (a vkgrad array or a traced
    value of shape () too)."""
    if _np.isscalar(element):
        return True
    if isinstance(element, (_np.ndarray, ArrayOps)):
        return element.ndim == 0
    return False


class RefusedDType:
    """A dtype name vkgrad has no dtype for: using it (as a dtype or called) raises a
    DTypeError saying why (docs/numpy.md, "What it refuses")."""

    def __init__(self, name, why):
        self.name, self.why = name, why
        self.__name__ = self.__qualname__ = name

    def error(self) -> DTypeError:
        return DTypeError(f"vnp.{self.name}: {self.why}", source=user_source())

    def __call__(self, *args, **kwargs):
        raise self.error()

    @property
    def dtype(self):
        raise self.error()

    def __repr__(self):
        return f"<vkgrad.numpy.{self.name}: refused ({self.why})>"


_COMPLEX = ("vkgrad has no complex dtype (docs/numpy.md, 'What it refuses'): hold real and "
            "imaginary parts as two float arrays")
_NARROW = ("vkgrad has no {bits}-bit dtype (its dtypes are float16, bfloat16, float32, "
           "float64, int32 and bool)")
_REFUSED = {**{n: _COMPLEX for n in ("complex64", "complex128", "complex_", "cdouble",
                                     "csingle")},
            "object_": "vkgrad arrays hold numbers: there is no object dtype"}
for _name, _bits in [("float4_e2m1fn", 4), ("float6_e2m3fn", 6), ("float6_e3m2fn", 6),
                     ("float8_e3m4", 8), ("float8_e4m3", 8), ("float8_e4m3b11fnuz", 8),
                     ("float8_e4m3fn", 8), ("float8_e4m3fnuz", 8), ("float8_e5m2", 8),
                     ("float8_e5m2fnuz", 8), ("float8_e8m0fnu", 8), ("int1", 1), ("int2", 2),
                     ("int4", 4), ("uint1", 1), ("uint2", 2), ("uint4", 4)]:
    _REFUSED[_name] = _NARROW.format(bits=_bits)
for _name, _why in _REFUSED.items():
    globals()[_name] = RefusedDType(_name, _why)
__all__ += list(_REFUSED)


def sort_complex(a):
    """Refused: numpy's sort_complex returns a complex array, and vkgrad has no complex dtype
    (vnp.sort sorts real values)."""
    raise DTypeError("vnp.sort_complex: its result is complex, and " + _COMPLEX.split(" (")[0]
                     + " (use vnp.sort for real values)", source=user_source())


__all__ += ["promote_types", "isdtype", "isscalar", "sort_complex"]
