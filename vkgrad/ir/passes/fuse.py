"""Fusion grouping: elementwise and layout eqns become `fused` eqns, one GPU kernel each.

An eqn is *fusible* when the GLSL lowering can compute one element of its output from elements
of its operands (`vkgrad.lowering.elementwise.is_fusible`: elementwise primitives, broadcast_to,
reshape, transpose, slice, pad, concatenate, iota). Everything else (matmul, reductions, softmax,
take, scatter_add) is a *kernel* eqn with a hand-written shader.

The rule, as in XLA's loop fusion, with measured reason: a training step is memory-bound outside
its matmuls, so an intermediate that never leaves registers is the win (DESIGN.md):
  * a fusible value is *materialized* (written to memory) only when a kernel eqn reads it or the
    program returns it; otherwise it is recomputed inline by every fused kernel that needs it;
  * materialized values of one shape that sit at the same *level* (1 + the deepest level of the
    materialized values they read) share one kernel: equal levels cannot depend on each other,
    so merging them never makes a cycle. An Adam update (new param, new m, new v) is one kernel.
  * a reshape of a value that is materialized anyway is an alias, not a kernel: it stays a plain
    `reshape` eqn, which the lowering turns into a second view of the same buffer.

Also `canonicalize_for_lowering`: reductions over non-adjacent axes become a transpose (fused
into the producer's kernel) and a reduction over trailing-adjacent axes, the form the reduction
kernels take.
"""

from __future__ import annotations

from vkgrad.ir.core import Eqn, Literal, Params, Primitive, Program, Var, abstract_eval_rules
from vkgrad.ir.interpreter import impls, run_program
from vkgrad.ir.passes.base import Pass
from vkgrad.ir import primitives as P

# fused[body](*inputs) -> body's outputs: a sub-program of fusible eqns run as ONE kernel.
fused_p = Primitive("fused", ("pure",), multiple_results=True)
abstract_eval_rules[fused_p] = lambda *types, body: [o.type for o in body.outputs]
impls[fused_p] = lambda *arrays, body: run_program(body, *arrays)


def _is_fusible(prim) -> bool:
    from vkgrad.lowering.elementwise import is_fusible
    return is_fusible(prim)


class Fuse(Pass):
    name = "fuse"

    def apply(self, program: Program) -> Program:
        program = _materialize_kernel_literals(program)
        eqns = program.eqns
        fusible = {e for e in eqns if _is_fusible(e.prim)}
        producer = {o: e for e in eqns for o in e.outputs}
        returned = {o for o in program.outputs if isinstance(o, Var)}
        kernel_read = {x for e in eqns if e not in fusible for x in e.inputs if isinstance(x, Var)}

        def materialized(v) -> bool:   # in memory without a fused kernel of its own
            return producer.get(v) not in fusible

        roots = [e.out for e in eqns if e in fusible and (e.out in returned or e.out in kernel_read)]
        aliases = {r for r in roots if producer[r].prim is P.reshape_p
                   and (materialized(producer[r].inputs[0]) or producer[r].inputs[0] in roots)}
        roots = [r for r in roots if r not in aliases]

        level: dict = {}   # materialized value -> level

        def level_of(v):
            if v in aliases:
                return level_of(producer[v].inputs[0])
            return level.get(v, 0)   # program inputs and consts: 0

        cones = {}
        position = {e: i for i, e in enumerate(eqns)}
        for e in eqns:   # program order is topological, so operands' levels are known
            if e in fusible:
                if e.out in roots:
                    cone, leaves = _cone(e, fusible, producer)
                    cones[e.out] = cone
                    level[e.out] = 1 + max((level_of(x) for x in leaves), default=0)
            else:
                lv = 1 + max((level_of(x) for x in e.inputs if isinstance(x, Var)), default=0)
                for o in e.outputs:
                    level[o] = lv

        groups: dict = {}
        for r in roots:
            groups.setdefault((level[r], r.shape), []).append(r)
        scheduled = []   # (level, position, eqn)
        for (lv, _), rs in groups.items():
            body_eqns = sorted(set().union(*(cones[r] for r in rs)), key=position.__getitem__)
            defined = {o for e in body_eqns for o in e.outputs}
            inputs = []
            for e in body_eqns:
                for x in e.inputs:
                    if isinstance(x, Var) and x not in defined and x not in inputs:
                        inputs.append(x)
            body = Program(f"fused_{len(scheduled)}", tuple(inputs), tuple(rs), tuple(body_eqns))
            first = producer[rs[0]]
            fe = Eqn(fused_p, tuple(inputs), Params(body=body), tuple(rs), first.source,
                     first.phase)
            scheduled.append((lv, min(position[producer[r]] for r in rs), fe))
        for e in eqns:
            if e not in fusible:
                scheduled.append((level[e.outputs[0]], position[e], e))
            elif e.out in aliases:
                scheduled.append((level_of(e.out), position[e], e))
        scheduled.sort(key=lambda t: (t[0], t[1]))
        return program.replace(eqns=tuple(e for _, _, e in scheduled))


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
        if not _is_fusible(e.prim) and any(isinstance(x, Literal) for x in e.inputs):
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
canonicalize_for_lowering = CanonicalizeForLowering()
