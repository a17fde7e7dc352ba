"""Flash attention: one primitive for the forward, one for the backward, each a hand-written
kernel on Vulkan (vkgrad/lowering/attention.py) and plain numpy here.

    flash_attention[causal, scale](q, k, v) -> (o, lse)
        q: [B, H, Lq, D]; k, v: [B, H, Lk, D]; o: [B, H, Lq, D]; lse: [B, H, Lq]
        s = scale * q k^T, masked; lse = log(sum(exp(s))) per query (the row log-sum-exp, saved
        for the backward); o = exp(s - lse) v.
    flash_attention_bwd[causal, scale](q, k, v, o, lse, do, dlse) -> (dq, dk, dv)
        FlashAttention-2's backward: P = exp(s - lse) recomputed, delta = rowsum(do * o) - dlse,
        dv = P^T do, ds = P * (do v^T - delta), dq = scale ds k, dk = scale ds^T q.

The causal mask is aligned at the bottom right (as flash-attn >= 2.1): query i sees key j iff
j <= i + (Lk - Lq), so the last query sees every key. With Lq == Lk that is the usual lower
triangle; with Lq > Lk the first Lq - Lk queries see no key: their output is 0 and their lse is
-inf (and they pass no gradient).

The user-facing function is `vg.nn.flash_attention`, which returns o only; `lse` is the
residual the backward reads. Its cotangent `dlse` is zero in a first derivative and not in a
second one (d lse / d s = P, which only shifts delta), so the backward takes it as an input.

The backward primitive's own VJP is a composition of ordinary primitives (it materializes the
[Lq, Lk] probabilities: second derivatives are for checking and small models, not speed), so
grad-of-grad and forward mode (jvp, which vkgrad derives from the backward) work through it.
"""

from __future__ import annotations

import numpy as np

from vkgrad.dtypes import FLOAT_DTYPES
from vkgrad.errors import DTypeError, ShapeError
from vkgrad.ir.core import Primitive, TensorType, abstract_eval_rules, batching_rules, vjp_rules
from vkgrad.ir.interpreter import impls
from vkgrad.primitives import lax as L
from vkgrad.tracer.core import bind

def _check_qkv(name, q, k, v, *more):
    for arg, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 4:
            raise ShapeError(f"{name}: {arg} must be [batch, heads, length, head_dim], got {t}")
        if t.dtype not in FLOAT_DTYPES:
            raise DTypeError(f"{name}: {arg} must be a float array, got {t}")
    if len({q.dtype, k.dtype, v.dtype, *(t.dtype for t in more)}) > 1:
        raise DTypeError(f"{name}: q, k, v have different dtypes ({q}, {k}, {v})")
    if k.shape != v.shape:
        raise ShapeError(f"{name}: k {k} and v {v} must have the same shape")
    if q.shape[:2] != k.shape[:2]:
        raise ShapeError(f"{name}: q {q} and k {k} differ in batch or heads "
                         f"({q.shape[:2]} vs {k.shape[:2]})")
    if q.shape[3] != k.shape[3]:
        raise ShapeError(f"{name}: q {q} and k {k} differ in head_dim ({q.shape[3]} vs "
                         f"{k.shape[3]})")


def _mask(lq, lk, causal):
    """bool [Lq, Lk]: which keys each query sees (bottom-right aligned causal mask)."""
    if not causal:
        return np.ones((lq, lk), bool)
    return np.arange(lk)[None, :] <= np.arange(lq)[:, None] + (lk - lq)


def _scores(q, k, causal, scale):
    s = scale * np.einsum("bhqd,bhkd->bhqk", q, k)
    return np.where(_mask(q.shape[2], k.shape[2], causal), s, -np.inf)


def _probabilities(s, lse):
    """exp(s - lse), 0 where masked (s = -inf) and on rows without keys (lse = -inf); NaN at
    the keys a row with a NaN score sees (its lse is NaN), as the kernel gives."""
    zero = (lse == -np.inf)[..., None] | (s == -np.inf)
    with np.errstate(invalid="ignore"):
        return np.where(zero, 0, np.exp(s - np.where(zero, 0, lse[..., None]))).astype(s.dtype)


flash_attention_p = Primitive("flash_attention", ("pure",), multiple_results=True)


def _flash_rule(q, k, v, *, causal, scale):
    _check_qkv("flash_attention", q, k, v)
    return [TensorType(q.shape, q.dtype), TensorType(q.shape[:3], q.dtype)]


def _flash_impl(q, k, v, *, causal, scale):
    s = _scores(q, k, causal, scale)
    # NaN on a row with a NaN score: it stays NaN. initial=-inf: with no keys at all (Lk = 0)
    # every row is a row without keys, o = 0 and lse = -inf, as the Vulkan kernel gives (np.max
    # of an empty axis raises)
    m = np.max(s, axis=-1, initial=-np.inf)
    empty = m == -np.inf                   # every key masked: o = 0, lse = -inf
    safe = np.where(empty, 0, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = safe + np.log(np.sum(np.exp(s - safe[..., None]), axis=-1))
    lse = np.where(empty, -np.inf, lse).astype(q.dtype)
    return _probabilities(s, lse) @ v, lse


abstract_eval_rules[flash_attention_p] = _flash_rule
impls[flash_attention_p] = _flash_impl
vjp_rules[flash_attention_p] = lambda gs, ans, q, k, v, *, causal, scale: tuple(
    flash_attention_bwd(q, k, v, ans[0], ans[1], gs[0], gs[1], causal, scale))


def _flash_batcher(prim):
    """Every operand and result is per (batch, head): the mapped axis joins the batch."""
    def rule(args, dims, *, causal, scale):
        size = L.mapped_size(args, dims)
        outs = bind(prim, *(L.merge_batch(x, d, size) for x, d in zip(args, dims)),
                    causal=causal, scale=scale)
        return [L.split_batch(o, size) for o in outs], [0] * len(outs)
    return rule


batching_rules[flash_attention_p] = _flash_batcher(flash_attention_p)

flash_attention_bwd_p = Primitive("flash_attention_bwd", ("pure",), multiple_results=True)


def _flash_bwd_rule(q, k, v, o, lse, do, dlse, *, causal, scale):
    _check_qkv("flash_attention_bwd", q, k, v, o, lse, do, dlse)
    if o.shape != q.shape or do.shape != q.shape or lse.shape != q.shape[:3] or \
            dlse.shape != q.shape[:3]:
        raise ShapeError(f"flash_attention_bwd: o {o} and do {do} must have q's shape {q}, lse "
                         f"{lse} and dlse {dlse} its first three dims")
    return [TensorType(q.shape, q.dtype), TensorType(k.shape, k.dtype),
            TensorType(v.shape, v.dtype)]


def _flash_bwd_impl(q, k, v, o, lse, do, dlse, *, causal, scale):
    p = _probabilities(_scores(q, k, causal, scale), lse)
    dv = np.einsum("bhqk,bhqd->bhkd", p, do)
    dp = np.einsum("bhqd,bhkd->bhqk", do, v)
    delta = np.sum(do * o, axis=-1, keepdims=True) - dlse[..., None]
    ds = p * (dp - delta)
    dq = scale * np.einsum("bhqk,bhkd->bhqd", ds, k)
    dk = scale * np.einsum("bhqk,bhqd->bhkd", ds, q)
    return dq, dk, dv


def _flash_bwd_vjp(gs, ans, q, k, v, o, lse, do, dlse, *, causal, scale):
    """The VJP of (dq, dk, dv) = flash_attention_bwd(q, k, v, o, lse, do, dlse), as plain IR on
    [B*H, L, D] batches (see _flash_bwd_impl for the forward of this rule):
        P = exp(S - lse) masked, S = scale q k^T, delta = rowsum(do o) - dlse, dP = do v^T,
        dS = P (dP - delta), dv = P^T do, dq = scale dS k, dk = scale dS^T q."""
    gq, gk, gv = gs
    b, h, lq, d = q.shape
    lk = k.shape[2]
    flat = lambda x, n: L.reshape(x, (b * h, n, d))
    q3, k3, v3, o3, do3 = flat(q, lq), flat(k, lk), flat(v, lk), flat(o, lq), flat(do, lq)
    gq3, gk3, gv3 = flat(gq, lq), flat(gk, lk), flat(gv, lk)
    lse3 = L.reshape(lse, (b * h, lq, 1))
    keep = L.broadcast_to(L.le(L.iota((lq, lk), 1), L.add(L.iota((lq, lk), 0), lk - lq))
                          if causal else L.eq(L.iota((lq, lk), 0), L.iota((lq, lk), 0)),
                          (b * h, lq, lk))
    s3 = L.mul(L.matmul(q3, k3, False, True), scale)
    lse_safe = L.select(L.eq(lse3, float("-inf")), 0.0, lse3)
    p = L.select(keep, L.exp(L.sub(L.select(keep, s3, 0.0), lse_safe)), 0.0)
    rowsum = lambda x: L.reduce_sum(x, (2,))
    delta = L.sub(L.reshape(rowsum(L.mul(do3, o3)), (b * h, lq, 1)),
                  L.reshape(dlse, (b * h, lq, 1)))
    dp = L.matmul(do3, v3, False, True)
    ds = L.mul(p, L.sub(dp, delta))
    # cotangents of the intermediates, from the three outputs back
    g_ds = L.mul(L.add(L.matmul(gq3, k3, False, True), L.matmul(q3, gk3, False, True)), scale)
    g_p = L.add(L.matmul(do3, gv3, False, True), L.mul(g_ds, L.sub(dp, delta)))
    g_dp = L.mul(g_ds, p)
    g_delta = L.neg(L.reshape(rowsum(g_dp), (b * h, lq, 1)))
    g_s = L.mul(g_p, p)                                   # through exp(S - lse), masked
    g_lse = L.neg(rowsum(g_s))
    dq = L.add(L.mul(L.matmul(g_s, k3), scale), L.mul(L.matmul(ds, gk3), scale))
    dk = L.add(L.mul(L.matmul(g_s, q3, True, False), scale),
               L.mul(L.matmul(ds, gq3, True, False), scale))
    dv = L.matmul(g_dp, do3, True, False)
    ddo = L.add(L.add(L.matmul(p, gv3), L.matmul(g_dp, v3)), L.mul(g_delta, o3))
    do_ = L.mul(g_delta, do3)
    unflat = lambda x, n: L.reshape(x, (b, h, n, d))
    return (unflat(dq, lq), unflat(dk, lk), unflat(dv, lk), unflat(do_, lq),
            L.reshape(g_lse, (b, h, lq)), unflat(ddo, lq), L.reshape(L.neg(g_delta), (b, h, lq)))


abstract_eval_rules[flash_attention_bwd_p] = _flash_bwd_rule
impls[flash_attention_bwd_p] = _flash_bwd_impl
vjp_rules[flash_attention_bwd_p] = _flash_bwd_vjp
batching_rules[flash_attention_bwd_p] = _flash_batcher(flash_attention_bwd_p)


def flash_attention(q, k, v, causal: bool, scale: float):
    """(o, lse) of flash_attention_p."""
    return bind(flash_attention_p, q, k, v, causal=bool(causal), scale=float(scale))


def flash_attention_bwd(q, k, v, o, lse, do, dlse, causal: bool, scale: float):
    return bind(flash_attention_bwd_p, q, k, v, o, lse, do, dlse, causal=bool(causal),
                scale=float(scale))
