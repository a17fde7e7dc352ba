"""Consumer fusion: elementwise work on a kernel's result is done where the kernel stores it.

A loop kernel that reads a matmul's (softmax's, reduction's, take's) result only at the element
it computes (bias add, activation, residual add, scaling, a mask) joins that kernel as its
*epilogue*: the kernel becomes `fused[kind=output]`, computes the loop kernel's outputs in its
store (lowering/hooks.py), and no longer writes its own result unless someone else reads it.
Several outputs are fine (the pre-activation for the backward and the activation for the next
layer), so are several loop kernels on one result.

Conditions, each a reason the work could not run at the store:
  * the loop kernel reads the result (or a reshape of it) only at the element being stored:
    through elementwise eqns of the result's shape, never broadcast or moved by a layout eqn;
  * all its outputs have the result's size (one store, one element of each);
  * everything else it reads exists before the kernel runs;
  * it is cheap at a store: at most EPILOGUE_MAX_EXTRA_INPUTS other full-size inputs and
    EPILOGUE_MAX_OUTPUTS outputs (an optimizer update, three in and three out, stays a kernel
    of its own, for horizontal fusion).
"""

from __future__ import annotations

import math

from vkgrad import primitives as P
from vkgrad.dtypes import is_half
from vkgrad.ir.core import Program, Var
from vkgrad.lowering.fusion.base import EPILOGUE_MAX_EXTRA_INPUTS, EPILOGUE_MAX_OUTPUTS, HookFusion
from vkgrad.passes.dce import dce
from vkgrad.passes.fused_program import Schedule, anchors, body_of, is_loop, kind, make_fused
from vkgrad.primitives.compiler import save_p


class EpilogueFusion(HookFusion):
    name = "fuse_epilogues"

    def apply(self, program: Program) -> Program:
        while True:
            merged = self.merge_one(program)
            if merged is None:
                return dce.apply(program)
            program = merged

    def merge_one(self, program: Program) -> Program | None:
        sched = Schedule(program)
        eqns = sched.eqns
        for k, kern in enumerate(eqns):
            if kind(kern) not in ("kernel", "input", "output"):
                continue
            body = body_of(kern)
            anc = anchors(body)
            if len(anc) != 1 or not self.stores(anc[0]):
                continue
            for j in range(k + 1, len(eqns)):
                f = eqns[j]
                if is_loop(f) and self.fits(kern, anc[0], f, k, sched):
                    merged = self.merge(kern, f, sched)
                    # it runs where the loop kernel ran when nothing in between reads the
                    # kernel's results (as late as possible: a loss and the optimizer step
                    # count then sit next to the optimizer, whose input the count overwrites)
                    if sched.reads_between(k, j - 1, kern.outputs):
                        eqns[k] = merged
                        del eqns[j]
                    else:
                        eqns[j] = merged
                        del eqns[k]
                    return program.replace(eqns=tuple(eqns))
        return None

    def fits(self, kern, anchor, f, k, sched) -> bool:
        if not self.stores(anchor):
            return False
        mine = {o for o in kern.outputs}
        fbody = f.params["body"]
        reads_mine = {v for v in fbody.inputs if sched.root(v) in mine}
        if not reads_mine:
            return False
        size = math.prod(anchor.out.shape)
        if any(math.prod(v.shape) != size for v in reads_mine):
            return False
        if any(math.prod(o.shape) != size for o in f.outputs):
            return False
        # a store writes one element a thread: a 16-bit one is a 16-bit store (hooks.py),
        # which needs the device's 16-bit storage (else two would share a word's write)
        if not self.target.storage_16bit and any(is_half(o.dtype) for o in f.outputs):
            return False
        # only the stored element of the kernel's values: elementwise at their shape, reshapes
        aligned = set(reads_mine)
        for e in fbody.eqns:
            touched = [x for x in e.inputs if isinstance(x, Var) and x in aligned]
            if not touched:
                continue
            if e.prim is P.reshape_p or (e.prim.elementwise and
                                         all(x.shape == e.out.shape for x in touched)):
                aligned.update(e.outputs)
            else:
                return False
        others = [v for v in fbody.inputs if v not in reads_mine]
        if any(v in sched.producer and sched.producer[v] >= k for v in others):
            return False
        extra = {sched.root(v) for v in others if math.prod(v.shape) >= size}
        kbody = body_of(kern)
        after = kbody.eqns[list(kbody.eqns).index(anchor) + 1:]     # its epilogue so far
        extra |= {sched.root(x) for e in after for x in e.inputs if isinstance(x, Var)
                  and x in kbody.inputs and math.prod(x.shape) >= size}
        n_out = len([o for o in kern.outputs if o not in anchor.outputs]) + len(f.outputs)
        return len(extra) <= EPILOGUE_MAX_EXTRA_INPUTS and n_out <= EPILOGUE_MAX_OUTPUTS

    def merge(self, kern, f, sched):
        kbody = body_of(kern)
        mine = set(kern.outputs)
        fbody = f.params["body"]
        # f reads the kernel's values directly or through aliases: a reshape joins the body, a
        # `save` is the value itself
        subst, extra = {}, []
        for v in fbody.inputs:
            if sched.root(v) in mine and v not in mine:
                for e in sched.alias_path(v):
                    if e.prim is save_p:
                        subst[e.out] = subst.get(e.inputs[0], e.inputs[0])
                    else:
                        extra.append(e.replace(inputs=tuple(subst.get(x, x) for x in e.inputs)))
        f_eqns = [e.replace(inputs=tuple(subst.get(x, x) if isinstance(x, Var) else x
                                         for x in e.inputs)) if any(x in subst for x in e.inputs
                                                                  if isinstance(x, Var)) else e
                  for e in fbody.eqns]
        # once each value: an eqn both bodies hold (an elementwise producer fused into both,
        # its operand a save's alias in one of them) is the same value
        eqns, defined = [], set()
        for e in list(kbody.eqns) + extra + f_eqns:
            if not all(o in defined for o in e.outputs):
                eqns.append(e)
                defined.update(e.outputs)
        readers_left = {o for o in kern.outputs
                        if o in sched.returned or any(
                            sched.eqns[r] is not f for r in sched.readers.get(o, []))}
        outs = [o for o in kern.outputs if o in readers_left] + list(f.outputs)
        return make_fused(eqns, outs, "output", like=kern)


fuse_epilogues = EpilogueFusion()
