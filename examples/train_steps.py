"""Two training steps that the compiler's fusion is measured on (bench/bench_fusion.py, tests,
the README's plan dump): an MLP classifier and a pre-norm transformer block, each with Adam.

    import examples.train_steps as ts
    opt, step = ts.mlp_step()                            # step(params, opt_state, x, y)
    params, x, y = ts.mlp_data([784, 256, 256, 10], 128)
    print(vg.jit(step).lower(params, opt.init(params), x, y).as_text("plan"))

The transformer block computes attention the plain way, softmax(q k^T / sqrt(d), causal) v,
materializing the [batch, heads, L, L] scores (what the flash-attention kernels replace).
"""

from __future__ import annotations

import math

import numpy as np

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp


def mlp_params(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((a, b)).astype(np.float32) * np.float32(math.sqrt(2 / a)),
             np.zeros(b, np.float32)) for a, b in zip(sizes[:-1], sizes[1:])]


def mlp_data(sizes, batch, seed=1):
    """(params, x, labels) for an MLP of `sizes` and one batch."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int32)
    return mlp_params(sizes), x, y


def mlp_loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = vnp.maximum(h, 0.0)
    return nn.cross_entropy(h, y)


def mlp_step(lr=1e-3):
    """(optimizer, step): forward, backward and Adam of the MLP, one program."""
    opt = vg.optim.adam(lr)

    def step(params, opt_state, x, y):
        loss, grads = vg.value_and_grad(mlp_loss)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = vg.optim.apply_updates(params, updates)
        return params, opt_state, loss

    return opt, step


def plain_attention_block(params, x, heads: int):
    """nn.attention_block with attention written as softmax(q k^T / sqrt(d), causal) v."""
    b, length, d = x.shape
    hd = d // heads
    h = nn.layer_norm(x, params["ln1"]["w"], params["ln1"]["b"])
    qkv = nn.linear(params["qkv"], h).reshape(b, length, 3, heads, hd)
    q, k, v = (vnp.transpose(qkv[:, :, i], (0, 2, 1, 3)) for i in range(3))
    s = (q @ vnp.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(hd))
    i, j = vnp.arange(length)[:, None], vnp.arange(length)[None, :]
    s = vnp.where(j <= i, s, -1e30)
    a = vnp.softmax(s, axis=-1) @ v
    x = x + nn.linear(params["proj"], vnp.transpose(a, (0, 2, 1, 3)).reshape(b, length, d))
    h = nn.layer_norm(x, params["ln2"]["w"], params["ln2"]["b"])
    return x + nn.linear(params["out"], nn.gelu(nn.linear(params["fc"], h)))


def transformer_data(d, heads, length, batch, seed=0):
    """(params, x, target) of a block of width d."""
    rng = np.random.default_rng(seed)
    params = nn.init_attention_block(rng, d)
    x = rng.standard_normal((batch, length, d)).astype(np.float32)
    y = rng.standard_normal((batch, length, d)).astype(np.float32)
    return params, x, y


def transformer_loss(params, x, y, heads: int):
    """Mean square error of the block's output against a target."""
    return vnp.mean(vnp.square(plain_attention_block(params, x, heads) - y))


def transformer_step(heads, lr=1e-4):
    """(optimizer, step): the block's loss, its gradient and Adam, one program."""
    opt = vg.optim.adam(lr)

    def step(params, opt_state, x, y):
        loss, grads = vg.value_and_grad(
            lambda p, x, y: transformer_loss(p, x, y, heads))(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = vg.optim.apply_updates(params, updates)
        return params, opt_state, loss

    return opt, step
