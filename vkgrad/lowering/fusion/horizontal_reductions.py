"""Horizontal fusion of reductions (the pass fuse_horizontal_reductions).

Independent reduction kernels (reduce_sum, reduce_max,
reduce_min, each with the producers fused into its loads and the epilogue in its store): those
of one op at the same point of the schedule, whatever their shapes, become one
`fused[kind=horizontal_reduce]`, which the reduction kernel runs as one dispatch (two when a
member is split over workgroups: plan_horizontal_reduce in vkgrad/lowering/kernels.py). The
case it is for is a gradient's global norm (optim.clip_by_global_norm): a sum of squares per
leaf, leaves of many shapes, each launch- and tail-bound on its own (about 7 us each on the
H200 for the small LM's 51 leaves), as XLA's horizontal fusion of reductions does it. A group
binds every member's inputs and results: it grows while they fit the Target's
max_storage_buffers (lavapipe: 32), and the next member starts another group.

It sits in the lowering because what a group may bind is the reduction kernel's: its own
buffers (`HORIZONTAL_ROLES`, lowering/kernels.py) beside the members' inputs and results. The
grouping (runs in schedule order, merged in the last member's place) is the loop kernels'
horizontal fusion's, vkgrad/passes/fuse_horizontal.py.
"""

from __future__ import annotations

import math

from vkgrad import primitives as P
from vkgrad.ir.core import Program
from vkgrad.lowering.kernels import HORIZONTAL_ROLES
from vkgrad.passes.base import TargetPass
from vkgrad.passes.fuse import body_inputs
from vkgrad.passes.fuse_horizontal import merge, runs, union
from vkgrad.passes.fused_program import Schedule, anchors, body_of, kind, make_fused

REDUCTIONS = (P.reduce_sum_p, P.reduce_max_p, P.reduce_min_p)
# Members reduce at most this many elements each (None: any size); larger reductions keep
# their own kernel (vec4 loads, their own workgroup size). Any size: at 2**20 the LM small's
# 17 bias-gradient column sums (2M elements each) kept theirs, and its step's kernels took
# 8.33 ms on the H200 against 8.15 (bench/bench_hreduce.py measures both).
MAX_MEMBER_ELEMENTS = None


class HorizontalReductions(TargetPass):
    """Independent reductions of one op at the same point of the schedule, of any shapes: one
    `fused[kind=horizontal_reduce]` (see the module's docstring). `for_target` gives the pass
    for a device's binding limit."""
    name = "fuse_horizontal_reductions"

    def apply(self, program: Program) -> Program:
        sched = Schedule(program)
        eqns = sched.eqns
        groups = runs(eqns, reduction_of, lambda g, i: self.can_join(eqns, g, i, sched))
        return merge(program, eqns, groups,
                     lambda members: make_fused(*union(members), "horizontal_reduce",
                                                members[0]))

    def can_join(self, eqns, current, i, sched) -> bool:
        outs = {o for j in current for o in eqns[j].outputs}
        if sched.reads_between(current[0], i, outs):
            return False
        body_eqns, outs = union([eqns[j] for j in current + [i]])
        buffers = len(HORIZONTAL_ROLES) + len(body_inputs(body_eqns)) + len(outs)
        return buffers <= self.target.max_storage_buffers


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


fuse_horizontal_reductions = HorizontalReductions()
