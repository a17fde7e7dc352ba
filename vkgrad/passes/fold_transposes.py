"""Fold a transpose of the last two axes into the matmul that consumes it.

    matmul[transpose_b=False](A, transpose[perm=(1,0)](B))  ->  matmul[transpose_b=True](A, B)

(and likewise for A, and for batched (0,2,1) transposes). `A @ B.T` written by a user becomes
one matmul: the kernel reads B transposed instead of a transpose kernel writing a copy
(the backward of a matmul then needs no transpose kernel). And a transpose OF a matmul result that
nothing else uses becomes the swapped matmul, since (op(A) op(B))^T = op(B)^T op(A)^T:

    transpose[perm=(1,0)](matmul[ta, tb](A, B))  ->  matmul[not tb, not ta](B, A)

(the weight gradient of `x @ W.T` is one matmul). Eqns left without users are removed (DCE).
"""

from __future__ import annotations

from vkgrad.ir.core import Program, Var
from vkgrad.passes.base import Pass
from vkgrad.passes.dce import dce
from vkgrad.primitives import matmul_p, transpose_p


def _swaps_last_two(perm) -> bool:
    n = len(perm)
    return n >= 2 and tuple(perm) == tuple(range(n - 2)) + (n - 1, n - 2)


class FoldTransposes(Pass):
    name = "fold_transposes"

    def apply(self, program: Program) -> Program:
        producer = {o: e for e in program.eqns for o in e.outputs}
        uses: dict = {}
        for e in program.eqns:
            for x in e.inputs:
                uses[x] = uses.get(x, 0) + 1
        for o in program.outputs:
            uses[o] = uses.get(o, 0) + 1
        eqns = []
        for e in program.eqns:
            src = producer.get(e.inputs[0]) if e.inputs and isinstance(e.inputs[0], Var) \
                else None
            if e.prim is transpose_p and _swaps_last_two(e.params["perm"]) and src is not None \
                    and src.prim is matmul_p and uses.get(e.inputs[0]) == 1:
                ta, tb = src.params["transpose_a"], src.params["transpose_b"]
                e = e.replace(prim=matmul_p, inputs=src.inputs[::-1],
                              params=src.params.replace(transpose_a=not tb, transpose_b=not ta))
                eqns.append(e)
                continue
            if e.prim is matmul_p:
                ins, params = list(e.inputs), dict(e.params)
                for i, flag in ((0, "transpose_a"), (1, "transpose_b")):
                    src = producer.get(ins[i]) if isinstance(ins[i], Var) else None
                    if src is not None and src.prim is transpose_p and \
                            _swaps_last_two(src.params["perm"]):
                        ins[i] = src.inputs[0]
                        params[flag] = not params[flag]
                if ins != list(e.inputs):
                    e = e.replace(inputs=tuple(ins), params=e.params.replace(**params))
            eqns.append(e)
        return dce.apply(program.replace(eqns=tuple(eqns)))


fold_transposes = FoldTransposes()
