"""Fusion grouping: elementwise and layout eqns become `fused` eqns, one GPU kernel each.

An eqn is *fusible* when a generated kernel can compute one element of its output from elements
of its operands: its primitive has the 'elementwise' or the 'layout' trait (broadcast_to,
reshape, transpose, slice, pad, concatenate, iota; `Primitive.fusible`). Everything else
(matmul, reductions, softmax, take, scatter_add) is a *kernel* eqn with a hand-written shader.

The rule, as in XLA's loop fusion, with measured reason: a training step is memory-bound outside
its matmuls, so an intermediate that never leaves registers is the win (docs/architecture.md):
  * a fusible value is *materialized* (written to memory) only when a kernel eqn reads it or the
    program returns it; otherwise it is recomputed inline by every fused kernel that needs it;
  * kernels run as late as possible: a kernel's *height* is 0 when no other kernel reads its
    results, else one more than the highest kernel that does; they run in order of decreasing
    height. Materialized values of one shape at the same height share one kernel: equal heights
    cannot depend on each other, so merging never makes a cycle. An Adam update (new param,
    new m, new v) is one kernel, and it runs after every read of the old parameter, so a
    donated parameter can be updated in place.
  * a chain longer than MAX_FUSED_DEPTH dependent ops is cut: every MAX_FUSED_DEPTH-th value is
    materialized (compile time, see there);
  * a value read by two or more eqns whose computation reads more than MAX_FUSED_READS
    distinct values is materialized: every reader would recompute it, and a reader of one
    that is like it again recomputes both (a transformer's residual stream, x_l = x_{l-1} +
    branch_l, was recomputed from every earlier layer's branch in each layer's kernels: the
    medium LM's layer-16 kernel read 36 buffers);
  * a reshape of a value that is materialized anyway is an alias, not a kernel: it stays a plain
    `reshape` eqn, which the lowering turns into a second view of the same buffer.

Also `canonicalize_for_lowering`: reductions over non-adjacent axes become a transpose (fused
into the producer's kernel) and a reduction over trailing-adjacent axes, the form the reduction
kernels take.
"""

from __future__ import annotations

import itertools
import math

from vkgrad import primitives as P
from vkgrad.ir.core import (Eqn, Literal, Params, Primitive, Program, Var, abstract_eval_rules,
                            param_defaults)
from vkgrad.ir.interpreter import impls, run_program
from vkgrad.passes.base import Pass
from vkgrad.primitives.compiler import fused_p

class Fuse(Pass):
    name = "fuse"

    def apply(self, program: Program) -> Program:
        program = _cut_long_chains(_materialize_kernel_literals(program))
        eqns = program.eqns
        fusible = {e for e in eqns if e.prim.fusible}
        producer = {o: e for e in eqns for o in e.outputs}
        returned = {o for o in program.outputs if isinstance(o, Var)}
        kernel_read = {x for e in eqns if e not in fusible for x in e.inputs if isinstance(x, Var)}

        def materialized(v) -> bool:   # in memory without a fused kernel of its own
            # (a literal is in no buffer: a reshape of one is a value to compute, not a view;
            # as a view, x.at[i].set(10.0) bound another buffer in the literal's place)
            return isinstance(v, Var) and producer.get(v) not in fusible

        roots = [e.out for e in eqns if e in fusible and (e.out in returned or e.out in kernel_read)]
        aliases = {r for r in roots if producer[r].prim is P.reshape_p
                   and (materialized(producer[r].inputs[0]) or producer[r].inputs[0] in roots)}
        roots = [r for r in roots if r not in aliases]

        # Height of each kernel: 0 if nothing reads its results from memory, else one more than
        # the highest kernel that does (program order is topological, so walk it backwards).
        # Reshape aliases are transparent: whoever reads the alias reads its source.
        def source(v):
            while v in aliases:
                v = producer[v].inputs[0]
            return v

        need: dict = {}     # materialized value -> 1 + height of its highest reader
        height: dict = {}   # kernel eqn (or root's eqn) -> height
        cones, position = {}, {e: i for i, e in enumerate(eqns)}
        for e in reversed(eqns):
            if e in fusible and e.out not in roots:
                continue
            if e in fusible:
                cone, leaves = _cone(e, fusible, producer)
                cones[e.out] = cone
            else:
                leaves = [x for x in e.inputs if isinstance(x, Var)]
            h = height[e] = max((need.get(o, 0) for o in e.outputs), default=0)
            for x in leaves:
                x = source(x)
                need[x] = max(need.get(x, 0), h + 1)

        groups: dict = {}
        for r in roots:
            groups.setdefault((height[producer[r]], r.shape), []).append(r)
        scheduled = []   # (height, position, eqn)
        for (h, _), rs in groups.items():
            body_eqns = sorted(set().union(*(cones[r] for r in rs)), key=position.__getitem__)
            inputs = body_inputs(body_eqns)
            body = Program(f"fused_{len(scheduled)}", tuple(inputs), tuple(rs), tuple(body_eqns))
            first = producer[rs[0]]
            fe = Eqn(fused_p, tuple(inputs), Params(kind="loop", body=body), tuple(rs),
                     first.source, first.phase)
            scheduled.append((h, min(position[producer[r]] for r in rs), fe))
        for e in eqns:
            if e not in fusible:
                scheduled.append((height[e], position[e], e))
            elif e.out in aliases:   # right after its source's kernel
                src = producer.get(source(e.out))
                scheduled.append((height.get(src, max(height.values(), default=0) + 1),
                                  position[e], e))
        scheduled.sort(key=lambda t: (-t[0], t[1]))
        return program.replace(eqns=tuple(e for _, _, e in scheduled))


# The longest chain of dependent ops one generated kernel computes. LLVM's compile time grows
# faster than the kernel (lavapipe: a 3,000-op chain compiled in 5 s as one kernel, a 10,000-op
# one had not in 14 minutes), and a GPU loses nothing measurable writing one value in a thousand
# ops to memory.
MAX_FUSED_DEPTH = 1000
# The most distinct values a shared fusible value may be computed from before it is kept in
# memory (the same bound as passes/remat.py's MAX_RECOMPUTE_READS, for the same reason).
MAX_FUSED_READS = 8
# ... for values this large: recomputing a small one costs little wherever it is read, and
# keeping it in memory cost the tiny LM three donations (an optimizer value written before the
# last read of the parameter it would overwrite)
MIN_CUT_ELEMENTS = 1 << 16


def _cut_long_chains(program: Program) -> Program:
    """Every MAX_FUSED_DEPTH-th value of a chain of fusible eqns kept in memory, and every value
    with two or more readers made from more than MAX_FUSED_READS values: `save` (not fusible,
    so the value is a kernel's output, and no later fusion computes it in a reader's loads)
    read by the rest of the chain. An eqn's depth is one more than its deepest fusible
    operand's, and its reads its fusible operands' reads and its other operands; a saved
    value's depth is 0 and its reads itself."""
    readers: dict = {}
    for e in program.eqns:
        for x in e.inputs:
            if isinstance(x, Var):
                readers[x] = readers.get(x, 0) + 1
    depth, reads, rename, eqns = {}, {}, {}, []
    for e in program.eqns:
        if rename:
            e = e.replace(inputs=tuple(rename.get(x, x) if isinstance(x, Var) else x
                                       for x in e.inputs))
        eqns.append(e)
        if not e.prim.fusible:
            continue
        d = 1 + max((depth.get(x, 0) for x in e.inputs if isinstance(x, Var)), default=0)
        mine = set()
        for x in e.inputs:
            if isinstance(x, Var):
                mine |= reads.get(x, {x})
        if len(mine) > MAX_FUSED_READS + 1:     # past the bound is all that matters: a wide
            mine = set(itertools.islice(mine, MAX_FUSED_READS + 1))   # sum stays linear
        if d >= MAX_FUSED_DEPTH or (len(mine) > MAX_FUSED_READS and readers.get(e.out, 0) > 1
                                    and math.prod(e.out.shape) >= MIN_CUT_ELEMENTS):
            saved = Var(e.out.shape, e.out.dtype)
            eqns.append(Eqn(P.save_p, (e.out,), Params(), (saved,), e.source, e.phase))
            rename[e.out], d, mine = saved, 0, {saved}
        depth[e.out], reads[e.out] = d, mine
    return program.replace(eqns=tuple(eqns)) if rename else program


def body_inputs(eqns) -> list:
    """What `eqns` read and do not define, in order of first use: a body's inputs."""
    defined = {o for e in eqns for o in e.outputs}
    inputs = []
    for e in eqns:
        for x in e.inputs:
            if isinstance(x, Var) and x not in defined and x not in inputs:
                inputs.append(x)
    return inputs


def _cone(root_eqn, fusible, producer):
    """The fusible eqns `root_eqn` needs (itself included), and the values they read from memory."""
    cone, leaves, stack = set(), set(), [root_eqn]
    while stack:
        e = stack.pop()
        if e in cone:
            continue
        cone.add(e)
        for x in e.inputs:
            if not isinstance(x, Var):
                continue
            p = producer.get(x)
            if p is not None and p in fusible:
                stack.append(p)
            else:
                leaves.add(x)
    return cone, leaves


def _materialize_kernel_literals(program: Program) -> Program:
    """A kernel eqn reads buffers: give a literal operand its own (fused) value first."""
    out = []
    for e in program.eqns:
        if not e.prim.fusible and any(isinstance(x, Literal) for x in e.inputs):
            ins = []
            for x in e.inputs:
                if isinstance(x, Literal):
                    v = Var((), x.dtype)
                    out.append(Eqn(P.broadcast_to_p, (x,), Params(shape=()), (v,), e.source, e.phase))
                    x = v
                ins.append(x)
            e = e.replace(inputs=tuple(ins))
        out.append(e)
    return program.replace(eqns=tuple(out))


class FuseNothing(Pass):
    """What runs instead of `fuse` when fusion is switched off (VKGRAD_DISABLE_PASSES=fuse):
    every elementwise or layout eqn is a kernel of its own and every value is written to
    memory (a reshape stays an alias of its operand's buffer). The baseline fusion is
    measured against."""
    name = "fuse_nothing"

    def apply(self, program: Program) -> Program:
        out = []
        for e in _materialize_kernel_literals(program).eqns:
            if e.prim.fusible and e.prim is not P.reshape_p:
                body = Program(f"fused_{len(out)}", tuple(dict.fromkeys(
                    x for x in e.inputs if isinstance(x, Var))), e.outputs, (e,))
                e = Eqn(fused_p, body.inputs, Params(kind="loop", body=body), e.outputs,
                        e.source, e.phase)
            out.append(e)
        return program.replace(eqns=tuple(out))


class CanonicalizeForLowering(Pass):
    """reduce_*[axes] over non-adjacent axes -> transpose the reduced axes to the end first."""
    name = "canonicalize_for_lowering"

    REDUCTIONS = (P.reduce_sum_p, P.reduce_max_p, P.reduce_min_p)

    def apply(self, program: Program) -> Program:
        out = []
        for e in program.eqns:
            axes = e.params.get("axes") if e.prim in self.REDUCTIONS else None
            if axes and list(axes) != list(range(axes[0], axes[0] + len(axes))):
                x = e.inputs[0]
                keep = [d for d in range(x.ndim) if d not in axes]
                perm = tuple(keep + list(axes))
                t = Var(tuple(x.shape[d] for d in perm), x.dtype)
                out.append(Eqn(P.transpose_p, (x,), Params(perm=perm), (t,), e.source, e.phase))
                e = e.replace(inputs=(t,), params=e.params.replace(
                    axes=tuple(range(len(keep), x.ndim))))
            out.append(e)
        return program.replace(eqns=tuple(out))


fuse = Fuse()
fuse_nothing = FuseNothing()
canonicalize_for_lowering = CanonicalizeForLowering()
