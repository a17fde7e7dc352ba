"""Multi-output fusion: two reductions over the same operand and axes share one pass over it.

The case that matters in training: a layer's bias gradient is the column sum of the gradient
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
producer fused into it (it reads that operand from memory).
"""

from __future__ import annotations

import math

from vkgrad import primitives as P
from vkgrad.ir.core import Program
from vkgrad.passes.base import Pass
from vkgrad.passes.kernel_fusion import Schedule, anchors, body_of, kind, make_fused


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


class MultiOutputFusion(Pass):
    name = "fuse_multi_output"

    def apply(self, program: Program) -> Program:
        while True:
            merged = self.merge_one(program)
            if merged is None:
                return program
            program = merged

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
                if not column_sum_of(ma[0], ra[0], sched.root):
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
