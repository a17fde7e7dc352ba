"""Dtypes: the short names the IR uses ('f16', 'bf16', 'f32', 'f64', 'i32', 'bool') and
numpy's for them.

The printer shows these names and the lowering switches on them; `np_dtype(name)` gives numpy's
dtype, `dtype_name(x)` the name for anything numpy calls a dtype, and `canonical_dtype(x)` the
dtype user data of dtype x is stored in (other integers narrow to i32). bfloat16 is the
`ml_dtypes` package's numpy dtype, as in JAX.

The 16-bit floats are storage types: every operation on them computes in f32 and rounds its
result to the dtype (the interpreter, vkgrad/ir/interpreter.py, and the generated kernels
alike); reductions and matmuls accumulate in f32, as JAX does on GPUs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from vkgrad.config import stored_dtype
from vkgrad.errors import DTypeError, IntegerOverflowError

bfloat16 = np.dtype(ml_dtypes.bfloat16)

DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16),
    "bf16": bfloat16,
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i32": np.dtype(np.int32),
    "bool": np.dtype(np.bool_),
}
HALF_DTYPES = frozenset({"f16", "bf16"})      # 16-bit storage, f32 arithmetic
FLOAT_DTYPES = frozenset({"f16", "bf16", "f32", "f64"})
NUMERIC_DTYPES = frozenset({"f16", "bf16", "f32", "f64", "i32"})
ALL_DTYPES = frozenset(DTYPES)
_NAME_OF = {v: k for k, v in DTYPES.items()}


def dtype_name(dt) -> str:
    """'f32' for 'f32', 'float32', np.float32, np.dtype('float32'); DTypeError otherwise."""
    if isinstance(dt, str) and dt in DTYPES:
        return dt
    try:
        d = np.dtype(dt)
    except TypeError:
        raise DTypeError(f"{dt!r} is not a dtype") from None
    if d in _NAME_OF:
        return _NAME_OF[d]
    raise DTypeError(f"unsupported dtype {d}: {SUPPORTED}")


SUPPORTED = "vkgrad computes in float16, bfloat16, float32, float64, int32 and bool"


def canonical_dtype(dt) -> str:
    """The dtype user data of dtype `dt` is stored in: other ints -> i32, float64 by the x64
    policy (vkgrad/config.py: f32 unless x64 is on).

    (int64 is numpy's default integer; indices and labels fit int32, which is what GPUs index
    with, so we narrow rather than reject.)"""
    d = np.dtype(dt)
    if d in _NAME_OF:
        return stored_dtype(_NAME_OF[d])
    if d.kind in "iu":
        return "i32"
    raise DTypeError(f"unsupported dtype {d}: {SUPPORTED}")


INT32_RANGE = (-2 ** 31, 2 ** 31 - 1)


def canonical_array(a):
    """numpy data `a` in the dtype vkgrad stores it in (canonical_dtype). Integers that int32
    cannot hold are an IntegerOverflowError, never a silent wrap (numpy's astype wraps:
    `sum(arange(100000) ** 2)` came back as 216474736)."""
    d = np_dtype(canonical_dtype(a.dtype))
    if a.dtype == d:
        return a
    if a.dtype.kind in "iu" and a.size and (int(a.min()) < INT32_RANGE[0] or
                                            int(a.max()) > INT32_RANGE[1]):
        bad = int(a.max()) if int(a.max()) > INT32_RANGE[1] else int(a.min())
        raise IntegerOverflowError(
            f"{a.dtype} value {bad} does not fit int32: vkgrad computes integers in int32 (as "
            "JAX does without x64); scale or split the values, or compute them in float")
    return np.asarray(a, dtype=d)


def check_int(x: int) -> int:
    """A Python int that int32 holds, else an IntegerOverflowError (JAX raises too)."""
    if not INT32_RANGE[0] <= x <= INT32_RANGE[1]:
        raise IntegerOverflowError(f"Python int {x} does not fit int32: vkgrad computes "
                                   "integers in int32 (as JAX does without x64)")
    return x


def np_dtype(name: str) -> np.dtype:
    return DTYPES[name]


def is_float(name: str) -> bool:
    return name in FLOAT_DTYPES


def is_half(name: str) -> bool:
    """A 16-bit float: stored in 16 bits, computed in f32."""
    return name in HALF_DTYPES


def compute_dtype(name: str) -> str:
    """The dtype arithmetic on `name` runs in: f32 for the 16-bit floats, else `name`."""
    return "f32" if name in HALF_DTYPES else name


def storage_words(n: int, name: str) -> int:
    """32-bit words that hold `n` elements of dtype `name` on a device: the 16-bit floats are
    packed two to a word (the last word half used when n is odd), the rest one each."""
    return (n + 1) // 2 if name in HALF_DTYPES else n


def type_str(shape, dtype) -> str:
    """'f32[3,4]': how the IR, errors and profiles write an array type."""
    return f"{dtype}[{','.join(str(d) for d in shape)}]"


# JAX's dtype of the cotangent of an integer or bool input (jax.float0). vkgrad's vjp and grad
# give None for those instead (docs/compiler.md); the name is here for code that compares with it.
float0 = np.dtype([("float0", np.void, 0)])
