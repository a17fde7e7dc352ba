"""Neural-network building blocks, written with vkgrad.numpy; attention runs on the
flash-attention primitive (vkgrad/primitives/attention.py).

Layers are plain functions of a params pytree (dicts of arrays) and inputs, as in JAX: the
`init_*` functions make the params from a numpy Generator (float32), the apply functions are
traced, differentiated and jitted like any other vnp code.
"""

from __future__ import annotations

import math

import numpy as np

from vkgrad import numpy as vnp
from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, DTypeError
from vkgrad.numpy import log_softmax, logsumexp, one_hot, softmax  # noqa: F401

__all__ = ["relu", "sigmoid", "silu", "gelu", "softmax", "log_softmax", "logsumexp", "one_hot",
           "cross_entropy", "mse", "layer_norm", "rms_norm", "embedding", "linear",
           "flash_attention", "attention_block", "init_attention_block"]


def relu(x):
    return vnp.maximum(x, 0)


def sigmoid(x):
    # 1/(1+exp(-x)) overflows exp for x << 0; the tanh form is bounded everywhere.
    return 0.5 * (vnp.tanh(0.5 * x) + 1)


def silu(x):
    """x * sigmoid(x) (swish)."""
    return x * sigmoid(x)


def gelu(x):
    """GELU, tanh form (GPT-2's; jax.nn.gelu(approximate=True))."""
    return 0.5 * x * (1.0 + vnp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def cross_entropy(logits, labels):
    """Mean over the batch of -log softmax(logits)[label]; labels are integer class ids, one
    per row of logits (the class axis is the last)."""
    logp = vnp.log_softmax(logits, axis=-1)
    picked = vnp.sum(logp * vnp.one_hot(labels, logp.shape[-1], dtype=logp.dtype), axis=-1)
    return -vnp.mean(picked)


def mse(pred, target):
    return vnp.mean(vnp.square(pred - target))


# ----------------------------------------------------------------------------------- layers

def layer_norm(x, weight=None, bias=None, eps: float = 1e-5):
    """Normalize over the last axis to zero mean and unit variance, then scale and shift."""
    mu = vnp.mean(x, axis=-1, keepdims=True)
    d = x - mu
    y = d / vnp.sqrt(vnp.mean(d * d, axis=-1, keepdims=True) + eps)
    if weight is not None:
        y = y * weight
    return y + bias if bias is not None else y


def rms_norm(x, weight=None, eps: float = 1e-6):
    """x / sqrt(mean(x^2) + eps) over the last axis, then scaled (Mamba's and LLaMA's norm)."""
    y = x / vnp.sqrt(vnp.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * weight if weight is not None else y


def embedding(table, ids):
    """Rows of `table` [vocab, d] at integer `ids` (any shape): [*ids.shape, d]."""
    return vnp.take(table, ids, axis=0)


def linear(params, x):
    """x @ params["w"] (+ params["b"] when present)."""
    y = x @ params["w"]
    return y + params["b"] if "b" in params else y


# ----------------------------------------------------------------------------------- attention

def flash_attention(q, k, v, causal: bool = False, scale: float | None = None,
                    layout: str = "BHLD"):
    """softmax(scale * q k^T, masked) v without materializing the scores (FlashAttention-2).

    layout "BHLD" (default): q [batch, heads, Lq, head_dim], k and v [batch, heads, Lk,
    head_dim]; "BLHD": [batch, length, heads, head_dim] (the layout a projection reshaped to
    heads gives), transposed to BHLD and back (two copies a fused kernel makes).
    scale defaults to 1/sqrt(head_dim). head_dim must be 16, 32, 64 or 128; float32 on Vulkan.
    causal: query i sees key j iff j <= i + (Lk - Lq), the mask aligned at the bottom right
    (flash-attn >= 2.1): with Lq == Lk the usual lower triangle; queries that see no key (Lq >
    Lk) give 0."""
    if layout not in ("BHLD", "BLHD"):
        raise ArgumentError(f"flash_attention: layout={layout!r}; use 'BHLD' or 'BLHD'")
    q, k, v = vnp.asarray(q), vnp.asarray(k), vnp.asarray(v)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not np.issubdtype(t.dtype, np.floating):
            raise DTypeError(f"flash_attention: {name} must be a float array, got {t.dtype}")
    if layout == "BLHD":
        q, k, v = (vnp.transpose(t, (0, 2, 1, 3)) if t.ndim == 4 else t for t in (q, k, v))
    d = q.shape[-1] if q.ndim else 1
    o, _ = P.flash_attention(q, k, v, causal, 1.0 / math.sqrt(d) if scale is None else scale)
    return vnp.transpose(o, (0, 2, 1, 3)) if layout == "BLHD" else o


def init_attention_block(rng: np.random.Generator, d_model: int, d_ff: int | None = None):
    """Params of a pre-norm transformer block: attention and a GELU MLP, each with its norm."""
    d_ff = d_ff or 4 * d_model
    w = lambda i, o: (rng.standard_normal((i, o)) / math.sqrt(i)).astype(np.float32)
    zeros = lambda n: np.zeros(n, np.float32)
    ones = lambda n: np.ones(n, np.float32)
    return {"ln1": {"w": ones(d_model), "b": zeros(d_model)},
            "qkv": {"w": w(d_model, 3 * d_model), "b": zeros(3 * d_model)},
            "proj": {"w": w(d_model, d_model), "b": zeros(d_model)},
            "ln2": {"w": ones(d_model), "b": zeros(d_model)},
            "fc": {"w": w(d_model, d_ff), "b": zeros(d_ff)},
            "out": {"w": w(d_ff, d_model), "b": zeros(d_model)}}


def attention_block(params, x, heads: int, causal: bool = True):
    """One pre-norm transformer block on x [batch, L, d_model]:
        x + proj(attention(ln1(x))), then + out(gelu(fc(ln2(.))))."""
    b, length, d = x.shape
    if d % heads:
        raise ArgumentError(f"attention_block: d_model {d} is not a multiple of heads {heads}")
    h = layer_norm(x, params["ln1"]["w"], params["ln1"]["b"])
    qkv = linear(params["qkv"], h).reshape(b, length, 3, heads, d // heads)
    q, k, v = (vnp.transpose(qkv[:, :, i], (0, 2, 1, 3)) for i in range(3))
    a = flash_attention(q, k, v, causal=causal)
    x = x + linear(params["proj"], vnp.transpose(a, (0, 2, 1, 3)).reshape(b, length, d))
    h = layer_norm(x, params["ln2"]["w"], params["ln2"]["b"])
    return x + linear(params["out"], gelu(linear(params["fc"], h)))
