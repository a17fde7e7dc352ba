"""What vkgrad.numpy's modules share: argument checks (axes, integer indices), type strings, and
define_wrappers, which makes the functions of a table."""

from __future__ import annotations

import numpy as _np

import operator

from vkgrad.errors import ArgumentError, ShapeError, VkgradIndexError
from vkgrad.ir.core import type_str
from vkgrad.primitives import dtype_of
from vkgrad.tracer.core import Tracer, concrete_value, concretization_error, user_source


def normalize_axes(axis, ndim) -> tuple:
    """axis (None: all; an int or a sequence, negative from the end) as sorted distinct axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        if not is_int(a):   # numpy and JAX refuse a float (or a traced) axis too
            raise VkgradIndexError(f"axis {a!r} must be an integer, not {type(a).__name__}",
                                   source=user_source())
        if not -ndim <= a < ndim:
            raise VkgradIndexError(f"axis {a} is out of bounds for an array of dimension {ndim}",
                                   source=user_source())
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise VkgradIndexError(f"repeated axis in {axis}", source=user_source())
    return tuple(sorted(out))


def horner(coeffs, t):
    """coeffs[0] t^(n-1) + ... + coeffs[-1] (Python numbers as coefficients, t an array):
    the rational and series approximations of vkgrad/numpy/windows.py and vg.scipy.special."""
    out = coeffs[0]
    for c in coeffs[1:]:
        out = out * t + c
    return out


def type_string(x) -> str:
    """x's type as the IR prints it (f32[3,4]), for messages."""
    return type_str(x.shape, dtype_of(x))


def is_int(k) -> bool:
    """A Python or numpy integer, not a bool (an integer index or count)."""
    return isinstance(k, (int, _np.integer)) and not isinstance(k, (bool, _np.bool_))


def nonnegative_int(n, name: str, what: str, truncate: bool = False) -> int:
    """n as a Python int >= 0, for `name`'s argument `what` (an order or a length: JAX's
    concrete integer; a traced n whose trace knows its value, an eager grad's, is that value);
    truncate: a float is truncated, where JAX takes int(n)."""
    if truncate and isinstance(n, (float, _np.floating)):
        n = int(n)
    if isinstance(n, Tracer):
        v = concrete_value(n)
        if v is None:
            raise concretization_error(n, f"{name}'s {what}", f"pass {what} as a Python int")
        n = v.item()
    try:
        n = operator.index(n)
    except TypeError:
        raise ArgumentError(f"{name}: {what} must be an integer, got {n!r}",
                            source=user_source()) from None
    if n < 0:
        raise ShapeError(f"{name}: {what} must be nonnegative, got {n}", source=user_source())
    return n


def define_wrappers(namespace: dict, table: dict, make) -> list:
    """One function per row of `table`, name -> (*arguments of make, docstring): make(*arguments)
    builds it; it takes the row's name and docstring and goes into `namespace` (the defining
    module's globals()). Returns the names, for that module's __all__."""
    for name, (*spec, doc) in table.items():
        fn = make(*spec)
        fn.__name__ = fn.__qualname__ = name
        fn.__code__ = fn.__code__.replace(co_name=name)   # tracebacks and messages say `name`
        fn.__doc__ = doc
        fn.__module__ = namespace["__name__"]
        namespace[name] = fn
    return list(table)
