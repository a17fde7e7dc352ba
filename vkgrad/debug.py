"""vg.debug: print and call back on runtime values from inside transformed functions, as JAX's
jax.debug.

    vg.debug.print("x = {x}", x=x)        str.format with the values, printed when they exist
    vg.debug.callback(fn, *args, **kw)    fn called with the values (host Arrays)

vg.pure_callback (jax.pure_callback, exported at the top level) is here too: a host function
with results of declared shapes and dtypes, run where debug callbacks run.

Outside any trace both act at once. Inside one (jit, grad, vmap) they bind debug_callback
(vkgrad/primitives/debug.py says where it runs): the call happens when the program runs, with
that run's values, once per example under vmap; under jit on Vulkan between two submissions.
"""

from __future__ import annotations

import builtins

import numpy as np

from vkgrad.errors import ArgumentError
from vkgrad.ir.core import TensorType
from vkgrad.primitives.debug import debug_callback, pure_callback as _bind_pure
from vkgrad.tracer.array import host_array
from vkgrad.tracer.core import ArrayOps, abstract_leaf, current_trace, user_source
from vkgrad.tracer.pytree import tree_flatten, tree_unflatten

__all__ = ["print", "callback"]


def callback(callback, *args, ordered: bool = False, **kwargs) -> None:
    """Call `callback(*args, **kwargs)` with the runtime values of the arrays in args and
    kwargs (pytrees; other leaves passed as they are), as jax.debug.callback. Calls happen in
    program order whether or not `ordered` is asked for; the result is ignored."""
    if not callable(callback):
        raise ArgumentError(f"vg.debug.callback takes a function first, not "
                            f"{type(callback).__name__}", source=user_source())
    if current_trace() is None:
        callback(*args, **kwargs)
        return
    leaves, tree = tree_flatten((args, kwargs))
    traced = [i for i, x in enumerate(leaves) if isinstance(x, (ArrayOps, np.ndarray))]

    def call(*values):
        full = list(leaves)
        for i, v in zip(traced, values):
            full[i] = host_array(v)
        a, k = tree_unflatten(tree, full)
        callback(*a, **k)

    call.__qualname__ = getattr(callback, "__qualname__", "callback")
    debug_callback(call, [leaves[i] for i in traced])


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001
    """Print `fmt.format(*args, **kwargs)` with the runtime values, as jax.debug.print."""
    if not isinstance(fmt, str):
        raise ArgumentError(f"vg.debug.print takes a format string first, not "
                            f"{type(fmt).__name__}", source=user_source())
    callback(_Formatter(fmt), *args, **kwargs)


class _Formatter:
    """fmt.format(...) printed; its name, in printed programs, shows the format."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.__qualname__ = f"print({fmt!r})"

    def __call__(self, *args, **kwargs):
        builtins.print(self.fmt.format(*args, **kwargs))



def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """`callback(*args, **kwargs)` on the host, as jax.pure_callback: args' arrays (pytrees)
    arrive as numpy arrays, and the results must match result_shape_dtypes (a pytree of
    vg.ShapeDtypeStruct or arrays: their shapes and dtypes), else a ShapeError or DTypeError
    naming the callback. It must be pure: a call whose results are unused may be dropped, two
    equal calls merged. Under jit on Vulkan it is a host step between two submissions
    (vkgrad/execution/segmented.py), nested in a loop body or a branch the program runs on
    the interpreter, counted (vg.fallbacks()). vmap needs vmap_method ('sequential',
    'sequential_unrolled', 'expand_dims', 'broadcast_all', 'legacy_vectorized', JAX's);
    differentiating it is a GradError, as in JAX. sharding: single-device only (None)."""
    where = user_source()
    if not callable(callback):
        raise ArgumentError(f"vg.pure_callback takes a function first, not "
                            f"{type(callback).__name__}", source=where)
    if sharding is not None:
        raise ArgumentError("vg.pure_callback: sharding= is not supported (one device)",
                            source=where)
    specs, out_tree = tree_flatten(result_shape_dtypes)
    results = [TensorType(tuple(np.shape(s)), abstract_leaf(_spec(s), "result_shape_dtypes")
                          .dtype) for s in specs]
    leaves, tree = tree_flatten((args, kwargs))
    traced = [i for i, x in enumerate(leaves) if isinstance(x, (ArrayOps, np.ndarray,
                                                                np.generic))]
    name = getattr(callback, "__qualname__", "callback")

    def call(*values):
        full = list(leaves)
        for i, v in zip(traced, values):
            full[i] = np.asarray(v)
        a, k = tree_unflatten(tree, full)
        outs, got = tree_flatten(callback(*a, **k))
        if got != out_tree:
            raise ArgumentError(f"pure_callback {name} returned a pytree {got}, its "
                                f"result_shape_dtypes are {out_tree}", source=where)
        return outs

    call.__qualname__ = name
    outs = _bind_pure(call, [leaves[i] for i in traced], results, vmap_method, where)
    return tree_unflatten(out_tree, list(outs))


def _spec(s):
    """A result_shape_dtypes leaf as something abstract_leaf reads: a ShapeDtypeStruct (or
    any object with shape and dtype) as an empty array of its dtype."""
    if hasattr(s, "dtype") and not isinstance(s, (np.ndarray, ArrayOps)):
        return np.zeros((0,), s.dtype)
    return s
