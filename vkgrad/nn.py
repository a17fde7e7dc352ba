"""Neural-network helpers built from vkgrad.numpy (no primitives of their own)."""

from __future__ import annotations

from vkgrad import numpy as vnp
from vkgrad.numpy import log_softmax, logsumexp, one_hot, softmax  # noqa: F401

__all__ = ["relu", "sigmoid", "softmax", "log_softmax", "logsumexp", "one_hot",
           "cross_entropy", "mse"]


def relu(x):
    return vnp.maximum(x, 0)


def sigmoid(x):
    # 1/(1+exp(-x)) overflows exp for x << 0; the tanh form is bounded everywhere.
    return 0.5 * (vnp.tanh(0.5 * x) + 1)


def cross_entropy(logits, labels):
    """Mean over the batch of -log softmax(logits)[label]; labels are integer class ids, one
    per row of logits (the class axis is the last)."""
    logp = vnp.log_softmax(logits, axis=-1)
    picked = vnp.sum(logp * vnp.one_hot(labels, logp.shape[-1], dtype=logp.dtype), axis=-1)
    return -vnp.mean(picked)


def mse(pred, target):
    return vnp.mean(vnp.square(pred - target))
