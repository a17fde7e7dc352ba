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

`fuse_horizontal_reductions` does the same for reduction kernels (reduce_sum, reduce_max,
reduce_min, each with the producers fused into its loads and the epilogue in its store): those
of one op at the same point of the schedule, whatever their shapes, become one
`fused[kind=horizontal_reduce]`, which the reduction kernel runs as one dispatch (two when a
member is split over workgroups: plan_horizontal_reduce in vkgrad/lowering/kernels.py). The
case it is for is a gradient's global norm (optim.clip_by_global_norm): a sum of squares per
leaf, leaves of many shapes, each launch- and tail-bound on its own (about 7 us each on the
H200 for the small LM's 51 leaves), as XLA's horizontal fusion of reductions does it. A group
binds every member's inputs and results: it grows while they fit the Target's
max_storage_buffers (lavapipe: 32), and the next member starts another group.
"""

from __future__ import annotations

import math

from vkgrad import primitives as P
from vkgrad.ir.core import Program, Var
from vkgrad.passes.base import Pass, TargetPass
from vkgrad.passes.fuse import body_inputs
from vkgrad.passes.fused_program import Schedule, anchors, body_of, kind, make_fused

REDUCTIONS = (P.reduce_sum_p, P.reduce_max_p, P.reduce_min_p)
# The reduction kernel's own bindings in a horizontal group (its operand and result, read and
# written through the hooks, and the partials of split members), beside the group's buffers.
REDUCE_BINDINGS = 3
# Members reduce at most this many elements each (None: any size); larger reductions keep
# their own kernel (vec4 loads, their own workgroup size). Any size: at 2**20 the LM small's
# 17 bias-gradient column sums (2M elements each) kept theirs, and its step's kernels took
# 8.33 ms on the H200 against 8.15 (bench/bench_hreduce.py measures both).
MAX_MEMBER_ELEMENTS = None


def _loopish(e) -> bool:
    return kind(e) in ("loop", "horizontal")


def _in_place_candidates(e) -> set:
    """Inputs an output of e could overwrite (same size and dtype)."""
    outs = {(o.shape, o.dtype) for o in e.outputs}
    return {x for x in e.inputs if isinstance(x, Var) and (x.shape, x.dtype) in outs}


def _reads(e) -> set:
    return {x for x in e.inputs if isinstance(x, Var)}


def _runs(eqns, key, can_join) -> list:
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


def _merge(program, eqns, groups, make) -> Program:
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


def _union(members):
    """(body eqns, outputs) of members merged into one kernel."""
    return (list(dict.fromkeys(b for m in members for b in body_of(m).eqns)),
            [o for m in members for o in m.outputs])


class HorizontalFusion(Pass):
    name = "fuse_horizontal"

    def apply(self, program: Program) -> Program:
        sched = Schedule(program)
        eqns = sched.eqns
        groups = _runs(eqns, lambda e: True if _loopish(e) else None,
                       lambda g, i: self.can_join(eqns, g, i, sched))

        def make(members):
            body_eqns, outs = _union(members)
            shapes = {o.shape for o in outs}
            return make_fused(body_eqns, outs, "horizontal" if len(shapes) > 1 else "loop",
                              members[0])
        return _merge(program, eqns, groups, make)

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


def reduction_of(e):
    """The primitive of a kernel that is one f32 reduction (with fused loads or stores), else
    None."""
    if kind(e) not in ("kernel", "input", "output"):
        return None
    anc = anchors(body_of(e))
    if len(anc) != 1 or anc[0].prim not in REDUCTIONS:
        return None
    a = anc[0]
    if MAX_MEMBER_ELEMENTS is not None and math.prod(a.inputs[0].shape) > MAX_MEMBER_ELEMENTS:
        return None
    return a.prim if a.inputs[0].dtype == "f32" and a.out.dtype == "f32" else None


class HorizontalReductions(TargetPass):
    """Independent reductions of one op at the same point of the schedule, of any shapes: one
    `fused[kind=horizontal_reduce]` (see the module's docstring). `for_target` gives the pass
    for a device's binding limit."""
    name = "fuse_horizontal_reductions"

    def apply(self, program: Program) -> Program:
        sched = Schedule(program)
        eqns = sched.eqns
        groups = _runs(eqns, reduction_of, lambda g, i: self.can_join(eqns, g, i, sched))
        return _merge(program, eqns, groups,
                      lambda members: make_fused(*_union(members), "horizontal_reduce",
                                                 members[0]))

    def can_join(self, eqns, current, i, sched) -> bool:
        outs = {o for j in current for o in eqns[j].outputs}
        if sched.reads_between(current[0], i, outs):
            return False
        body_eqns, outs = _union([eqns[j] for j in current + [i]])
        buffers = REDUCE_BINDINGS + len(body_inputs(body_eqns)) + len(outs)
        return buffers <= self.target.max_storage_buffers


fuse_horizontal = HorizontalFusion()
fuse_horizontal_reductions = HorizontalReductions()
