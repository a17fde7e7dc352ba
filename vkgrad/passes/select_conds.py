"""select_conds: a cond eqn replaced by every branch's eqns and a select of their results.

The kernels have no way to skip a dispatch on a value the device computes, so on the device a
cond runs every branch and keeps the chosen one's results (what a batched predicate means under
vmap too, and what XLA does for small branches). The branches are pure, so this computes the same
values: an unchosen branch's NaN or Inf never reaches a result through the select. Index k is
chosen where k <= index < k + 1 (an index outside the range gets the first or last branch, as
cond_p's meaning clamps it). Branch values get fresh Vars at each site (inline.inline_body).
"""

from __future__ import annotations

from vkgrad.ir.core import Eqn, Literal, Params, Program, Var
from vkgrad.passes.base import Pass, resolve
from vkgrad.passes.inline import inline_body
from vkgrad.primitives import le_p, select_p
from vkgrad.primitives.control_flow import cond_p


class SelectConds(Pass):
    name = "select_conds"

    def apply(self, program: Program) -> Program:
        if not any(e.prim is cond_p for e in program.eqns):
            return program
        eqns, consts, sub = [], list(program.consts), {}
        for e in program.eqns:
            ins = tuple(resolve(sub, x) for x in e.inputs)
            if e.prim is not cond_p:
                eqns.append(e.replace(inputs=ins))
                continue
            results = [inline_body(self.apply(b), ins[1:], e, eqns, consts)
                       for b in e.params["branches"]]
            chosen = results[0]
            for k, res in enumerate(results[1:], 1):
                pick = Var((), "bool")
                eqns.append(Eqn(le_p, (Literal(k, "i32"), ins[0]), Params(), (pick,), e.source,
                                e.phase))
                picked = []
                for r, c, o in zip(res, chosen, e.outputs):
                    v = Var(o.shape, o.dtype)
                    eqns.append(Eqn(select_p, (pick, r, c), Params(), (v,), e.source, e.phase))
                    picked.append(v)
                chosen = picked
            sub.update(zip(e.outputs, chosen))
        return program.replace(eqns=tuple(eqns), consts=tuple(consts),
                               outputs=tuple(resolve(sub, o) for o in program.outputs))


select_conds = SelectConds()
