"""Dead code elimination: drop pure eqns none of whose outputs is used, and unused consts.

Removability comes from the primitive's 'pure' trait, never from a list of names here.
"""

from __future__ import annotations

from vkgrad.ir.core import Program, Var
from vkgrad.passes.base import Pass


class DeadCodeElimination(Pass):
    name = "dce"

    def apply(self, program: Program) -> Program:
        live = {o for o in program.outputs if isinstance(o, Var)}
        kept = []
        for e in reversed(program.eqns):
            if not e.prim.pure or any(o in live for o in e.outputs):
                kept.append(e)
                live.update(x for x in e.inputs if isinstance(x, Var))
        return program.replace(eqns=tuple(reversed(kept)),
                               consts=tuple((v, a) for v, a in program.consts if v in live))


dce = DeadCodeElimination()
