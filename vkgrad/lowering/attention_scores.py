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
and lse as it would the kernel's. The matmuls carry their transposes as flags (no transpose kernels), and what follows
(remat, fusion) treats these eqns like any user's softmax(q k^T) v.
"""

from __future__ import annotations

from vkgrad.ir.core import Program
from vkgrad.lowering.attention import scores_bytes, scores_path
from vkgrad.lowering.conv_layouts import is_zeros, producers
from vkgrad.passes.base import TargetPass, resolve
from vkgrad.passes.dce import dce
from vkgrad.passes.inline import inline_body
from vkgrad.primitives import lax as L
from vkgrad.primitives.attention import flash_attention_bwd_p, flash_attention_p
from vkgrad.tracer.core import ShapeDtype
from vkgrad.transforms.tracing import trace


def _forward(q, k, v, *, causal, scale):
    """(o, lse, P) of flash_attention_p on [B, H, L, D] (causal: with Lq <= Lk, so that every
    query sees a key)."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    q3, k3, v3 = (L.reshape(x, (b * h, n, d)) for x, n in ((q, lq), (k, lk), (v, lk)))
    s = L.mul(L.matmul(q3, k3, False, True), scale)
    if causal:   # query i sees key j iff j <= i + (Lk - Lq)
        keep = L.le(L.iota((lq, lk), 1), L.add(L.iota((lq, lk), 0), lk - lq))
        s = L.select(L.broadcast_to(keep, (b * h, lq, lk)), s, float("-inf"))
    p = L.softmax(s, 2)
    m = L.reduce_max(s, (2,))
    total = L.reduce_sum(L.exp(L.sub(s, L.reshape(m, (b * h, lq, 1)))), (2,))
    lse = L.reshape(L.add(m, L.log(total)), (b, h, lq))
    return L.reshape(L.matmul(p, v3), (b, h, lq, d)), lse, p


def _backward(q, k, v, do, p, *dlse, scale):
    """(dq, dk, dv) of flash_attention_bwd_p from the forward's P [B*H, Lq, Lk]; dlse only
    where it is not zero (a second derivative)."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    q3, k3, v3, do3 = (L.reshape(x, (b * h, n, d))
                       for x, n in ((q, lq), (k, lk), (v, lk), (do, lq)))
    dv = L.matmul(p, do3, True, False)
    ds = L.softmax_bwd(p, L.matmul(do3, v3, False, True), 2)
    if dlse:
        ds = L.add(ds, L.mul(p, L.reshape(dlse[0], (b * h, lq, 1))))
    ds = L.mul(ds, scale)
    dq, dk = L.matmul(ds, k3), L.matmul(ds, q3, True, False)
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
        probs = {}      # the written-out forward's lse Var -> (q, k, v, its P)
        for e in program.eqns:
            ins = tuple(resolve(sub, x) for x in e.inputs)
            if id(e) in chosen:
                kw = dict(causal=e.params["causal"], scale=e.params["scale"])
                body = trace(lambda q, k, v: _forward(q, k, v, **kw),
                             tuple(map(_spec, ins)))
                o, lse, p = inline_body(body, ins, e, eqns, consts)
                sub.update({e.outputs[0]: o, e.outputs[1]: lse})
                probs[e.outputs[1]] = (e.inputs[:3], p)
            elif e.prim is flash_attention_bwd_p and e.inputs[4] in probs and \
                    probs[e.inputs[4]][0] == e.inputs[:3]:
                p = probs[e.inputs[4]][1]
                q, k, v, _, _, do, dlse = ins
                dlse = () if is_zeros(e.inputs[6], producer) else (dlse,)
                scale = e.params["scale"]
                body = trace(lambda q, k, v, do, p, *dl: _backward(q, k, v, do, p, *dl,
                                                                   scale=scale),
                             tuple(map(_spec, (q, k, v, do, p, *dlse))))
                sub.update(zip(e.outputs, inline_body(body, (q, k, v, do, p, *dlse), e, eqns,
                                                      consts)))
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
