"""Row fusion: reductions over the last axis of one row shape, and the elementwise kernels
around them, as ONE kernel with a workgroup per row (`fused[kind=row]`, lowering/row_kernel.py).

After the other fusions a layer norm is still three dispatches forward (the mean's sum, the
sum of (x - mean)^2 with its load fused, the normalize) and three backward (the row sums of
g * w and g * w * xhat, the dx elementwise), each 5-9 us on the H200 at the small LM's sizes
(launch- and tail-bound: 8 MB a tensor, a few us of memory time), and each reduction's result
goes through memory. A row of up to a few thousand elements fits one workgroup's registers, so
one dispatch loads it once, runs the reductions in order with the work between them, and
writes only what someone else reads. A softmax written by hand in jnp (x - max, exp, sum,
divide) is the same shape.

A group is a set of top-level kernels that
  * are reductions over the last axis of ONE shape F = L + (n,), L not empty (reduce_sum/max/min,
    with whatever producers and epilogues they took), or loop kernels, each joining a group
    when it reads a value the group computes or a row-sized value the group reads (the max
    and the min of x);
  * read every *row value* (shapes L and L + (1,): a reduction's result, the mean, the
    variance) only at its own row (lowering/row_kernel.py's `row_values` has the rules).
    Values that depend on no reduction may be anything a loop kernel computes (a weight of
    shape (n,), a transposed operand);
  * write only values of shape F or row values (f32, i32, bool; no 16-bit values), bind at
    most the Target's buffers, and have n within the row kernel's limit (its contract in
    lowering/kernels.py, `row_max`); rows longer than that keep today's kernels;
  * are all of the forward or all of the backward: a loop kernel that recomputes forward values
    for the backward (passes/remat.py) stays where the backward needs them, not in the
    forward's row kernel, whose results would then live through the whole backward;
  * can run at one place of the schedule: the merged kernel takes the place of the last
    member, the kernels between the members that read what the group computes move after it,
    and no member may need one of those (`_schedule`: no path member -> other -> member).
"""

from __future__ import annotations

from vkgrad.ir.core import Program, Var
from vkgrad.lowering import elementwise
from vkgrad.lowering.fusion.base import HookFusion
from vkgrad.lowering.kernels import row_max
from vkgrad.lowering.row_kernel import row_reduction, row_values, same_rows
from vkgrad.passes.dce import dce
from vkgrad.passes.fused_program import VIEWS, Schedule, anchors, body_of, kind, make_fused
from vkgrad.primitives.compiler import save_p

MEMBER_KINDS = ("kernel", "input", "output", "multi_output", "loop", "row")
DTYPES = ("f32", "i32", "bool")


def member_shape(e):
    """The row shape of a top-level eqn that may join a row group: its reductions' operand
    shape, a loop kernel's output shape; None for anything else."""
    if kind(e) not in MEMBER_KINDS:
        return None
    anc = anchors(body_of(e))
    if any(a.inputs[0].ndim < 2 for a in anc):
        return None      # one row: a sum to one value (a global norm's) stays a reduction
    if not anc:
        shapes = {o.shape for o in e.outputs}
        return next(iter(shapes)) if len(shapes) == 1 and e.outputs[0].ndim >= 1 else None
    shapes = {a.inputs[0].shape for a in anc}
    return next(iter(shapes)) if all(row_reduction(a) for a in anc) and len(shapes) == 1 \
        else None


def fits(body: Program, shape, target) -> bool:
    """Can `body` run as a row kernel over rows of `shape` on `target` (module docstring)?"""
    if not body.outputs or not all(shape) or shape[-1] > row_max(target):
        return False
    if len(body.inputs) + len(body.outputs) > elementwise.max_bindings(target):
        return False
    values = [*body.inputs, *(o for e in body.eqns for o in e.outputs)]
    if any(v.dtype not in DTYPES for v in values):
        return False
    return row_values(body, shape) is not None


class RowFusion(HookFusion):
    name = "fuse_rows"

    def apply(self, program: Program) -> Program:
        while True:
            merged = self.merge_one(program)
            if merged is None:
                return dce.apply(program)   # views of values now computed inside are dead
            program = merged

    def merge_one(self, program: Program) -> Program | None:
        sched = Schedule(program)
        eqns = sched.eqns
        shapes = [member_shape(e) for e in eqns]
        reduces = [bool(anchors(body_of(e))) if s is not None else False
                   for e, s in zip(eqns, shapes)]
        reads = [{sched.root(x) for x in e.inputs if isinstance(x, Var)} for e in eqns]
        rows_of: dict = {}

        def rows_read(k, shape) -> set:
            """The values of the row shape (up to a reshape) that eqn k reads from memory."""
            if (k, shape) not in rows_of:
                rows_of[k, shape] = {v for v in reads[k] if same_rows(v.shape, shape)}
            return rows_of[k, shape]

        for i, first in enumerate(eqns):
            shape = shapes[i]
            if shape is None or len(shape) < 2:      # a group has rows (L not empty)
                continue
            group, fused, order = [i], None, None
            outs = {sched.root(o) for o in first.outputs}
            group_rows = set(rows_read(i, shape))
            for j in range(i + 1, len(eqns)):
                e, s = eqns[j], shapes[j]
                if s is None or (reduces[j] and s != shape) or e.phase != first.phase:
                    continue
                mine = rows_read(j, shape)
                if not (mine & group_rows or reads[j] & outs):
                    continue    # joins what reads the group's values, or the rows it reads
                trial = group + [j]
                trial_order = _schedule(sched, trial)
                if trial_order is None:
                    continue
                trial_fused = self.merged(sched, trial)
                if not fits(trial_fused.params["body"], shape, self.target):
                    continue
                group, fused, order = trial, trial_fused, trial_order
                outs |= {sched.root(o) for o in e.outputs}
                group_rows |= mine
            if fused is not None:
                before, after = order
                lo, hi = group[0], group[-1]
                new = eqns[:lo] + [eqns[k] for k in before] + [fused] + \
                    [eqns[k] for k in after] + eqns[hi + 1:]
                return program.replace(eqns=tuple(new))
        return None

    @staticmethod
    def merged(sched: Schedule, members: list):
        """The members as one `fused[kind=row]` eqn, writing the values someone else reads."""
        eqns = [sched.eqns[m] for m in members]
        mine = {o for e in eqns for o in e.outputs}
        subst, extra, body_eqns = {}, [], []
        for e in eqns:
            body = body_of(e)
            for v in body.inputs:           # a member reading another's value through a view
                if sched.root(v) in mine and v not in mine:
                    for a in sched.alias_path(v):
                        if a.prim is save_p:
                            subst[a.out] = subst.get(a.inputs[0], a.inputs[0])
                        else:
                            extra.append(a.replace(inputs=tuple(subst.get(x, x)
                                                                for x in a.inputs)))
            body_eqns += body.eqns
        body_eqns = [b.replace(inputs=tuple(subst.get(x, x) if isinstance(x, Var) else x
                                            for x in b.inputs))
                     if any(isinstance(x, Var) and x in subst for x in b.inputs) else b
                     for b in extra + body_eqns]
        members = set(members)
        outs = [o for e in eqns for o in e.outputs
                if o in sched.returned or any(r not in members for r in sched.readers.get(o, []))]
        return make_fused(list(dict.fromkeys(body_eqns)), outs, "row", like=eqns[0])


def _schedule(sched: Schedule, members: list):
    """(the positions between the members that stay before the merged kernel, those that move
    after it), or None when a member needs something that needs the group (a cycle)."""
    member_set = set(members)
    tainted, after_roots = set(), set()
    before, after = [], []
    for k in range(members[0], members[-1] + 1):
        e = sched.eqns[k]
        reads = {sched.root(x) for x in e.inputs if isinstance(x, Var)}
        if k in member_set:
            if reads & after_roots:
                return None
            tainted |= {sched.root(o) for o in e.outputs}
        elif reads & tainted:
            after.append(k)
            tainted |= {sched.root(o) for o in e.outputs}
            if e.prim not in VIEWS:
                after_roots |= {sched.root(o) for o in e.outputs}
        else:
            before.append(k)
    return before, after


fuse_rows = RowFusion()
