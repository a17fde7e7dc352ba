"""widen_halves: 16-bit float operands and results of a hand-written kernel that its contract
does not take (`KernelContract.dtypes_for(e, target)`) go through converts to and from f32 around it.

    y: f16 = matmul a: f16, b: f16
becomes
    a' = convert[f32] a;  b' = convert[f32] b;  y': f32 = matmul a', b';  y = convert[f16] y'

which computes what the interpreter does (a 16-bit operand is exact in f32; the result is
rounded once, vkgrad/ir/interpreter.py). The converts are elementwise: the fusion passes after
this one put them in the kernel's fused loads where its contract takes those, and in
generated kernels otherwise, so a 16-bit operand is read at 16 bits. A contract that lists 'f16'
or 'bf16' in its dtypes gets them as they are (a cooperative-matrix matmul; flash attention at
the shapes its cooperative-matrix kernels take).
"""

from __future__ import annotations

from vkgrad.dtypes import HALF_DTYPES
from vkgrad.ir.core import Eqn, Literal, Params, Var
from vkgrad.lowering.fusion.base import HookFusion
from vkgrad.primitives.lax import convert_p


class WidenHalves(HookFusion):
    name = "widen_halves"

    def apply(self, program):
        eqns, changed = [], False
        for e in program.eqns:
            c = self.contract(e)
            takes = () if c is None else c.dtypes_for(e, self.target)
            if c is None or not _halves(e, takes):
                eqns.append(e)
                continue
            changed = True
            ins = []
            for x in e.inputs:
                if not _needs(x, takes):
                    ins.append(x)
                elif isinstance(x, Literal):
                    ins.append(Literal(x.value, "f32"))
                else:
                    ins.append(_convert(x, "f32", e, eqns))
            outs, back = [], []
            for o in e.outputs:
                if _needs(o, takes):
                    w = Var(o.shape, "f32")
                    back.append(Eqn(convert_p, (w,), Params(dtype=o.dtype), (o,), e.source,
                                    e.phase))
                    outs.append(w)
                else:
                    outs.append(o)
            eqns.append(e.replace(inputs=tuple(ins), outputs=tuple(outs)))
            eqns += back
        return program.replace(eqns=tuple(eqns)) if changed else program


def _needs(x, dtypes) -> bool:
    return x.dtype in HALF_DTYPES and x.dtype not in dtypes


def _halves(e, dtypes) -> bool:
    return any(_needs(x, dtypes) for x in (*e.inputs, *e.outputs))


def _convert(x: Var, dtype: str, e, eqns: list) -> Var:
    w = Var(x.shape, dtype)
    eqns.append(Eqn(convert_p, (x,), Params(dtype=dtype), (w,), e.source, e.phase))
    return w


widen_halves = WidenHalves()
