"""The two primitives the compiler's own passes introduce, defined here beside the others so
every stage (passes, lowering, the runtime's checks) imports them from the primitives layer.

fused[kind, body](*inputs) -> body's outputs: a sub-program run as ONE kernel. Its meaning is
its body (the interpreter runs it), so every stage after fusion still runs on numpy. Kinds:
  loop         elementwise and layout eqns, outputs of one shape (passes/fuse.py)
  horizontal   the same, outputs of several shapes: one dispatch over their concatenated
               index space (passes/fuse_horizontal.py)
  input        one hand-written kernel eqn whose operands are computed in its loads
               (lowering/fusion/producers.py)
  output       ... and/or whose results go through an epilogue at its store
               (lowering/fusion/epilogues.py)
  multi_output two kernel eqns sharing one pass over an operand (lowering/fusion/multi_output.py)
  row          reductions over the last axis of one row shape and the elementwise work around
               them, one workgroup per row (lowering/fusion/rows.py: a layer norm)
  horizontal_reduce
               reduction kernel eqns of any shapes, one dispatch (lowering/fusion/horizontal_reductions.py)

save(x) = x: the value is kept in memory (passes/remat.py, for the backward; passes/fuse.py,
past a chain's bounds; `vg.lax.optimization_barrier`, where the user says so): `save` is not
fusible, so x is written once by whatever kernel computes it and every reader reads it from
there, none recomputes it; the lowering aliases it (no dispatch). Its batching rule is the
identity's; its VJP too, unless `cotangent` is set: then the cotangent is saved as well (JAX's
optimization_barrier, whose transpose is a barrier), so a chain of saved steps (LU's columns,
vkgrad/numpy/decompositions.py) has a backward of saved steps, not one that recomputes the
cotangent chain in every reader (past lavapipe's 32 buffers from n = 8). nn.conv's save leaves
it off: the input's gradient stays fusible.
"""

from vkgrad.ir.core import (Primitive, abstract_eval_rules, batching_rules, param_defaults,
                            vjp_rules)
from vkgrad.ir.interpreter import impls, run_program
from vkgrad.tracer.core import bind

FUSED_KINDS = ("loop", "horizontal", "input", "output", "multi_output", "row",
               "horizontal_reduce")
fused_p = Primitive("fused", ("pure",), multiple_results=True)
param_defaults[fused_p] = {"kind": "loop"}
abstract_eval_rules[fused_p] = lambda *types, body, kind="loop": [o.type for o in body.outputs]
impls[fused_p] = lambda *arrays, body, kind="loop": run_program(body, *arrays)

save_p = Primitive("save", ("pure",))
param_defaults[save_p] = {"cotangent": False}
abstract_eval_rules[save_p] = lambda x, cotangent=False: x
impls[save_p] = lambda x, cotangent=False: x
vjp_rules[save_p] = lambda g, ans, x, cotangent=False: (save(g, True) if cotangent else g,)
batching_rules[save_p] = lambda args, dims, cotangent=False: (
    bind(save_p, args[0], cotangent=cotangent), dims[0])


def save(x, cotangent: bool = False):
    """x, kept in memory; with `cotangent`, its cotangent too (the module's docstring)."""
    return bind(save_p, x, cotangent=bool(cotangent))
