"""vg.debug: print and call back on runtime values from inside transformed functions, as JAX's
jax.debug.

    vg.debug.print("x = {x}", x=x)        str.format with the values, printed when they exist
    vg.debug.callback(fn, *args, **kw)    fn called with the values (host Arrays)

Outside any trace both act at once. Inside one (jit, grad, vmap) they bind debug_callback
(vkgrad/primitives/debug.py says where it runs): the call happens when the program runs, with
that run's values, once per example under vmap; under jit on Vulkan between two submissions.
"""

from __future__ import annotations

import builtins

import numpy as np

from vkgrad.errors import ArgumentError
from vkgrad.primitives.debug import debug_callback
from vkgrad.tracer.array import host_array
from vkgrad.tracer.core import ArrayOps, current_trace, user_source
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

