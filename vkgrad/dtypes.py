"""Dtypes: the short names the IR uses ('f32', 'f64', 'i32', 'bool') and numpy's for them.

The printer shows these names and the lowering switches on them; `np_dtype(name)` gives numpy's
dtype, `dtype_name(x)` the name for anything numpy calls a dtype, and `canonical_dtype(x)` the
dtype user data of dtype x is stored in (other integers narrow to i32, float16 widens to f32).
"""

from __future__ import annotations

import numpy as np

from vkgrad.config import stored_dtype
from vkgrad.errors import DTypeError, IntegerOverflowError

DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i32": np.dtype(np.int32),
    "bool": np.dtype(np.bool_),
}
FLOAT_DTYPES = frozenset({"f32", "f64"})
NUMERIC_DTYPES = frozenset({"f32", "f64", "i32"})
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
    raise DTypeError(f"unsupported dtype {d}: vkgrad computes in float32, float64, int32 and bool")


def canonical_dtype(dt) -> str:
    """The dtype user data of dtype `dt` is stored in: other ints -> i32, float16 -> f32, and
    float64 by the x64 policy (vkgrad/config.py: f32 unless x64 is on).

    (int64 is numpy's default integer; indices and labels fit int32, which is what GPUs index
    with, so we narrow rather than reject.)"""
    d = np.dtype(dt)
    if d in _NAME_OF:
        return stored_dtype(_NAME_OF[d])
    if d.kind in "iu":
        return "i32"
    if d.kind == "f" and d.itemsize <= 4:
        return "f32"
    raise DTypeError(f"unsupported dtype {d}: vkgrad computes in float32, float64, int32 and bool")


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


def type_str(shape, dtype) -> str:
    """'f32[3,4]': how the IR, errors and profiles write an array type."""
    return f"{dtype}[{','.join(str(d) for d in shape)}]"
