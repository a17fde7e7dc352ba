"""Optimizers as pairs of pure functions over pytrees, like optax: jit-able, donate-able.

    init, update = vg.optim.adam(1e-3)
    opt_state = init(params)
    params, opt_state = update(grads, opt_state, params)

The step count lives in the state as a float32 array, not a Python int, so a jitted step sees
the same input types every call and never recompiles because the count changed.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

import vkgrad.numpy as vnp
from vkgrad.tree_util import tree_map


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


def adam(lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         weight_decay: float = 0.0) -> Optimizer:
    """Adam with bias correction (Kingma & Ba; optax.adam's update). weight_decay > 0 is the
    decoupled decay of AdamW: p <- p - lr * (update + weight_decay * p)."""

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

        def step(p, m, v):
            u = (m * c1) / (vnp.sqrt(v * c2) + eps)
            if weight_decay:
                u = u + weight_decay * p
            return p - lr * u

        return tree_map(step, params, mu, nu), AdamState(count, mu, nu)

    return Optimizer(init, update)
