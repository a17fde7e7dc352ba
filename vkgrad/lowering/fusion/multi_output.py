"""Multi-output fusion: reductions over the same operand and axes share one pass over it.

Sibling reductions: up to the reduction contract's `siblings` reductions of one shape, axes and op that read some of
the same memory and do not depend on each other become one reduction kernel keeping an
accumulator each (the sums of a layer norm's backward, g * w and g * w * xhat, over each row;
its weight and bias gradients over the batch); the loads they share happen once.

The matmul case, which matters most in training: a layer's bias gradient is the column sum of the gradient
g that its weight gradient `x^T @ g` contracts over the same (batch) axis. The matmul already
streams all of g through its tiles, so it computes the sum too: op(A) gets a virtual row of
ones (`ones_row` in vkgrad/lowering/matmul.py), and its result's extra row is the bias
gradient. One dispatch and one read of g instead of two (on the H200 the separate bias sums
took 3.6-7.2 us each, two dispatches apiece at the MLP's sizes).

The pair becomes `fused[kind=multi_output]` with both eqns in its body (each with whatever
epilogue it had); it runs where the later of the two ran, so nothing between may read the
earlier one's results.

Conditions: a 2-D matmul whose B operand (not computed in its loads) is, up to a reshape, the
operand of a `reduce_sum` over the axes that B's contraction runs along; the reduction has no
producer fused into it (it reads that operand from memory). Column sums are paired with their
matmuls first; siblings are grouped from what is left.
"""

from __future__ import annotations

import math

from vkgrad import primitives as P
from vkgrad.ir.core import Program, Var
from vkgrad.lowering.fusion.base import HookFusion
from vkgrad.passes.fused_program import Schedule, anchors, body_of, kind, make_fused

# A matmul takes its bias gradient as a column sum only where its contract's takes_hooks
# (loads=True) allows: on the H200 riding along, the column sum ran 666 us instead of 6 in a
# split-K matmul ([1024,256] x [256,10], 2026-11-30) and cost 33-44 us in 0.4-0.5 GFLOP ones
# (2026-12-01), where a separate sum costs 11. On lavapipe it pays.


def column_sum_of(mm, red, root) -> bool:
    """Is `red` (a reduce_sum) the sum over the contracted axis of matmul `mm`'s B operand?"""
    if mm.prim is not P.matmul_p or red.prim is not P.reduce_sum_p or mm.out.ndim != 2:
        return False
    b, g = mm.inputs[1], red.inputs[0]
    if root(b) is not root(g):
        return False
    axes, nd = red.params["axes"], g.ndim
    k, n = (b.shape[1], b.shape[0]) if mm.params["transpose_b"] else b.shape
    lead = tuple(range(len(axes)))
    trail = tuple(range(nd - len(axes), nd))
    if math.prod(red.out.shape) != n:
        return False
    if not mm.params["transpose_b"]:       # B is [K, N]: a sum over the leading axes
        return axes == lead and math.prod(g.shape[:len(axes)]) == k
    return axes == trail and math.prod(g.shape[nd - len(axes):]) == k   # B is [N, K]


class MultiOutputFusion(HookFusion):
    name = "fuse_multi_output"

    def apply(self, program: Program) -> Program:
        for step in (self.merge_one, self.merge_siblings):
            while True:
                merged = step(program)
                if merged is None:
                    break
                program = merged
        return program

    def _siblings(self, e) -> int:
        c = self.contract(e)
        return c.siblings if c is not None else 1

    def _reduction(self, e):
        """(anchors, body) of a kernel eqn whose family takes siblings (a reduction, with
        fused loads or stores), else None."""
        if kind(e) not in ("kernel", "input", "output", "multi_output"):
            return None
        b = body_of(e)
        anc = anchors(b)
        if not anc or any(self._siblings(a) < 2 or a.prim is not anc[0].prim or
                          a.params != anc[0].params or
                          a.inputs[0].shape != anc[0].inputs[0].shape for a in anc):
            return None
        return anc, b

    def merge_siblings(self, program: Program) -> Program | None:
        sched = Schedule(program)
        eqns = sched.eqns
        found = [(i, self._reduction(e)) for i, e in enumerate(eqns)]
        found = [(i, r) for i, r in found if r is not None]
        for x, (i, (ai, bi)) in enumerate(found):
            for j, (aj, bj) in found[x + 1:]:
                if aj[0].prim is not ai[0].prim or aj[0].params != ai[0].params or \
                        aj[0].inputs[0].shape != ai[0].inputs[0].shape or \
                        len(ai) + len(aj) > self._siblings(ai[0]):
                    continue
                if not {sched.root(v) for v in bi.inputs} & {sched.root(v) for v in bj.inputs}:
                    continue                       # nothing read twice: nothing to share
                if self._depends(sched, i, j):
                    continue
                if not sched.reads_between(i, j - 1, eqns[i].outputs):
                    at, gone = j, i                # run both where the later one ran
                elif all(sched.producer.get(v, -1) < i for v in bj.inputs):
                    at, gone = i, j                # ... or where the earlier one ran
                else:
                    continue
                body_eqns = list(bi.eqns) + list(bj.eqns)
                eqns[at] = make_fused(body_eqns, list(eqns[i].outputs) + list(eqns[j].outputs),
                                      "multi_output", like=eqns[i])
                del eqns[gone]
                return program.replace(eqns=tuple(eqns))
        return None

    @staticmethod
    def _depends(sched, i, j) -> bool:
        """Does eqn j read (through anything in between) what eqn i computes?"""
        tainted = {sched.root(o) for o in sched.eqns[i].outputs}
        for k in range(i + 1, j + 1):
            e = sched.eqns[k]
            if any(isinstance(x, Var) and sched.root(x) in tainted for x in e.inputs):
                if k == j:
                    return True
                tainted |= {sched.root(o) for o in e.outputs}
        return False

    def merge_one(self, program: Program) -> Program | None:
        sched = Schedule(program)
        eqns = sched.eqns
        for i, r in enumerate(eqns):
            rb = body_of(r)
            ra = anchors(rb)
            if kind(r) not in ("kernel", "output") or len(ra) != 1 or \
                    ra[0].prim is not P.reduce_sum_p or ra[0].inputs[0] not in rb.inputs:
                continue
            for j, m in enumerate(eqns):
                mb = body_of(m)
                ma = anchors(mb)
                if kind(m) not in ("kernel", "input", "output") or len(ma) != 1 or \
                        ma[0].prim is not P.matmul_p or ma[0].inputs[1] not in mb.inputs:
                    continue
                c = self.contract(ma[0])
                if not (c.column_sum and c.takes_hooks(ma[0], self.target, loads=True)
                        and column_sum_of(ma[0], ra[0], sched.root)):
                    continue
                lo, hi = sorted((i, j))
                if sched.reads_between(lo, hi, eqns[lo].outputs):
                    continue
                body_eqns = list(dict.fromkeys(list(mb.eqns) + list(rb.eqns)))
                fused = make_fused(body_eqns, list(m.outputs) + list(r.outputs),
                                   "multi_output", like=m)
                eqns[hi] = fused
                del eqns[lo]
                return program.replace(eqns=tuple(eqns))
        return None


fuse_multi_output = MultiOutputFusion()
