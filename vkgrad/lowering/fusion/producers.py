"""Producer fusion: an elementwise chain that only feeds kernels is computed inside their loads.

After loop fusion (fuse.py) every value a hand-written kernel reads is written to memory by a
`fused` loop kernel first. When every reader of such a value can compute it in its own loads
(the kernel contracts' `fused_loads`: reductions, softmax and its backward, take, and matmul
operands for cheap chains), the value's cone of eqns moves into each reader, which becomes a
`fused[kind=input]` eqn, and the loop kernel loses that output (and disappears when it has none
left). `sum(x * y)` then reads x and y once and never writes x * y; a mask and scale feeding a
softmax are applied as the softmax reads its row (the transformer's score tensor: two kernels
and two passes over [B, H, L, L] fewer).

Worth it when it moves fewer bytes: with `full` full-size inputs to the chain and `n` readers,
inlining reads n * full elements per element, materializing reads full (unless the loop kernel
stays for other outputs), writes 1 and reads n. A matmul reads each operand element many
times (once per tile of the other operand), so only short chains that read one full-size input
go into its loads (its contract's load_max_cost, load_max_full_inputs): relu(x + b), a
transpose, a broadcast.

Values kept in memory on purpose stay there: program results, and values the save-or-recompute
pass marked with `save`.
"""

from __future__ import annotations

from vkgrad.ir.core import Program, Var
from vkgrad.lowering.fusion.base import HookFusion
from vkgrad.passes.dce import dce
from vkgrad.passes.fused_program import (Schedule, anchors, body_of, chain_cost, is_loop, kind,
                                         make_fused, needed)
from vkgrad.primitives.compiler import save_p


class ProducerFusion(HookFusion):
    name = "fuse_producers"

    def apply(self, program: Program) -> Program:
        sched = Schedule(program)
        saved = {sched.root(e.inputs[0]) for e in program.eqns if e.prim is save_p}
        eqns = list(program.eqns)
        for i in range(len(eqns)):
            f = eqns[i]
            if f is None or not is_loop(f):
                continue
            for x in f.outputs:
                if x in sched.returned or x in saved or not sched.readers.get(x):
                    continue
                readers = sched.readers[x]
                if not all(self.accepts(eqns[r], x, sched) for r in readers):
                    continue
                if not self.profitable(f, x, [eqns[r] for r in readers], sched):
                    continue
                cone = needed(f.params["body"].eqns, [x])
                for r in readers:
                    eqns[r] = self.attach(eqns[r], x, cone, sched)
                f = self.drop_output(f, x)
                if f is None:
                    break
            eqns[i] = f
        out = program.replace(eqns=tuple(e for e in eqns if e is not None))
        return dce.apply(out)   # the aliases of inlined values are dead now

    @staticmethod
    def _views(r, x, sched) -> list:
        return [v for v in r.inputs if isinstance(v, Var) and sched.root(v) is x]

    def accepts(self, r, x, sched) -> bool:
        """Can kernel eqn `r` compute x (or its reshape) in its loads?"""
        if kind(r) not in ("kernel", "input", "output"):
            return False
        views = set(self._views(r, x, sched))
        for a in anchors(body_of(r)):
            allowed = self.loads(a)
            for pos, v in enumerate(a.inputs):
                if v in views and pos not in allowed:
                    return False
        return True

    def profitable(self, f, x, readers, sched) -> bool:
        body = f.params["body"]
        c, full = chain_cost(body, x)
        for r in readers:
            views = set(self._views(r, x, sched))
            for a in anchors(body_of(r)):
                contract = self.contract(a)
                if not views & set(a.inputs) or contract is None:
                    continue
                if contract.load_max_cost is not None and c > contract.load_max_cost or \
                        contract.load_max_full_inputs is not None and \
                        full > contract.load_max_full_inputs:
                    return False
        n = len(readers)
        stays = len(f.outputs) > 1
        return n * full <= (0 if stays else full) + 1 + n

    def attach(self, r, x, cone, sched):
        """Reader `r` with x's cone (and the reshapes between x and what r reads) in its body."""
        body = body_of(r)
        paths = [e for v in self._views(r, x, sched) for e in sched.alias_path(v)]
        new = list(dict.fromkeys(cone + paths))
        existing = set(body.eqns)
        eqns = [e for e in new if e not in existing] + list(body.eqns)
        k = kind(r)
        return make_fused(eqns, r.outputs, "input" if k == "kernel" else k, like=r)

    @staticmethod
    def drop_output(f, x):
        body = f.params["body"]
        keep = tuple(o for o in f.outputs if o is not x)
        if not keep:
            return None
        return make_fused(needed(body.eqns, keep), keep, "loop", like=f)


fuse_producers = ProducerFusion()
