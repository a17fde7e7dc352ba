"""Planner and contract of the running-sum kernel (vkgrad/kernels_glsl/cumsum.comp): one
workgroup per row of x [rows, n], chunks of 4 WG elements scanned in shared memory with a
carry between chunks (the kernel's comment says how). f32 and i32; no fused loads or stores.
"""

from __future__ import annotations

import math

from vkgrad import primitives as P
from vkgrad.lowering.contracts import KernelContract, Unsupported, register
from vkgrad.lowering.kernels import OpPlan, _check_sizes, _defines, _pow2_ceil, _wg
from vkgrad.lowering.launch import Launch, cdiv, grid
from vkgrad.target import target_of

# Counted loop iterations per chunk, for devices that end long loops (Target
# .max_loop_iterations): the two 4-element loops and log2(WG) scan steps, with room to spare.
ITERATIONS_PER_CHUNK = 32


def plan_cumsum(rows: int, n: int, *, reverse: bool = False, ints: bool = False,
                target=None) -> OpPlan:
    """out[r, i] = sum of x[r, :i + 1] (of x[r, i:] with reverse). Roles "x", "out"."""
    _check_sizes(rows=rows, n=n)
    if rows * n == 0:
        return OpPlan(())
    wg = _wg(max(1, min(256, _pow2_ceil(cdiv(n, 4)))), target)
    limit = target_of(target).max_loop_iterations
    if limit and cdiv(n, 4 * wg) * ITERATIONS_PER_CHUNK > limit:
        raise ValueError(f"cumsum over {n} elements: {target_of(target).name} ends a shader's "
                         f"loops after {limit} iterations")
    launch = Launch(name="cumsum", shader="cumsum.comp", bindings=2, groups=grid(rows),
                    push=(rows, n), spec=(wg,), defines=_defines(REVERSE=reverse, INT=ints))
    return OpPlan(((launch, ("x", "out")),))


def plan_eqn(e, target):
    x = e.inputs[0]
    if x.dtype not in ("f32", "i32"):
        raise Unsupported(f"cumsum of {x.dtype} (the kernel computes in f32 or i32)", e)
    try:
        plan = plan_cumsum(math.prod(x.shape[:-1]), x.shape[-1], reverse=e.params["reverse"],
                           ints=x.dtype == "i32", target=target)
    except ValueError as err:
        raise Unsupported(str(err), e) from None
    return plan, {"x": x, "out": e.out}


CONTRACT = register(KernelContract(
    name="cumsum", shader="cumsum.comp", primitives=(P.cumsum_p,), plan=plan_eqn,
    dtypes=("f32", "i32"), limits="along the last axis"))
