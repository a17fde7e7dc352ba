"""inline_custom: custom_vjp_call / custom_jvp_call eqns replaced by their bodies' eqns;
inline_checkpoints: the same for checkpoint eqns (vg.checkpoint), in the fused stage.

Their custom rules matter only while the program may still be differentiated; afterwards (the
`final` pipeline, which the jit runs before fusion and lowering) the body is what computes, and
inlined it fuses and simplifies with its neighbours like any other code. Body values get fresh
Vars at each call site (a body inlined twice must not define one Var twice).

A checkpoint eqn stays whole through the optimizer: inlined there, CSE would merge the
backward's recomputation with the forward it repeats, and keep every value after all. The fused
stage inlines it (vkgrad/pipeline.py's FUSE), before save-or-recompute and fusion.
"""

from __future__ import annotations

from vkgrad.ir.core import Program, Var
from vkgrad.passes.base import Pass, resolve
from vkgrad.primitives.control_flow import checkpoint_p
from vkgrad.primitives.custom import CUSTOM_CALLS


class InlineCustom(Pass):
    name = "inline_custom"
    prims = CUSTOM_CALLS

    @staticmethod
    def body(e) -> Program:
        return e.params["rule"].body

    def apply(self, program: Program) -> Program:
        if not any(e.prim in self.prims for e in program.eqns):
            return program
        eqns, consts, sub = [], list(program.consts), {}
        for e in program.eqns:
            ins = tuple(resolve(sub, x) for x in e.inputs)
            if e.prim not in self.prims:
                eqns.append(e.replace(inputs=ins))
                continue
            sub.update(zip(e.outputs, inline_body(self.apply(self.body(e)), ins, e, eqns,
                                                  consts)))
        return program.replace(eqns=tuple(eqns), consts=tuple(consts),
                               outputs=tuple(resolve(sub, o) for o in program.outputs))


class InlineCheckpoints(InlineCustom):
    name = "inline_checkpoints"
    prims = (checkpoint_p,)

    @staticmethod
    def body(e) -> Program:
        return e.params["jaxpr"]


def inline_body(body: Program, ins, e, eqns: list, consts: list) -> list:
    """Append `body`'s eqns, on the operands `ins`, to `eqns` (its consts to `consts`) with
    fresh Vars, in the place of eqn `e` (its phase, and its line where a body eqn has none);
    returns what stands for the body's outputs."""
    env = dict(zip(body.inputs, ins))
    for v, arr in body.consts:
        env[v] = Var(v.shape, v.dtype)
        consts.append((env[v], arr))
    for be in body.eqns:
        outs = tuple(Var(o.shape, o.dtype) for o in be.outputs)
        eqns.append(be.replace(
            inputs=tuple(env.get(x, x) if isinstance(x, Var) else x for x in be.inputs),
            outputs=outs, source=be.source or e.source, phase=e.phase))
        env.update(zip(be.outputs, outs))
    return [env.get(o, o) if isinstance(o, Var) else o for o in body.outputs]


inline_custom = InlineCustom()
inline_checkpoints = InlineCheckpoints()
