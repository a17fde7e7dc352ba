"""vg.optim: optimizers as optax's gradient transformations, over pytrees; jit-able, donate-able.

    opt = vg.optim.adam(1e-3)
    opt_state = opt.init(params)
    updates, opt_state = opt.update(grads, opt_state, params)
    params = vg.optim.apply_updates(params, updates)

A `GradientTransformation` is a pair of pure functions, `init(params) -> state` and
`update(updates, state, params=None) -> (updates, state)`; the updates it returns are what to
*add* to the parameters (the learning rate's sign is already in them), so
`apply_updates(params, updates)` is `params + updates` leaf by leaf. `chain(...)` composes
transformations left to right: `adamw` is `chain(scale_by_adam(...), add_decayed_weights(wd),
scale_by_learning_rate(lr))`, as in optax, and so is every formula and default here.

The step count lives in the state as an int32 array (optax's), not a Python int, so a jitted
step sees the same input types every call and never recompiles because the count changed. A
learning rate may be a schedule: a function of that count (the steps taken before this one)
written with vnp, so inside a jitted step it is a few scalar ops on the device: still no
recompile. Inside `vg.jit` the whole step (gradient, update, apply_updates) is elementwise after
the gradient, so it fuses into one kernel per parameter group (passes/fuse_horizontal.py) and
runs in the step's one submission.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError, DTypeError
from vkgrad.tracer.core import user_source
from vkgrad.tree_util import keystr, tree_leaves, tree_leaves_with_path, tree_map


class GradientTransformation(NamedTuple):
    """optax's pair: init(params) -> state; update(updates, state, params=None) ->
    (updates, state)."""
    init: Callable
    update: Callable


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none (a pytree with no leaves)."""


class ScaleByAdamState(NamedTuple):
    count: Any   # i32[] steps taken
    mu: Any      # first moments, the params' structure
    nu: Any      # second moments


class ScaleByLionState(NamedTuple):
    count: Any
    mu: Any


class TraceState(NamedTuple):
    trace: Any


class ScaleByScheduleState(NamedTuple):
    count: Any


# ------------------------------------------------------------------------------------ checks

def _check_float(tree, who: str, what: str) -> None:
    """Every leaf of `tree` is a floating-point array: an optimizer moves parameters by
    fractional steps, which an integer array would silently truncate."""
    for path, leaf in tree_leaves_with_path(tree):
        dtype = vnp.result_type(leaf)
        if not vnp.issubdtype(dtype, vnp.floating):
            where = f" at {keystr(path)}" if path else ""
            raise DTypeError(f"{who}: the {what}{where} has dtype {dtype}; optimizers update "
                             "floating-point parameters only")


def _check_state(state, cls, who: str) -> None:
    if not isinstance(state, cls):
        raise ArgumentError(f"{who}.update: the state is a {type(state).__name__}, not the "
                            f"{cls.__name__} that {who}.init returns (was it given another "
                            "optimizer's state?)")


def _zeros_like(params, who: str):
    _check_float(params, who, "parameter")
    return tree_map(vnp.zeros_like, params)


def _count(x):
    """A step count (int32 array, int) as float32, for powers and schedules."""
    return vnp.astype(vnp.asarray(x), vnp.float32)


# --------------------------------------------------------------------------- transformations

def identity() -> GradientTransformation:
    return GradientTransformation(lambda params: EmptyState(),
                                  lambda updates, state, params=None: (updates, state))


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """The transformations applied in order, each to the updates the previous one returned;
    the state is the tuple of their states."""

    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(updates, state, params=None):
        if not isinstance(state, tuple) or len(state) != len(transforms) or \
                hasattr(state, "_fields"):
            raise ArgumentError(f"chain.update: the state is a {type(state).__name__}, not the "
                                f"tuple of {len(transforms)} states that this chain's init "
                                "returns (was it given another optimizer's state?)")
        new_states = []
        for t, s in zip(transforms, state):
            updates, s = t.update(updates, s, params)
            new_states.append(s)
        return updates, tuple(new_states)

    return GradientTransformation(init, update)


def scale(step_size: float) -> GradientTransformation:
    """updates * step_size."""

    def update(updates, state, params=None):
        return tree_map(lambda g: g * step_size, updates), state

    return GradientTransformation(lambda params: EmptyState(), update)


def scale_by_schedule(step_size_fn: Callable) -> GradientTransformation:
    """updates * step_size_fn(count), count being the steps taken before this one."""

    def init(params):
        return ScaleByScheduleState(vnp.zeros((), vnp.int32))

    def update(updates, state, params=None):
        _check_state(state, ScaleByScheduleState, "scale_by_schedule")
        step_size = step_size_fn(state.count)
        updates = tree_map(lambda g: g * vnp.astype(step_size, vnp.result_type(g)), updates)
        return updates, ScaleByScheduleState(state.count + 1)

    return GradientTransformation(init, update)


def scale_by_learning_rate(learning_rate, *, flip_sign: bool = True) -> GradientTransformation:
    """updates * -learning_rate (a number or a schedule of the count)."""
    m = -1 if flip_sign else 1
    if callable(learning_rate):
        return scale_by_schedule(lambda count: m * learning_rate(count))
    if isinstance(learning_rate, (str, bytes, bool)) or vnp.ndim(learning_rate) != 0:
        raise ArgumentError(f"learning_rate must be a number, a scalar array or a schedule (a "
                            f"function of the step count), got {learning_rate!r}",
                            source=user_source())
    return scale(m * learning_rate)


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                  eps_root: float = 0.0) -> GradientTransformation:
    """Adam's rescaling (Kingma & Ba; optax.scale_by_adam): mu <- b1 mu + (1 - b1) g,
    nu <- b2 nu + (1 - b2) g^2, t <- t + 1, update = mu_hat / (sqrt(nu_hat + eps_root) + eps)
    with mu_hat = mu / (1 - b1^t), nu_hat = nu / (1 - b2^t)."""

    def init(params):
        return ScaleByAdamState(vnp.zeros((), vnp.int32), _zeros_like(params, "scale_by_adam"),
                                _zeros_like(params, "scale_by_adam"))

    def update(updates, state, params=None):
        _check_state(state, ScaleByAdamState, "scale_by_adam")
        _check_float(updates, "scale_by_adam", "gradient")
        mu = tree_map(lambda g, m: (1 - b1) * g + b1 * m, updates, state.mu)
        nu = tree_map(lambda g, v: (1 - b2) * (g * g) + b2 * v, updates, state.nu)
        count = state.count + 1
        t = _count(count)
        # The bias corrections are scalars: two scalar ops per step, not two per element.
        c1 = 1 - b1 ** t
        c2 = 1 - b2 ** t
        out = tree_map(lambda m, v: (m / c1) / (vnp.sqrt(v / c2 + eps_root) + eps), mu, nu)
        return out, ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


def scale_by_lion(b1: float = 0.9, b2: float = 0.99) -> GradientTransformation:
    """Lion's rescaling (Chen et al. 2023; optax.scale_by_lion): update =
    sign((1 - b1) g + b1 mu), then mu <- (1 - b2) g + b2 mu."""

    def init(params):
        return ScaleByLionState(vnp.zeros((), vnp.int32), _zeros_like(params, "scale_by_lion"))

    def update(updates, state, params=None):
        _check_state(state, ScaleByLionState, "scale_by_lion")
        _check_float(updates, "scale_by_lion", "gradient")
        out = tree_map(lambda g, m: vnp.sign((1 - b1) * g + b1 * m), updates, state.mu)
        mu = tree_map(lambda g, m: (1 - b2) * g + b2 * m, updates, state.mu)
        return out, ScaleByLionState(state.count + 1, mu)

    return GradientTransformation(init, update)


def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
    """Momentum (optax.trace): t <- g + decay * t; the update is t, or g + decay * t with
    nesterov."""

    def init(params):
        return TraceState(_zeros_like(params, "trace"))

    def update(updates, state, params=None):
        _check_state(state, TraceState, "trace")
        f = lambda g, t: g + decay * t
        new = tree_map(f, updates, state.trace)
        out = tree_map(f, updates, new) if nesterov else new
        return out, TraceState(new)

    return GradientTransformation(init, update)


def add_decayed_weights(weight_decay: float = 0.0) -> GradientTransformation:
    """updates + weight_decay * params, on every parameter (optax's without a mask): AdamW's
    decoupled decay when it comes before the learning rate's scaling."""

    def update(updates, state, params=None):
        if params is None:
            raise ArgumentError("add_decayed_weights.update needs the parameters: call "
                                "update(grads, state, params)")
        if weight_decay == 0.0:
            return updates, state
        _check_float(params, "add_decayed_weights", "parameter")
        return tree_map(lambda g, p: g + weight_decay * p, updates, params), state

    return GradientTransformation(lambda params: EmptyState(), update)


def global_norm(tree):
    """sqrt of the sum of every leaf's squares (optax.global_norm)."""
    return vnp.sqrt(sum(vnp.sum(g * g) for g in tree_leaves(tree)))


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Updates scaled to a global norm of at most max_norm: (t / norm) * max_norm when the
    norm is not below max_norm (optax.clip_by_global_norm)."""

    def update(updates, state, params=None):
        norm = global_norm(updates)
        return tree_map(lambda t: vnp.where(norm < max_norm, t, (t / norm) * max_norm),
                        updates), state

    return GradientTransformation(lambda params: EmptyState(), update)


def apply_updates(params, updates):
    """params + updates, leaf by leaf, each result in its parameter's dtype (None stays
    None)."""

    def add(p, u):
        if p is None:
            return None
        dtype = vnp.result_type(p)
        out = p + u
        return out if vnp.result_type(out) == dtype else vnp.astype(out, dtype)

    return tree_map(add, params, updates, is_leaf=lambda x: x is None)


# ------------------------------------------------------------------------------- optimizers

def sgd(learning_rate, momentum: float | None = None,
        nesterov: bool = False) -> GradientTransformation:
    """p <- p - lr * t with t <- g + momentum * t (no state without momentum; optax.sgd)."""
    first = trace(momentum, nesterov) if momentum is not None else identity()
    return chain(first, scale_by_learning_rate(learning_rate))


def adam(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         eps_root: float = 0.0) -> GradientTransformation:
    return chain(scale_by_adam(b1, b2, eps, eps_root), scale_by_learning_rate(learning_rate))


def adamw(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0, weight_decay: float = 1e-4) -> GradientTransformation:
    """Adam with decoupled weight decay: p <- p - lr * (adam's update + weight_decay * p)."""
    return chain(scale_by_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay),
                 scale_by_learning_rate(learning_rate))


def lion(learning_rate, b1: float = 0.9, b2: float = 0.99,
         weight_decay: float = 1e-3) -> GradientTransformation:
    return chain(scale_by_lion(b1, b2), add_decayed_weights(weight_decay),
                 scale_by_learning_rate(learning_rate))


# -------------------------------------------------------------------------------- schedules
# A schedule maps the count of steps taken (an int32 array, or an int) to a value; written with
# vnp, it runs on the device inside a jitted step and at once on a number.

def constant_schedule(value: float) -> Callable:
    return lambda count: value


def linear_schedule(init_value: float, end_value: float, transition_steps: int,
                    transition_begin: int = 0) -> Callable:
    """init_value until transition_begin, then linearly to end_value over transition_steps
    steps, then end_value (optax's polynomial schedule of power 1)."""
    if transition_steps <= 0:
        return constant_schedule(init_value)
    transition_begin = max(0, transition_begin)

    def schedule(count):
        c = vnp.clip(_count(count) - transition_begin, 0, transition_steps)
        return (init_value - end_value) * (1 - c / transition_steps) + end_value

    return schedule


def cosine_decay_schedule(init_value: float, decay_steps: int, alpha: float = 0.0,
                          exponent: float = 1.0) -> Callable:
    """init_value * ((1 - alpha) * (0.5 * (1 + cos(pi * min(t, T) / T))) ** exponent + alpha)."""
    if not decay_steps > 0:
        raise ArgumentError(f"cosine_decay_schedule needs positive decay_steps, not {decay_steps}")

    def schedule(count):
        c = vnp.minimum(_count(count), decay_steps)
        cosine = 0.5 * (1 + vnp.cos(math.pi * c / decay_steps))
        return init_value * ((1 - alpha) * cosine ** exponent + alpha)

    return schedule


def join_schedules(schedules, boundaries) -> Callable:
    """schedules[i] from boundaries[i-1] on, each given the steps since its boundary."""

    def schedule(count):
        out = schedules[0](count)
        for boundary, s in zip(boundaries, schedules[1:]):
            out = vnp.where(_count(count) < boundary, out, s(_count(count) - boundary))
        return out

    return schedule


def warmup_cosine_decay_schedule(init_value: float, peak_value: float, warmup_steps: int,
                                 decay_steps: int, end_value: float = 0.0,
                                 exponent: float = 1.0) -> Callable:
    """Linear from init_value to peak_value over warmup_steps, then a cosine decay to end_value
    at decay_steps (counted from step 0, warmup included)."""
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules([linear_schedule(init_value, peak_value, warmup_steps),
                           cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha,
                                                 exponent)], [warmup_steps])


def exponential_decay(init_value: float, transition_steps: int, decay_rate: float,
                      transition_begin: int = 0, staircase: bool = False,
                      end_value: float | None = None) -> Callable:
    """init_value * decay_rate ** ((t - transition_begin) / transition_steps) (the exponent
    floored when staircase), init_value before transition_begin, bounded by end_value."""
    if transition_steps <= 0 or decay_rate == 0:
        return constant_schedule(init_value)
    transition_begin = max(0, transition_begin)

    def schedule(count):
        c = _count(count) - transition_begin
        p = c / transition_steps
        if staircase:
            p = vnp.floor(p)
        out = vnp.where(c <= 0, init_value, init_value * vnp.power(decay_rate, p))
        if end_value is not None:
            out = (vnp.maximum if decay_rate < 1.0 else vnp.minimum)(out, end_value)
        return out

    return schedule


__all__ = ["GradientTransformation", "EmptyState", "ScaleByAdamState", "ScaleByLionState",
           "TraceState", "ScaleByScheduleState", "identity", "chain", "scale",
           "scale_by_schedule", "scale_by_learning_rate", "scale_by_adam", "scale_by_lion",
           "trace", "add_decayed_weights", "global_norm", "clip_by_global_norm",
           "apply_updates", "sgd", "adam", "adamw", "lion", "constant_schedule",
           "linear_schedule", "cosine_decay_schedule", "join_schedules",
           "warmup_cosine_decay_schedule", "exponential_decay"]
