"""Horizontal fusion: independent elementwise kernels at the same point of the schedule become
one dispatch over their concatenated index space, whatever their shapes.

The optimizer's update is the case it is for: after loop fusion each parameter's Adam update
(new p, m, v) is one kernel per parameter shape, each a few microseconds on a large GPU and
mostly launch overhead for the biases (3-7 us each on the H200, bench/results). As one kernel
(`fused[kind=horizontal]`, the way PyTorch's fused/foreach Adam and XLA's horizontal loop
fusion do it), the update of every parameter is ONE dispatch.

Loop kernels that follow each other in the schedule merge into the last one's place, so each
must not be read by anything scheduled before that place. A kernel that can update one of its
inputs in place (an output of that input's size and dtype: the Adam step count) keeps that
only if no other kernel of the group reads the input, so such a pair is never merged.
"""

from __future__ import annotations

from vkgrad.ir.core import Program, Var
from vkgrad.passes.base import Pass
from vkgrad.passes.fused_program import Schedule, kind, make_fused


def _loopish(e) -> bool:
    return kind(e) in ("loop", "horizontal")


def _in_place_candidates(e) -> set:
    """Inputs an output of e could overwrite (same size and dtype)."""
    outs = {(o.shape, o.dtype) for o in e.outputs}
    return {x for x in e.inputs if isinstance(x, Var) and (x.shape, x.dtype) in outs}


def _reads(e) -> set:
    return {x for x in e.inputs if isinstance(x, Var)}


class HorizontalFusion(Pass):
    name = "fuse_horizontal"

    def apply(self, program: Program) -> Program:
        sched = Schedule(program)
        eqns = sched.eqns
        groups, current = [], []
        for i, e in enumerate(eqns):
            if not _loopish(e):
                continue
            if current and self.can_join(eqns, current, i, sched):
                current.append(i)
            else:
                if len(current) > 1:
                    groups.append(current)
                current = [i]
        if len(current) > 1:
            groups.append(current)
        if not groups:
            return program
        replace = {}
        for g in groups:
            members = [eqns[i] for i in g]
            body_eqns = list(dict.fromkeys(b for m in members for b in m.params["body"].eqns))
            outs = [o for m in members for o in m.outputs]
            shapes = {o.shape for o in outs}
            replace[g[-1]] = make_fused(body_eqns, outs,
                                        "horizontal" if len(shapes) > 1 else "loop", members[0])
            for i in g[:-1]:
                replace[i] = None
        new = [replace.get(i, e) for i, e in enumerate(eqns)]
        return program.replace(eqns=tuple(e for e in new if e is not None))

    def can_join(self, eqns, current, i, sched) -> bool:
        outs = {o for j in current for o in eqns[j].outputs}
        if sched.reads_between(current[0], i, outs):
            return False
        members = [eqns[j] for j in current] + [eqns[i]]
        for a in members:
            keep = _in_place_candidates(a)
            if any(keep & _reads(b) for b in members if b is not a):
                return False
        return True


fuse_horizontal = HorizontalFusion()
