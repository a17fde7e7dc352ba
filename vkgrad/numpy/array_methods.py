"""What operators and numpy's method names mean on vkgrad's arrays (Tracer and vkgrad.Array
share ArrayOps), and numpy's functions called on a Tracer (__array_ufunc__,
__array_function__): defined here and installed once, by vkgrad.numpy's __init__, so the trace
core needs no knowledge of them."""

from __future__ import annotations

import numpy as np

from vkgrad.numpy.contractions import dot, matmul
from vkgrad.numpy.decompositions import linalg
from vkgrad.numpy.dtypes import astype
from vkgrad.numpy.indexing import at, getitem, setitem
from vkgrad.numpy.linalg import diagonal, trace
from vkgrad.numpy.reductions import (all, any, argmax, argmin, cumprod, cumsum, max, mean, min,
                                     prod, std, sum, var)
from vkgrad.numpy.shapes import ravel, repeat, reshape, squeeze, swapaxes, transpose
from vkgrad.numpy.sorting import argsort
from vkgrad.numpy.ufuncs import (abs, add, bitwise_and, bitwise_or, bitwise_xor, clip, divide,
                                 equal, floor_divide, greater, greater_equal, invert, left_shift,
                                 less, less_equal, multiply, negative, nonzero, not_equal, power,
                                 remainder, right_shift, round, subtract)
from vkgrad.traceback_util import api_boundary
from vkgrad.tracer.core import ArrayOps, Tracer, concretization_error

# vkgrad.numpy's names (its package namespace, given to install_array_methods): numpy's
# functions called on a Tracer dispatch to the function of the same name
_NAMESPACE: dict = {}


# what an operator takes beside an array; anything else gets NotImplemented, so Python asks the
# other operand (as JAX's operators do: `x == pytest.approx(3.0)` is approx's comparison)
_OPERANDS = (int, float, complex, np.generic, np.ndarray, ArrayOps, list, tuple)


def _operator(fn, reflected=False):
    if reflected:
        def method(self, other):
            return fn(other, self) if isinstance(other, _OPERANDS) else NotImplemented
    else:
        def method(self, other):
            return fn(self, other) if isinstance(other, _OPERANDS) else NotImplemented
    return method


def _method_reshape(self, *shape, order="C"):
    return reshape(self, shape[0] if len(shape) == 1 else shape)


def _method_transpose(self, *axes):
    return transpose(self, (axes[0] if len(axes) == 1 else axes) or None)


_OPERATORS = {"add": add, "sub": subtract, "mul": multiply, "truediv": divide, "pow": power,
              "matmul": matmul, "and": bitwise_and, "or": bitwise_or, "xor": bitwise_xor,
              "lshift": left_shift, "rshift": right_shift, "mod": remainder,
              "floordiv": floor_divide}
_COMPARISONS = {"lt": less, "le": less_equal, "gt": greater, "ge": greater_equal, "eq": equal,
                "ne": not_equal}
_METHODS = {
    "__neg__": negative, "__pos__": lambda self: self, "__abs__": abs,
    "__invert__": invert, "__getitem__": getitem,
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
    "__setitem__": setitem, "at": property(at),
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
    # jax.Array's, through vkgrad.numpy's functions of the same name (its namespace, below)
    "mT": property(lambda self: _NAMESPACE["matrix_transpose"](self)),
    "real": property(lambda self: _NAMESPACE["real"](self)),
    "imag": property(lambda self: _NAMESPACE["imag"](self)),
    "conj": lambda self: _NAMESPACE["conj"](self),
    "conjugate": lambda self: _NAMESPACE["conjugate"](self),
    "ptp": lambda self, axis=None, out=None, keepdims=False:
        _NAMESPACE["ptp"](self, axis, out, keepdims),
    "sort": lambda self, axis=-1, *, kind=None, order=None, stable=True, descending=False:
        _NAMESPACE["sort"](self, axis, kind=kind, order=order, stable=stable,
                           descending=descending),
    "searchsorted": lambda self, v, side="left", sorter=None:
        _NAMESPACE["searchsorted"](self, v, side=side, sorter=sorter),
    "take": lambda self, indices, axis=None: _NAMESPACE["take"](self, indices, axis),
    "itemsize": property(lambda self: np.dtype(self.dtype).itemsize),
    "nbytes": property(lambda self: int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize),
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
    fn = _NAMESPACE.get(name)
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
            func.__name__, _NAMESPACE.get(func.__name__) if func.__name__ in ("asarray", "array")
            else None))
    return fn(*args, **kwargs)


def install_array_methods(namespace: dict) -> None:
    """Operators, methods and numpy's dispatch hooks, set on ArrayOps and Tracer; `namespace`
    is vkgrad.numpy's, which numpy's functions on a Tracer dispatch to."""
    _NAMESPACE.update(namespace)
    for name, fn in _OPERATORS.items():
        setattr(ArrayOps, f"__{name}__", api_boundary(_operator(fn)))
        setattr(ArrayOps, f"__r{name}__", api_boundary(_operator(fn, reflected=True)))
    for name, fn in _COMPARISONS.items():
        setattr(ArrayOps, f"__{name}__", api_boundary(_operator(fn)))
    for name, fn in _METHODS.items():
        setattr(ArrayOps, name, fn if isinstance(fn, property) else api_boundary(fn))
    Tracer.__array_ufunc__ = _tracer_array_ufunc
    Tracer.__array_function__ = _tracer_array_function

