"""attention_scores: flash attention the Target plans as materialized scores, written out as
the matmul, (mask,) softmax and matmul it stands for, in the fused stage (vkgrad/pipeline.py's
FUSE).

The flash kernels (lowering/attention.py) never store the [Lq, Lk] scores; on a GPU whose
matmul kernel runs at cuBLAS speed, attention written out runs faster where the scores fit the
memory the Target gives them (`scores_path`: the H200 numbers are beside it). Per (batch*head):

    forward   S = scale q k^T (-inf where causal masks);  P = softmax(S);  o = P v;
              lse = logsumexp(S)
    backward  dv = P^T do;  dP = do v^T;  dS = scale (softmax_bwd(P, dP) + P dlse);
              dq = dS k;  dk = dS^T q

which is FlashAttention's backward with P kept instead of recomputed (rowsum(P dP) =
rowsum(do o), the delta of primitives/attention.py; P is 0 where masked), so a backward whose
forward is written out in the same program reads that forward's P; the forward's lse is then
dead and dropped. A backward planned for the flash kernel reads the written-out forward's o
and lse as it would the kernel's. The matmuls carry their transposes as flags (no transpose
kernels), and what follows (remat, fusion) treats these eqns like any user's softmax(q k^T) v.

Causal attention runs in blocks of query rows (lowering/attention.py `causal_blocks`), each
over the prefix of keys its rows see: block i of n computes i+1 of n key blocks and masks only
the last, so the blocks together compute (n + 1) / 2n of the scores a single block would. o,
lse and dq are the blocks' rows concatenated; dk and dv the sum of the blocks' (each padded
with zeros to Lk).

float16 and bfloat16 attention that the cooperative-matrix flash kernels do not take
(lowering/attention_coop.py: bf16; f16 plain past their head dim, or not in 64-row blocks),
where the Target runs their products on cooperative matrices (lowering/matmul_coop.py;
scores_path's HALF rules), computes as JAX's dot_product_attention
does: S and dP are 16-bit products with f32 results (the matmul primitive's
preferred_element_type), the softmax and its backward in f32, P and dS rounded to 16 bits once
(by the softmax kernels' 16-bit stores, lowering/hooks.py) for the four 16-bit products; P is
kept in 16 bits for the backward. H200, B4 H8 fwd+bwd (bench_attention_paths.py --dtype f16,
2026-12-02 21:52): L1024 D64 494 us against 1565 on the flash kernels (which compute 16-bit
attention in f32 on the shader cores), L4096 D128 7504 against 59641.
"""

from __future__ import annotations

from vkgrad.dtypes import HALF_DTYPES
from vkgrad.ir.core import Program
from vkgrad.lowering.attention import causal_blocks, scores_bytes, scores_path
from vkgrad.lowering.conv_layouts import is_zeros, producers
from vkgrad.passes.base import TargetPass, resolve
from vkgrad.passes.dce import dce
from vkgrad.passes.inline import inline_body
from vkgrad.primitives import lax as L
from vkgrad.primitives.attention import flash_attention_bwd_p, flash_attention_p
from vkgrad.tracer.core import ShapeDtype
from vkgrad.transforms.tracing import trace


def _blocks(lq, lk, d, causal, dtype):
    """The query rows [start, stop) each written-out block computes, and the keys it sees
    (a prefix: [0, keys)); one block unless causal (lowering/attention.py causal_blocks)."""
    if not causal:
        return ((0, lq, lk),)
    return tuple((a, z, z + lk - lq) for a, z in causal_blocks(lq, d, dtype in HALF_DTYPES))


def _rows(x, a, z):
    """Rows [a, z) of [B*H, L, D] (x itself when that is all of it)."""
    bh, n, d = x.shape
    return x if (a, z) == (0, n) else L.slice_(x, (0, a, 0), (bh, z, d))


def _cat(xs):
    """The blocks' rows (axis 1) as one array."""
    return xs[0] if len(xs) == 1 else L.concatenate(xs, 1)


def _wide(x):
    """The preferred_element_type of a product of x's dtype whose result the softmax reads:
    f32 for 16-bit operands (the cooperative-matrix kernel's accumulator as it is), else None."""
    return "f32" if L.dtype_of(x) in HALF_DTYPES else None


def _forward(q, k, v, *, causal, scale, blocks):
    """(o, lse, *P) of flash_attention_p on [B, H, L, D], block by block of query rows, each
    over the keys it sees (causal: with Lq <= Lk, so that every query sees a key; only each
    block's last Lq/n keys are masked, the keys after them not computed). 16-bit q, k, v:
    the scores and softmax in f32, P rounded to their dtype for P v (and kept so), as JAX's
    dot_product_attention computes it."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    q3, k3, v3 = (L.reshape(x, (b * h, n, d)) for x, n in ((q, lq), (k, lk), (v, lk)))
    outs, lses, ps = [], [], []
    for a, z, keys in blocks:
        s = L.mul(L.matmul(_rows(q3, a, z), _rows(k3, 0, keys), False, True, _wide(q)), scale)
        if causal:   # query i sees key j iff j <= i + (Lk - Lq)
            grid = (z - a, keys)
            keep = L.le(L.iota(grid, 1), L.add(L.iota(grid, 0), a + lk - lq))
            s = L.select(L.broadcast_to(keep, (b * h,) + grid), s, float("-inf"))
        p = L.convert(L.softmax(s, 2), q.dtype)
        m = L.reduce_max(s, (2,))
        total = L.reduce_sum(L.exp(L.sub(s, L.reshape(m, (b * h, z - a, 1)))), (2,))
        lses.append(L.add(m, L.log(total)))
        outs.append(L.matmul(p, _rows(v3, 0, keys)))
        ps.append(p)
    o, lse = _cat(outs), L.convert(_cat(lses), q.dtype)
    return (L.reshape(o, (b, h, lq, d)), L.reshape(lse, (b, h, lq)), *ps)


def _backward(q, k, v, do, *ps_dlse, scale, blocks):
    """(dq, dk, dv) of flash_attention_bwd_p from the forward's P blocks [B*H, rows, keys];
    dlse (after them) only where it is not zero (a second derivative). A block's dk and dv
    cover the keys it sees: the blocks' are summed, each padded with zeros to Lk."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    ps, dlse = ps_dlse[:len(blocks)], ps_dlse[len(blocks):]
    q3, k3, v3, do3 = (L.reshape(x, (b * h, n, d))
                       for x, n in ((q, lq), (k, lk), (v, lk), (do, lq)))
    # 16-bit operands: dP and dS in f32, dS rounded once for its products; with several
    # blocks, dk and dv summed in f32 and rounded at the end
    wide, summed = _wide(q), _wide(q) if len(blocks) > 1 else None
    dqs, dk, dv = [], None, None
    for (a, z, keys), p in zip(blocks, ps):
        qi, doi = _rows(q3, a, z), _rows(do3, a, z)
        ki, vi = _rows(k3, 0, keys), _rows(v3, 0, keys)
        pf = L.convert(p, "f32")
        ds = L.softmax_bwd(pf, L.matmul(doi, vi, False, True, wide), 2)
        if dlse:
            dl = _rows(L.reshape(L.convert(dlse[0], "f32"), (b * h, lq, 1)), a, z)
            ds = L.add(ds, L.mul(pf, dl))
        ds = L.convert(L.mul(ds, scale), q.dtype)
        dqs.append(L.matmul(ds, ki))
        pieces = (L.matmul(ds, qi, True, False, summed), L.matmul(p, doi, True, False, summed))
        if keys < lk:
            pieces = tuple(L.pad(x, (0, 0, 0), (0, lk - keys, 0)) for x in pieces)
        dk, dv = pieces if dk is None else (L.add(dk, pieces[0]), L.add(dv, pieces[1]))
    dq, dk, dv = _cat(dqs), L.convert(dk, q.dtype), L.convert(dv, q.dtype)
    return (L.reshape(dq, (b, h, lq, d)), L.reshape(dk, (b, h, lk, d)),
            L.reshape(dv, (b, h, lk, d)))


def _spec(x):
    return ShapeDtype(x.shape, x.dtype)


class AttentionScores(TargetPass):
    name = "attention_scores"

    def apply(self, program: Program) -> Program:
        chosen = self._chosen(program)
        if not chosen:
            return program
        producer = producers(program.eqns)
        eqns, consts, sub = [], list(program.consts), {}
        probs = {}      # the written-out forward's lse Var -> (q, k, v, its P blocks, blocks)
        for e in program.eqns:
            ins = tuple(resolve(sub, x) for x in e.inputs)
            if id(e) in chosen:
                q, k = ins[:2]
                blocks = _blocks(q.shape[2], k.shape[2], q.shape[3], e.params["causal"],
                                 q.dtype)
                kw = dict(causal=e.params["causal"], scale=e.params["scale"], blocks=blocks)
                body = trace(lambda q, k, v: _forward(q, k, v, **kw),
                             tuple(map(_spec, ins)))
                o, lse, *ps = inline_body(body, ins, e, eqns, consts)
                sub.update({e.outputs[0]: o, e.outputs[1]: lse})
                probs[e.outputs[1]] = (e.inputs[:3], ps, blocks)
            elif e.prim is flash_attention_bwd_p and e.inputs[4] in probs and \
                    probs[e.inputs[4]][0] == e.inputs[:3]:
                _, ps, blocks = probs[e.inputs[4]]
                q, k, v, _, _, do, dlse = ins
                dlse = () if is_zeros(e.inputs[6], producer) else (dlse,)
                kw = dict(scale=e.params["scale"], blocks=blocks)
                args = (q, k, v, do, *ps, *dlse)
                body = trace(lambda *xs: _backward(*xs, **kw), tuple(map(_spec, args)))
                sub.update(zip(e.outputs, inline_body(body, args, e, eqns, consts)))
            else:
                eqns.append(e.replace(inputs=ins))
        return dce.apply(program.replace(eqns=tuple(eqns), consts=tuple(consts),
                                         outputs=tuple(resolve(sub, o) for o in program.outputs)))

    def _chosen(self, program: Program) -> set:
        """The forward eqns to write out: those scores_path takes, in program order, while
        their scores sum to at most a quarter of the device's memory (where it is known)."""
        budget = self.target.device_local_bytes // 4 or None
        chosen = set()
        for e in program.eqns:
            if e.prim is not flash_attention_p:
                continue
            q, k = e.inputs[:2]
            if scores_path(q.shape, k.shape, q.dtype, e.params["causal"], self.target):
                size = scores_bytes(q.shape, k.shape)
                if budget is not None:
                    if size > budget:
                        continue
                    budget -= size
                chosen.add(id(e))
        return chosen


attention_scores = AttentionScores()
