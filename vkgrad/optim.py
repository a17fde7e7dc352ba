"""Optimizers as pairs of pure functions over pytrees, like optax: jit-able, donate-able.

    init, update = vg.optim.adam(1e-3)
    opt_state = init(params)
    params, opt_state = update(grads, opt_state, params)

The step count lives in the state as a float32 array, not a Python int, so a jitted step sees
the same input types every call and never recompiles because the count changed. A learning-rate
schedule is a function of that count written with vnp (`warmup_cosine`), so it is computed
inside the step, on the device, from the count: still no recompile.

    opt = vg.optim.adam(vg.optim.warmup_cosine(1e-3, 100, 2000), weight_decay=0.1)   # AdamW
    grads, norm = vg.optim.clip_by_global_norm(grads, 1.0)
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

import vkgrad.numpy as vnp
from vkgrad.tree_util import tree_leaves, tree_map


class Optimizer(NamedTuple):
    init: Callable
    update: Callable


def sgd(lr: float, momentum: float = 0.0) -> Optimizer:
    """p <- p - lr * v with v <- momentum * v + g (torch.optim.SGD's convention); no state at
    momentum 0."""

    def init(params):
        if momentum == 0.0:
            return ()
        return tree_map(lambda p: vnp.zeros_like(p), params)

    def update(grads, state, params):
        if momentum == 0.0:
            return tree_map(lambda p, g: p - lr * g, params, grads), ()
        velocity = tree_map(lambda v, g: momentum * v + g, state, grads)
        return tree_map(lambda p, v: p - lr * v, params, velocity), velocity

    return Optimizer(init, update)


class AdamState(NamedTuple):
    count: object   # f32[] steps taken
    mu: object      # first moments, params' structure
    nu: object      # second moments


def adam(lr: float | Callable, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         weight_decay: float = 0.0) -> Optimizer:
    """Adam with bias correction (Kingma & Ba; optax.adam's update). weight_decay > 0 is the
    decoupled decay of AdamW: p <- p - lr * (update + weight_decay * p), on every parameter.
    lr: a number, or a schedule: a function of the steps taken before this one (an f32 scalar)
    written with vnp, such as `warmup_cosine(...)`."""

    def init(params):
        zeros = lambda p: vnp.zeros_like(p)
        return AdamState(np.zeros((), np.float32), tree_map(zeros, params), tree_map(zeros, params))

    def update(grads, state, params):
        count = state.count + 1.0
        mu = tree_map(lambda m, g: b1 * m + (1.0 - b1) * g, state.mu, grads)
        nu = tree_map(lambda v, g: b2 * v + (1.0 - b2) * (g * g), state.nu, grads)
        # Bias corrections as scalars: two scalar ops per step, not two per parameter element.
        c1 = 1.0 / (1.0 - b1 ** count)
        c2 = 1.0 / (1.0 - b2 ** count)
        rate = lr(state.count) if callable(lr) else lr

        def step(p, m, v):
            u = (m * c1) / (vnp.sqrt(v * c2) + eps)
            if weight_decay:
                u = u + weight_decay * p
            return p - rate * u

        return tree_map(step, params, mu, nu), AdamState(count, mu, nu)

    return Optimizer(init, update)


def warmup_cosine(peak: float, warmup_steps: int, total_steps: int, final: float = 0.0):
    """A schedule for `adam(lr=...)`: the rate for the step after `count` steps rises linearly
    to `peak` over the first `warmup_steps` steps (peak * (count + 1) / warmup_steps), then
    falls along half a cosine to `final` at `total_steps`, and stays there. Written with vnp:
    inside a jitted step it is a few scalar ops on the device-resident count; on a number
    (np.float32(step)) it computes at once, so a training loop can log the same rate."""

    def schedule(count):
        warm = peak * (count + 1.0) / max(1, warmup_steps)
        t = vnp.clip((count - warmup_steps) / max(1, total_steps - warmup_steps), 0.0, 1.0)
        decay = final + (peak - final) * 0.5 * (1.0 + vnp.cos(math.pi * t))
        return vnp.where(count < warmup_steps, warm, decay)

    return schedule


def clip_by_global_norm(grads, max_norm: float):
    """(grads scaled to a global norm of at most max_norm, the global norm before clipping):
    norm = sqrt(sum of every leaf's squares); leaves are multiplied by max_norm / norm when
    norm > max_norm (optax.clip_by_global_norm's rule)."""
    norm = vnp.sqrt(sum(vnp.sum(g * g) for g in tree_leaves(grads)))
    scale = vnp.where(norm < max_norm, 1.0, max_norm / norm)
    return tree_map(lambda g: g * scale, grads), norm
