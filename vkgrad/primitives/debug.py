"""debug_callback: call a Python function on the runtime values of its operands (JAX's
jax.debug.callback; vg.debug.print is one). It has an effect and no results: not 'pure', so
DCE and CSE keep it where the program puts it.

Where it runs:
* the interpreter (an eager transform's program, a jit on the numpy backend): its impl calls
  the callback, in program order;
* a jit on Vulkan: no kernel computes it, so the program is split at it and it runs as a host
  step between submissions, as a collective does (vkgrad/execution/segmented.py); nested in a
  scan body, a cond branch or a loop it cannot be split out, and the program runs on the
  interpreter, counted (vg.fallbacks()).

VJP: none (no results, so no cotangent; the forward pass calls it). vmap: one call per example,
as JAX's, each with that example's values (the unmapped operands as they are).
"""

from __future__ import annotations

from vkgrad.ir.core import Primitive, abstract_eval_rules, batching_rules, vjp_rules
from vkgrad.ir.interpreter import impls
from vkgrad.primitives.lax import _index_axis
from vkgrad.tracer.core import bind

debug_callback_p = Primitive("debug_callback", (), multiple_results=True)


class Callback:
    """The `callback` param: a Python function, hashed by identity, printed by its name (so
    printed programs do not depend on addresses)."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __repr__(self) -> str:
        return getattr(self.fn, "__qualname__", type(self.fn).__name__)


abstract_eval_rules[debug_callback_p] = lambda *xs, callback: []


def _impl(*xs, callback):
    callback.fn(*xs)
    return []


impls[debug_callback_p] = _impl
vjp_rules[debug_callback_p] = lambda gs, ans, *xs, callback: tuple(None for _ in xs)


def _batch(args, dims, *, callback):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    for i in range(size):
        bind(debug_callback_p, *[a if d is None else _index_axis(a, d, i)
                                 for a, d in zip(args, dims)], callback=callback)
    return [], []


batching_rules[debug_callback_p] = _batch


def debug_callback(fn, leaves) -> None:
    """Bind a call of `fn(*leaves)` on the leaves' runtime values."""
    bind(debug_callback_p, *leaves, callback=Callback(fn))
