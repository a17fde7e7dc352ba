"""Mamba's selective scan: a forward primitive and a backward primitive, each a hand-written
kernel on Vulkan (vkgrad/lowering/scan.py) and a sequential loop in numpy here.

    selective_scan[has_D, has_z, has_bias, softplus, chunk](u, delta, A, B, C, [D], [z],
                                                           [delta_bias]) -> (out, states)
        exactly mamba's `selective_scan_ref` (state-spaces/mamba,
        mamba_ssm/ops/selective_scan_interface.py):
            dt = delta + delta_bias;  dt = softplus(dt) if softplus
            h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t        (h_{-1} = 0, per (batch, dim, n))
            y_t = sum_n C_t h_t + D u_t;  out = y * silu(z)
        u, delta, z: [batch, dim, L]; A: [dim, N]; B, C: [batch, N, L] (input-dependent) or
        [dim, N] (fixed); D, delta_bias: [dim]. Bracketed inputs are present when their flag is.
        states: [batch, ceil(L / chunk), dim, N], h at the end of each chunk of `chunk` steps
        (the last one is mamba's last_state): the residual the backward restarts from.
    selective_scan_bwd[same params](u, delta, A, B, C, [D], [z], [delta_bias], states, dout)
        -> (du, ddelta, dA, dB, dC, [dD], [dz], [ddelta_bias]), dB/dC in the form of B/C.

The user-facing function is `vg.nn.selective_scan`. `states` is a residual, not part of the
user's result, so its cotangent is zero in a first derivative. The backward primitive has no
VJP rule: a second derivative (or forward mode, which vkgrad derives from the backward) through
the scan raises a MissingRuleError naming `selective_scan_bwd`.
"""

from __future__ import annotations

import numpy as np

from vkgrad.dtypes import FLOAT_DTYPES
from vkgrad.errors import DTypeError, ShapeError
from vkgrad.ir.core import Primitive, TensorType, abstract_eval_rules, batching_rules, vjp_rules
from vkgrad.ir.interpreter import impls
from vkgrad.primitives import lax as L
from vkgrad.tracer.core import abstract_leaf, bind, user_source

# The default steps between saved states (it fixes the shape of the `states` output).
# 8: the backward keeps a chunk of h in registers; at 8 it ran 897 us against 1227 at 16 and
# 2257 at 32 (H200, batch 8, dim 1024, N 16, L 2048; vkgrad/lowering/scan.py).
SCAN_CHUNK = 8


def scan_chunk(L: int) -> int:
    """Steps between saved states for a sequence of L: SCAN_CHUNK, or the power of two >= L
    when that is smaller (one chunk)."""
    return min(SCAN_CHUNK, 1 << max(0, (int(L) - 1).bit_length()))


def _optional(has_D, has_z, has_bias):
    return [n for n, f in (("D", has_D), ("z", has_z), ("delta_bias", has_bias)) if f]


def operand_names(has_D, has_z, has_bias) -> list:
    """The forward's operands in order, by name (the backward's gradients follow the same
    order, each name prefixed with "d")."""
    return ["u", "delta", "A", "B", "C"] + _optional(has_D, has_z, has_bias)


def _check(name, ts, has_D, has_z, has_bias):
    names = operand_names(has_D, has_z, has_bias)
    if len(ts) != len(names):
        raise ShapeError(f"{name}: takes {len(names)} operands ({', '.join(names)}), got "
                         f"{len(ts)}")
    t = dict(zip(names, ts))
    for n, x in t.items():
        if x.dtype not in FLOAT_DTYPES:
            raise DTypeError(f"{name}: {n} must be a float array, got {x}")
    if len({x.dtype for x in ts}) > 1:
        raise DTypeError(f"{name}: operands have different dtypes "
                         f"({', '.join(f'{n} {x}' for n, x in t.items())})")
    u = t["u"]
    if u.ndim != 3:
        raise ShapeError(f"{name}: u must be [batch, dim, L], got {u}")
    batch, dim, L = u.shape
    for n in ("delta", "z"):
        if n in t and t[n].shape != u.shape:
            raise ShapeError(f"{name}: {n} {t[n]} must have u's shape [batch, dim, L] = {u}")
    A = t["A"]
    if A.ndim != 2 or A.shape[0] != dim:
        raise ShapeError(f"{name}: A must be [dim, N] with dim = {dim}, got {A}")
    N = A.shape[1]
    for n in ("B", "C"):
        if t[n].shape not in ((batch, N, L), (dim, N)):
            raise ShapeError(f"{name}: {n} {t[n]} fits neither form: [batch, N, L] = "
                             f"[{batch},{N},{L}] (input-dependent) or [dim, N] = [{dim},{N}] "
                             "(fixed)")
    for n in ("D", "delta_bias"):
        if n in t and t[n].shape != (dim,):
            raise ShapeError(f"{name}: {n} must be [dim] = [{dim}], got {t[n]}")
    return t, batch, dim, L, N


def _split(args, has_D, has_z, has_bias):
    u, delta, A, B, C, *rest = args
    opt = dict(zip(_optional(has_D, has_z, has_bias), rest))
    return u, delta, A, B, C, opt.get("D"), opt.get("z"), opt.get("delta_bias")


def _softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def _sigmoid(x):
    return 0.5 * (np.tanh(0.5 * x) + 1)


def _at(X, t, variable):
    """B or C at step t, shaped to broadcast against [batch, dim, N]."""
    return X[:, None, :, t] if variable else X[None]


def _forward(u, delta, A, B, C, D, z, bias, softplus, chunk, keep_h=False):
    """The sequential scan: (out, states, y, dt, hs) with hs[t] = h_t when keep_h."""
    pre = delta + bias[:, None] if bias is not None else delta
    dt = _softplus(pre) if softplus else pre
    batch, dim, L = u.shape
    N = A.shape[1]
    vb, vc = B.ndim == 3, C.ndim == 3
    h = np.zeros((batch, dim, N), u.dtype)
    y = np.empty_like(u)
    states = np.empty((batch, -(-L // chunk), dim, N), u.dtype)
    hs = np.empty((L, batch, dim, N), u.dtype) if keep_h else None
    for t in range(L):
        h = np.exp(dt[:, :, t, None] * A) * h + (dt[:, :, t] * u[:, :, t])[..., None] * \
            _at(B, t, vb)
        y[:, :, t] = np.sum(h * _at(C, t, vc), axis=-1)
        if keep_h:
            hs[t] = h
        if (t + 1) % chunk == 0 or t == L - 1:
            states[:, t // chunk] = h
    if D is not None:
        y = y + D[:, None] * u
    out = y * (z * _sigmoid(z)) if z is not None else y
    return out, states, y, dt, pre, hs


selective_scan_p = Primitive("selective_scan", ("pure",), multiple_results=True)


def _scan_rule(*ts, has_D, has_z, has_bias, softplus, chunk):
    t, batch, dim, L, N = _check("selective_scan", ts, has_D, has_z, has_bias)
    if chunk != scan_chunk(L):
        raise ShapeError(f"selective_scan: chunk {chunk} is not scan_chunk({L}) = "
                         f"{scan_chunk(L)}")
    dt = t["u"].dtype
    return [TensorType((batch, dim, L), dt), TensorType((batch, -(-L // chunk), dim, N), dt)]


def _scan_impl(*args, has_D, has_z, has_bias, softplus, chunk):
    u, delta, A, B, C, D, z, bias = _split(args, has_D, has_z, has_bias)
    out, states, *_ = _forward(u, delta, A, B, C, D, z, bias, softplus, chunk)
    return out, states


abstract_eval_rules[selective_scan_p] = _scan_rule
impls[selective_scan_p] = _scan_impl


def _scan_vjp(gs, ans, *args, has_D, has_z, has_bias, softplus, chunk):
    # gs[1], the cotangent of `states`, is zero: states never reach the user (module docstring)
    return tuple(bind(selective_scan_bwd_p, *args, ans[1], gs[0], has_D=has_D, has_z=has_z,
                      has_bias=has_bias, softplus=softplus, chunk=chunk))


vjp_rules[selective_scan_p] = _scan_vjp


def _scan_batcher(args, dims, **params):
    """The mapped axis joins the scan's batch when only per-batch operands are mapped (u,
    delta, z, input-dependent B and C); a mapped A, D, delta_bias or fixed B/C is shared by the
    scan's batch, so those vmaps unroll (one scan per example)."""
    names = operand_names(params["has_D"], params["has_z"], params["has_bias"])
    per_batch = {"u", "delta", "z"} | {n for n, x, d in zip(names, args, dims)
                                       if n in ("B", "C") and len(x.shape) - (d is not None) == 3}
    if any(d is not None for n, d in zip(names, dims) if n not in per_batch):
        return L.unrolled_batcher(selective_scan_p)(args, dims, **params)
    size = L.mapped_size(args, dims)
    outs = bind(selective_scan_p, *(L.merge_batch(x, d, size) if n in per_batch else x
                                    for n, x, d in zip(names, args, dims)), **params)
    return [L.split_batch(o, size) for o in outs], [0, 0]


batching_rules[selective_scan_p] = _scan_batcher

selective_scan_bwd_p = Primitive("selective_scan_bwd", ("pure",), multiple_results=True)


def _scan_bwd_rule(*ts, has_D, has_z, has_bias, softplus, chunk):
    *fwd, states, dout = ts
    _scan_rule(*fwd, has_D=has_D, has_z=has_z, has_bias=has_bias, softplus=softplus,
               chunk=chunk)
    t, batch, dim, L, N = _check("selective_scan_bwd", fwd, has_D, has_z, has_bias)
    if dout.shape != t["u"].shape or states.shape != (batch, -(-L // chunk), dim, N):
        raise ShapeError(f"selective_scan_bwd: dout {dout} must have u's shape, states "
                         f"{states} the forward's states shape")
    return [TensorType(x.shape, x.dtype) for x in fwd]


def _scan_bwd_impl(*args, has_D, has_z, has_bias, softplus, chunk):
    """Reverse mode by hand through _forward (recomputed: `states` are not needed here)."""
    *fwd, _states, dout = args
    u, delta, A, B, C, D, z, bias = _split(fwd, has_D, has_z, has_bias)
    _, _, y, dt, pre, hs = _forward(u, delta, A, B, C, D, z, bias, softplus, chunk, keep_h=True)
    batch, dim, L = u.shape
    vb, vc = B.ndim == 3, C.ndim == 3
    grads = {}
    if z is not None:
        sz = _sigmoid(z)
        dy = dout * z * sz
        grads["z"] = dout * y * sz * (1 + z * (1 - sz))
    else:
        dy = dout
    du = dy * D[:, None] if D is not None else np.zeros_like(u)
    if D is not None:
        grads["D"] = np.sum(dy * u, axis=(0, 2))
    ddt = np.zeros_like(u)
    dA = np.zeros_like(A)
    dB, dC = np.zeros_like(B), np.zeros_like(C)
    dh = np.zeros((batch, dim, A.shape[1]), u.dtype)
    for t in reversed(range(L)):
        h_prev = hs[t - 1] if t else np.zeros_like(dh)
        Ct = _at(C, t, vc)
        g = dy[:, :, t, None] * hs[t]                       # d C_t, per (b, d, n)
        if vc:
            dC[:, :, t] = np.sum(g, axis=1)
        else:
            dC += np.sum(g, axis=0)
        dh = dh + dy[:, :, t, None] * Ct
        a = np.exp(dt[:, :, t, None] * A)
        da = dh * h_prev * a                               # d(dt_t A) through exp
        Bt = _at(B, t, vb)
        ddt[:, :, t] = np.sum(da * A, axis=-1) + np.sum(dh * Bt, axis=-1) * u[:, :, t]
        dA += np.sum(da * dt[:, :, t, None], axis=0)
        gB = dh * (dt[:, :, t] * u[:, :, t])[..., None]
        if vb:
            dB[:, :, t] = np.sum(gB, axis=1)
        else:
            dB += np.sum(gB, axis=0)
        du[:, :, t] += np.sum(dh * Bt, axis=-1) * dt[:, :, t]
        dh = dh * a
    dpre = ddt * _sigmoid(pre) if softplus else ddt
    if softplus:
        dpre = np.where(pre > 20, ddt, dpre)
    if bias is not None:
        grads["delta_bias"] = np.sum(dpre, axis=(0, 2))
    opt = [grads[n] for n in _optional(has_D, has_z, has_bias)]
    return (du, dpre, dA, dB, dC, *opt)


abstract_eval_rules[selective_scan_bwd_p] = _scan_bwd_rule
impls[selective_scan_bwd_p] = _scan_bwd_impl
# dA, dD, ddelta_bias (and a fixed B/C's gradient) are sums over the scan's batch: folding the
# mapped axis into that batch would sum them across examples too. One scan per example.
batching_rules[selective_scan_bwd_p] = L.unrolled_batcher(selective_scan_bwd_p)


def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, softplus=False):
    """(out, states) of selective_scan_p; None for an absent optional input."""
    opt = [x for x in (D, z, delta_bias) if x is not None]
    flags = dict(has_D=D is not None, has_z=z is not None, has_bias=delta_bias is not None)
    length = u.shape[-1] if len(u.shape) else 0
    if length == 0 and len(u.shape) == 3:
        return _empty_scan(u, delta, A, B, C, opt, flags)
    return bind(selective_scan_p, u, delta, A, B, C, *opt, **flags, softplus=bool(softplus),
                chunk=scan_chunk(length))


def _empty_scan(u, delta, A, B, C, opt, flags):
    """A sequence of no steps (L = 0): the empty result, on every backend alike. The Vulkan
    kernel needs at least one step, so no scan is bound; the operands are checked as the shape
    rule checks them."""
    types = [abstract_leaf(x, "an operand of selective_scan") for x in (u, delta, A, B, C, *opt)]
    try:
        _, batch, dim, _, N = _check("selective_scan", types, **flags)
    except (ShapeError, DTypeError) as e:
        raise e.with_context(primitive="selective_scan", source=user_source()) from None
    zeros = lambda shape: L.broadcast_to(L.convert(0.0, types[0].dtype), shape)
    return zeros((batch, dim, 0)), zeros((batch, 0, dim, N))
