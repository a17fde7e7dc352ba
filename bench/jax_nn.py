"""vkgrad.nn's blocks written with jax.numpy, op for op, for the benchmarks' JAX peers
(bench_lm.py, bench_transformer.py): the same math, so the same parameters give the same loss
(bench_lm.py prints both sides' first loss to show it)."""

import math

import jax
import jax.numpy as jnp


def layer_norm(x, w, b, eps=1e-5):
    d = x - jnp.mean(x, -1, keepdims=True)
    return d / jnp.sqrt(jnp.mean(d * d, -1, keepdims=True) + eps) * w + b


def rms_norm(x, w, eps=1e-6):
    return x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * w


def linear(p, x):
    return x @ p["w"] + p["b"] if "b" in p else x @ p["w"]


def gelu(x):
    return 0.5 * x * (1.0 + jnp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def silu(x):
    return x * jax.nn.sigmoid(x)


def attention_block(p, x, heads):
    b, length, d = x.shape
    hd = d // heads
    h = layer_norm(x, p["ln1"]["w"], p["ln1"]["b"])
    qkv = linear(p["qkv"], h).reshape(b, length, 3, heads, hd)
    q, k, v = (jnp.transpose(qkv[:, :, i], (0, 2, 1, 3)) for i in range(3))
    s = (q @ jnp.swapaxes(k, -1, -2)) / math.sqrt(hd)
    mask = jnp.arange(length)[None, :] <= jnp.arange(length)[:, None]
    a = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1) @ v
    x = x + linear(p["proj"], jnp.transpose(a, (0, 2, 1, 3)).reshape(b, length, d))
    h = layer_norm(x, p["ln2"]["w"], p["ln2"]["b"])
    return x + linear(p["out"], gelu(linear(p["fc"], h)))


def selective_scan(u, delta, A, B, C, D, z, delta_bias):
    """u, delta, z [b, d, L]; A [d, N]; B, C [b, N, L]: mamba's selective_scan_ref with
    softplus(delta + bias), D and z gating; the recurrence by lax.associative_scan."""
    dt = jax.nn.softplus(delta + delta_bias[:, None])                   # [b, d, L]
    dA = jnp.exp(dt[..., None] * A[None, :, None, :])                   # [b, d, L, N]
    dBu = (dt * u)[..., None] * jnp.transpose(B, (0, 2, 1))[:, None]     # [b, d, L, N]
    combine = lambda l, r: (l[0] * r[0], r[0] * l[1] + r[1])
    _, h = jax.lax.associative_scan(combine, (dA, dBu), axis=2)
    y = jnp.einsum("bdln,bnl->bdl", h, C) + D[:, None] * u
    return y * silu(z)


def mamba_block(p, x):
    d_inner, d_state = p["D"].shape[0], p["A_log"].shape[1]
    dt_rank = p["dt_proj"]["w"].shape[0]
    length = x.shape[1]
    h = rms_norm(x, p["norm"]["w"])
    xz = h @ p["in_proj"]["w"]
    xi, z = xz[..., :d_inner], xz[..., d_inner:]
    k = p["conv"]["w"].shape[1]
    xp = jnp.pad(xi, ((0, 0), (k - 1, 0), (0, 0)))
    xi = silu(sum(xp[:, i:i + length, :] * p["conv"]["w"][:, i] for i in range(k))
              + p["conv"]["b"])
    dbc = xi @ p["x_proj"]["w"]
    dt = dbc[..., :dt_rank] @ p["dt_proj"]["w"]
    B = jnp.transpose(dbc[..., dt_rank:dt_rank + d_state], (0, 2, 1))
    C = jnp.transpose(dbc[..., dt_rank + d_state:], (0, 2, 1))
    bdl = lambda t: jnp.transpose(t, (0, 2, 1))
    y = selective_scan(bdl(xi), bdl(dt), -jnp.exp(p["A_log"]), B, C, p["D"], bdl(z),
                       p["dt_proj"]["b"])
    return x + bdl(y) @ p["out_proj"]["w"]


def gru(p, x):
    """vg.nn.gru on x [batch, L, d]: the input projections before the loop, lax.scan over L
    (torch.nn.GRU's equations); the outputs [batch, L, hidden]."""
    xp = x @ p["w_x"] + p["b_x"]

    def step(h, xt):
        xr, xz, xn = jnp.split(xt, 3, axis=-1)
        hr, hz, hn = jnp.split(h @ p["w_h"] + p["b_h"], 3, axis=-1)
        r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
        n = jnp.tanh(xn + r * hn)
        h = (1.0 - z) * n + z * h
        return h, h

    h0 = jnp.zeros((x.shape[0], p["w_h"].shape[0]), x.dtype)
    return jnp.swapaxes(jax.lax.scan(step, h0, jnp.swapaxes(xp, 0, 1))[1], 0, 1)
