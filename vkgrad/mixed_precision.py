"""Mixed precision (`vg.mp`), in the style of DeepMind's jmp: a Policy says which dtype the
parameters are kept in, which the computation runs in and which the outputs come out in; loss
scales keep small f16 gradients from flushing to zero.

    policy = vg.mp.get_policy("params=float32,compute=float16,output=float32")
    scale = vg.mp.DynamicLossScale(2.0 ** 15)

    def loss_fn(params, x, y, scale):
        p, x = policy.cast_to_compute((params, x))        # f32 master weights -> f16 copies
        return scale.scale(policy.cast_to_output(model(p, x, y)))

    @vg.jit
    def step(params, opt_state, scale, x, y):
        grads = vg.grad(loss_fn)(params, x, y, scale)     # f32: the cast's gradient is f32
        grads = policy.cast_to_param(scale.unscale(grads))
        finite = vg.mp.all_finite(grads)
        updates, new_state = opt.update(grads, opt_state, params)
        new_params = vg.optim.apply_updates(params, updates)
        params = vg.mp.select_tree(finite, new_params, params)   # skip the step on overflow
        opt_state = vg.mp.select_tree(finite, new_state, opt_state)
        return params, opt_state, scale.adjust(finite)

Everything here is traced code: the overflow skip is a select, not a host branch, so a step
stays one submission. The parameters the optimizer updates are the f32 ones (master weights);
only their compute-dtype copies are 16-bit. Never f16 where bf16 was asked: f16's range is
smaller (get_policy keeps the names it is given).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from vkgrad import numpy as vnp
from vkgrad.dtypes import is_float
from vkgrad.errors import ArgumentError
from vkgrad.numpy.dtypes import dtype_name
from vkgrad.optim import GradientTransformation
from vkgrad.tracer.core import user_source
from vkgrad.tracer.pytree import tree_leaves, tree_map

__all__ = ["Policy", "get_policy", "cast_to_full", "cast_to_half", "all_finite", "select_tree",
           "NoOpLossScale", "StaticLossScale", "DynamicLossScale", "LossScaledState",
           "loss_scaled", "loss_scale_of"]


def _is_float_leaf(x) -> bool:
    if hasattr(x, "dtype"):
        return vnp.issubdtype(x.dtype, vnp.floating)
    return isinstance(x, float)


def _cast(tree, dtype: str):
    """Every floating-point leaf of `tree` as `dtype`; integer and bool leaves as they are."""
    return tree_map(lambda x: vnp.astype(x, dtype) if _is_float_leaf(x) else x, tree)


def cast_to_full(tree):
    return _cast(tree, "f32")


def cast_to_half(tree, dtype="f16"):
    return _cast(tree, dtype_name(dtype))


@dataclass(frozen=True)
class Policy:
    """The dtypes of parameters, computation and outputs (jmp's Policy)."""
    param_dtype: str = "f32"
    compute_dtype: str = "f32"
    output_dtype: str = "f32"

    def __post_init__(self):
        for f in ("param_dtype", "compute_dtype", "output_dtype"):
            object.__setattr__(self, f, dtype_name(getattr(self, f)))

    def cast_to_param(self, tree):
        return _cast(tree, self.param_dtype)

    def cast_to_compute(self, tree):
        return _cast(tree, self.compute_dtype)

    def cast_to_output(self, tree):
        return _cast(tree, self.output_dtype)

    def with_output_dtype(self, dtype) -> "Policy":
        return Policy(self.param_dtype, self.compute_dtype, dtype)

    def __str__(self) -> str:
        return (f"params={self.param_dtype},compute={self.compute_dtype},"
                f"output={self.output_dtype}")


_KEYS = {"p": "param_dtype", "params": "param_dtype", "param": "param_dtype",
         "c": "compute_dtype", "compute": "compute_dtype",
         "o": "output_dtype", "output": "output_dtype"}
_NAMES = {"half": "f16", "full": "f32", "float16": "f16", "bfloat16": "bf16", "float32": "f32",
          "float64": "f64"}


def get_policy(spec) -> Policy:
    """A Policy from text, as jmp reads it: "params=float32,compute=float16,output=float32"
    (or p=f32,c=bf16,o=f32), or one dtype for all three ("float32", "bf16", "half")."""
    if isinstance(spec, Policy):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ArgumentError(f"get_policy: {spec!r} is not a policy; write e.g. "
                            "'params=float32,compute=float16,output=float32'", source=user_source())
    if "=" not in spec:
        d = _dtype(spec, spec)
        return Policy(d, d, d)
    fields = {}
    for part in spec.split(","):
        key, _, value = part.partition("=")
        name = _KEYS.get(key.strip().lower())
        if name is None or not value.strip():
            raise ArgumentError(f"get_policy: {part.strip()!r} in {spec!r}: expected "
                                "params=, compute= or output= and a dtype", source=user_source())
        fields[name] = _dtype(value, spec)
    return Policy(**fields)


def _dtype(text: str, spec: str) -> str:
    t = text.strip().lower()
    try:
        d = dtype_name(_NAMES.get(t, t))
    except Exception:
        d = None
    if d is not None and is_float(d):
        return d
    raise ArgumentError(f"get_policy: {text.strip()!r} in {spec!r} is not a float dtype "
                            "(float32, float16, bfloat16, or f32, f16, bf16)",
                            source=user_source())


# ------------------------------------------------------------------- finite checks, selects

def all_finite(tree):
    """A bool scalar: every floating-point element of `tree` is finite (jmp.all_finite)."""
    leaves = [x for x in tree_leaves(tree) if _is_float_leaf(x)]
    if not leaves:
        return vnp.asarray(True)
    out = vnp.all(vnp.isfinite(leaves[0]))
    for x in leaves[1:]:
        out = vnp.logical_and(out, vnp.all(vnp.isfinite(x)))
    return out


def select_tree(pred, on_true, on_false):
    """on_true where the scalar `pred` holds, else on_false, leaf by leaf (jmp.select_tree): a
    select in the program, not a host branch."""
    return tree_map(lambda a, b: vnp.where(pred, a, b), on_true, on_false)


# ------------------------------------------------------------------- loss scales
# NamedTuples: pytrees whose every field is state, so they go through a jitted step and a
# checkpoint (vg.save) as they are.

def _scaled(tree, scale):
    return tree_map(lambda x: x * vnp.astype(scale, vnp.result_type(x)), tree)


def _unscaled(tree, scale):
    inv = 1.0 / vnp.asarray(scale, vnp.float32)
    return tree_map(lambda x: x * vnp.astype(inv, vnp.result_type(x)), tree)


class NoOpLossScale(NamedTuple):
    """No scaling (f32 and bf16 training)."""

    @property
    def loss_scale(self):
        return 1.0

    def scale(self, tree):
        return tree

    def unscale(self, tree):
        return tree

    def adjust(self, grads_finite) -> "NoOpLossScale":
        return self


class StaticLossScale(NamedTuple):
    """Multiply the loss by a fixed `loss_scale`, divide the gradients by it."""
    loss_scale: Any

    def scale(self, tree):
        return _scaled(tree, self.loss_scale)

    def unscale(self, tree):
        return _unscaled(tree, self.loss_scale)

    def adjust(self, grads_finite) -> "StaticLossScale":
        return self


class DynamicLossScale(NamedTuple):
    """A loss scale that is divided by `factor` when the gradients overflow and multiplied by
    it after `period` steps with finite gradients in a row (jmp's DynamicLossScale, torch's
    GradScaler), never below `min_loss_scale`. `adjust` is traced code, so the state goes in and
    out of a jitted step."""
    loss_scale: Any
    counter: Any = 0
    period: Any = 2000
    factor: Any = 2.0
    min_loss_scale: Any = 1.0

    def scale(self, tree):
        return _scaled(tree, self.loss_scale)

    def unscale(self, tree):
        return _unscaled(tree, self.loss_scale)

    def adjust(self, grads_finite) -> "DynamicLossScale":
        """The next state: after an overflow the scale divided by `factor` (not below
        min_loss_scale) and the count restarted; after `period` finite steps in a row the
        scale times `factor` and the count restarted."""
        grow = vnp.logical_and(grads_finite, self.counter == self.period - 1)
        scale = vnp.where(grads_finite,
                          vnp.where(grow, self.loss_scale * self.factor, self.loss_scale),
                          vnp.maximum(self.loss_scale / self.factor, self.min_loss_scale))
        counter = vnp.where(grow, 0, vnp.where(grads_finite, self.counter + 1, 0))
        return self._replace(loss_scale=vnp.astype(scale, vnp.float32),
                             counter=vnp.astype(counter, vnp.int32))


# ------------------------------------------------------------------- an optimizer that skips

class LossScaledState(NamedTuple):
    inner: object
    loss_scale: object


def loss_scaled(inner: GradientTransformation, loss_scale) -> GradientTransformation:
    """`inner` for gradients of a loss scaled by the state's loss scale (`loss_scale_of`):
    update unscales them, and where any is not finite gives zero updates and keeps inner's
    state (the step is skipped: a select, inside the jitted step), then adjusts the scale."""

    def init(params):
        return LossScaledState(inner.init(params), loss_scale)

    def update(grads, state, params=None):
        grads = state.loss_scale.unscale(grads)
        finite = all_finite(grads)
        updates, new_inner = inner.update(grads, state.inner, params)
        updates = tree_map(lambda u: vnp.where(finite, u, vnp.zeros_like(u)), updates)
        return updates, LossScaledState(select_tree(finite, new_inner, state.inner),
                                        state.loss_scale.adjust(finite))

    return GradientTransformation(init, update)


def loss_scale_of(opt_state):
    """The loss scale in an optimizer state made by `loss_scaled` (NoOpLossScale elsewhere)."""
    return opt_state.loss_scale if isinstance(opt_state, LossScaledState) else NoOpLossScale()
