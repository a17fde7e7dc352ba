"""debug_callback: call a Python function on the runtime values of its operands (JAX's
jax.debug.callback; vg.debug.print is one). It has an effect and no results: not 'pure', so
DCE and CSE keep it where the program puts it. pure_callback (jax.pure_callback): a Python
function with results of declared types; 'pure', so DCE drops a call whose results nobody reads
and CSE merges two equal calls, as JAX's may.

Where it runs:
* the interpreter (an eager transform's program, a jit on the numpy backend): its impl calls
  the callback, in program order;
* a jit on Vulkan: no kernel computes it, so the program is split at it and it runs as a host
  step between submissions, as a collective does (vkgrad/execution/segmented.py); nested in a
  scan body, a cond branch or a loop it cannot be split out, and the program runs on the
  interpreter, counted (vg.fallbacks()).

pure_callback runs in the same places (HOST_CALLBACKS: a host step between submissions under jit
on Vulkan, its results uploaded by the first part that reads them).

VJP: debug_callback none (no results, so no cotangent; the forward pass calls it);
pure_callback a GradError, as JAX's (wrap it in custom_jvp or custom_vjp). vmap: debug_callback
one call per example, as JAX's, each with that example's values (the unmapped operands as they
are); pure_callback as its vmap_method says (JAX's methods, `_batch_pure`).
"""

from __future__ import annotations

import numpy as np

from vkgrad.dtypes import np_dtype
from vkgrad.errors import ArgumentError, DTypeError, GradError, ShapeError
from vkgrad.ir.core import Primitive, TensorType, abstract_eval_rules, batching_rules, vjp_rules
from vkgrad.ir.interpreter import impls
from vkgrad.primitives.lax import (_index_axis, _shape, batch_to_front, concatenate, mapped_size,
                                  reshape)
from vkgrad.tracer.core import bind

debug_callback_p = Primitive("debug_callback", (), multiple_results=True)


class Callback:
    """The `callback` param: a Python function, hashed by identity, printed by its name (so
    printed programs do not depend on addresses)."""
    __slots__ = ("fn", "where")

    def __init__(self, fn, where=None):
        self.fn, self.where = fn, where    # where: the user's line that bound it (errors)

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


# ---------------------------------------------------------------------------- pure_callback

pure_callback_p = Primitive("pure_callback", ("pure",), multiple_results=True)
HOST_CALLBACKS = {debug_callback_p, pure_callback_p}    # run as host steps under jit on Vulkan
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized")

abstract_eval_rules[pure_callback_p] = lambda *xs, callback, results, vmap_method: list(results)


def _pure_impl(*xs, callback, results, vmap_method):
    """callback.fn(*xs) (numpy arrays in, the flat result leaves out), each result checked
    against its declared type: a wrong one is an error naming the callback."""
    outs = list(callback.fn(*xs))
    if len(outs) != len(results):
        raise ShapeError(f"pure_callback {callback!r} returned {len(outs)} arrays, its "
                         f"result_shape_dtypes declare {len(results)}", source=callback.where)
    checked = []
    for j, (o, t) in enumerate(zip(outs, results)):
        o = np.asarray(o)
        if o.shape != t.shape:
            raise ShapeError(f"pure_callback {callback!r}: result {j} has shape {o.shape}, "
                             f"declared {t.shape}", source=callback.where)
        if o.dtype != np_dtype(t.dtype):
            raise DTypeError(f"pure_callback {callback!r}: result {j} has dtype {o.dtype}, "
                             f"declared {np_dtype(t.dtype)}", source=callback.where)
        checked.append(o)
    return checked


impls[pure_callback_p] = _pure_impl


def _pure_vjp(gs, ans, *xs, callback, results, vmap_method):
    raise GradError(f"pure_callback {callback!r} has no derivative (vkgrad cannot look inside "
                    "a host function), as in JAX: wrap the function that calls it in "
                    "vg.custom_jvp or vg.custom_vjp to give it one", source=callback.where)


vjp_rules[pure_callback_p] = _pure_vjp


def _batch_pure(args, dims, *, callback, results, vmap_method):
    """JAX's vmap_methods: 'sequential' (and '_unrolled') one call per example, the results
    stacked; 'expand_dims' one call, the unmapped operands with a new leading axis of size 1;
    'broadcast_all' one call, every operand broadcast to the batch; 'legacy_vectorized' one
    call, the unmapped operands as they are. The one-call methods expect results with the
    batch axis first."""
    if vmap_method is None:
        raise ArgumentError(f"vmap of pure_callback {callback!r} needs vmap_method= (one of "
                            f"{', '.join(VMAP_METHODS)}), as in JAX", source=callback.where)
    size = mapped_size(args, dims)
    params = dict(callback=callback, vmap_method=vmap_method)
    if vmap_method.startswith("sequential"):
        per = [bind(pure_callback_p, *[a if d is None else _index_axis(a, d, i)
                                       for a, d in zip(args, dims)], results=results, **params)
               for i in range(size)]
        outs = [concatenate([reshape(p[j], (1,) + t.shape) for p in per], 0)
                for j, t in enumerate(results)]
        return outs, [0] * len(results)
    if vmap_method == "expand_dims":
        ins = [reshape(a, (1,) + tuple(_shape(a))) if d is None else batch_to_front(a, d, size)
               for a, d in zip(args, dims)]
    elif vmap_method == "broadcast_all":
        ins = [batch_to_front(a, d, size) for a, d in zip(args, dims)]
    else:
        ins = [a if d is None else batch_to_front(a, d, size) for a, d in zip(args, dims)]
    batched = tuple(TensorType((size,) + t.shape, t.dtype) for t in results)
    return bind(pure_callback_p, *ins, results=batched, **params), [0] * len(results)


batching_rules[pure_callback_p] = _batch_pure


def pure_callback(fn, leaves, results, vmap_method, where) -> list:
    """Bind a call of `fn(*leaves)` (numpy arrays in, a list of result leaves out) with the
    results' declared TensorTypes."""
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ArgumentError(f"pure_callback: vmap_method must be one of "
                            f"{', '.join(VMAP_METHODS)} or None, got {vmap_method!r}",
                            source=where)
    return bind(pure_callback_p, *leaves, callback=Callback(fn, where), results=tuple(results),
                vmap_method=vmap_method)
