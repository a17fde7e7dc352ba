"""Planner for the argsort kernel (vkgrad/kernels_glsl/argsort.comp): one workgroup per row, a
bitonic sort in shared memory. Rows up to `max_row(target)` elements (what 8 bytes a pair of
shared memory holds: 4096 on the 32 KiB every Vulkan device has); longer rows are a counted
fallback to the interpreter (a multi-pass global-memory sort is not written yet).
"""

from __future__ import annotations

import math

from vkgrad import primitives as P
from vkgrad.lowering.contracts import KernelContract, Unsupported, need_f32, register
from vkgrad.lowering.kernels import OpPlan, _check_sizes, _defines, _pow2_ceil, _wg
from vkgrad.target import target_of
from vkgrad.lowering.launch import Launch, grid

_PAIR_BYTES = 8          # a float key and a uint index per element


def max_row(target=None) -> int:
    shared = target_of(target).max_shared_memory
    return 1 << ((shared // _PAIR_BYTES).bit_length() - 1)


def plan_argsort(rows: int, n: int, *, descending: bool = False, target=None) -> OpPlan:
    """out[r, :] = the stable argsort of x[r, :] (x [rows, n] float32, out int32). Roles: "x",
    "out". Raises ValueError above max_row(target)."""
    _check_sizes(rows=rows, n=n)
    if rows * n == 0:
        return OpPlan(())
    if n > max_row(target):
        raise ValueError(f"argsort of rows of {n} elements: the kernel sorts at most "
                         f"{max_row(target)} per row in shared memory")
    np2 = _pow2_ceil(n)
    wg = _wg(max(1, min(np2 // 2, 256)), target)   # each thread exchanges NP / (2 WG) pairs
    launch = Launch(name="argsort", shader="argsort.comp", bindings=2, groups=grid(rows),
                    push=(rows, n), spec=(wg,), defines=_defines(NP=np2,
                                                                  DESCENDING=descending))
    return OpPlan(((launch, ("x", "out")),))


def plan_eqn(e, target):
    x = e.inputs[0]
    need_f32(e, x)
    if x.shape[-1] > max_row(target):
        raise Unsupported(f"argsort of rows longer than {max_row(target)} (the kernel sorts a row "
                          "in shared memory)")
    plan = plan_argsort(math.prod(x.shape[:-1]), x.shape[-1],
                        descending=e.params["descending"], target=target)
    return plan, {"x": x, "out": e.out}


CONTRACT = register(KernelContract(
    name="argsort", shader="argsort.comp", primitives=(P.argsort_p,), plan=plan_eqn,
    limits="f32; rows up to max_row(target) elements (shared memory)"))
