"""Common subexpression elimination: a pure eqn repeating an earlier one (same primitive,
params and operands) is replaced by the earlier one's outputs.

Operands of a 'commutative' primitive are put in a canonical order first, so `add %1, %2` and
`add %2, %1` are one value. The surviving (earlier) eqn keeps its phase and source.
"""

from __future__ import annotations

from vkgrad.ir.core import Literal, Program
from vkgrad.passes.base import Pass, resolve, substitute_outputs


class CommonSubexpressionElimination(Pass):
    name = "cse"

    def apply(self, program: Program) -> Program:
        order = {v: i for i, v in enumerate(program.inputs)}
        order.update((v, len(order) + i) for i, (v, _) in enumerate(program.consts))
        env: dict = {}
        seen: dict = {}
        eqns = []

        def key_of(x):
            return ("lit", x.dtype, x.value) if isinstance(x, Literal) else ("var", order[x])

        for e in program.eqns:
            ins = tuple(resolve(env, x) for x in e.inputs)
            if ins != e.inputs:
                e = e.replace(inputs=ins)
            if e.prim.pure:
                keys = tuple(key_of(x) for x in ins)
                if e.prim.commutative:
                    keys = tuple(sorted(keys, key=repr))
                key = (e.prim, keys, e.params)
                if key in seen:
                    env.update(zip(e.outputs, seen[key].outputs))
                    continue
                seen[key] = e
            for o in e.outputs:
                order[o] = len(order)
            eqns.append(e)
        return program.replace(eqns=tuple(eqns), outputs=substitute_outputs(program, env))


cse = CommonSubexpressionElimination()
