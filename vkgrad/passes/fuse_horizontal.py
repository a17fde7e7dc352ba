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

`fuse_horizontal_reductions` (vkgrad/lowering/fusion/horizontal_reductions.py) does the same
for reduction kernels, with the grouping helpers here.
"""

from __future__ import annotations

from vkgrad.ir.core import Program, Var
from vkgrad.passes.base import Pass
from vkgrad.passes.fused_program import Schedule, body_of, kind, make_fused


def _loopish(e) -> bool:
    return kind(e) in ("loop", "horizontal")


def _in_place_candidates(e) -> set:
    """Inputs an output of e could overwrite (same size and dtype)."""
    outs = {(o.shape, o.dtype) for o in e.outputs}
    return {x for x in e.inputs if isinstance(x, Var) and (x.shape, x.dtype) in outs}


def _reads(e) -> set:
    return {x for x in e.inputs if isinstance(x, Var)}


def runs(eqns, key, can_join) -> list:
    """Groups (lists of positions, two or more each) of eqns with the same key (None: not a
    candidate), in schedule order, each grown while `can_join(group, position)` allows."""
    groups, current = [], {}
    for i, e in enumerate(eqns):
        k = key(e)
        if k is None:
            continue
        group = current.get(k)
        if group and can_join(group, i):
            group.append(i)
            continue
        if group and len(group) > 1:
            groups.append(group)
        current[k] = [i]
    return groups + [g for g in current.values() if len(g) > 1]


def merge(program, eqns, groups, make) -> Program:
    """Each group's eqns as `make(members)`, in the last member's place."""
    if not groups:
        return program
    replace = {}
    for g in groups:
        replace[g[-1]] = make([eqns[i] for i in g])
        for i in g[:-1]:
            replace[i] = None
    new = [replace.get(i, e) for i, e in enumerate(eqns)]
    return program.replace(eqns=tuple(e for e in new if e is not None))


def union(members):
    """(body eqns, outputs) of members merged into one kernel."""
    return (list(dict.fromkeys(b for m in members for b in body_of(m).eqns)),
            [o for m in members for o in m.outputs])


class HorizontalFusion(Pass):
    name = "fuse_horizontal"

    def apply(self, program: Program) -> Program:
        sched = Schedule(program)
        eqns = sched.eqns
        groups = runs(eqns, lambda e: True if _loopish(e) else None,
                      lambda g, i: self.can_join(eqns, g, i, sched))

        def make(members):
            body_eqns, outs = union(members)
            shapes = {o.shape for o in outs}
            return make_fused(body_eqns, outs, "horizontal" if len(shapes) > 1 else "loop",
                              members[0])
        return merge(program, eqns, groups, make)

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
