"""Planner for the argsort kernel (vkgrad/kernels_glsl/argsort.comp): one workgroup per row, a
bitonic sort in shared memory. Rows up to `max_row(info)` elements (what 8 bytes a pair of
shared memory holds: 4096 on the 32 KiB every Vulkan device has); longer rows are a counted
fallback to the interpreter (a multi-pass global-memory sort is not written yet).
"""

from __future__ import annotations

from vkgrad.lowering.kernels import OpPlan, _check_sizes, _defines, _pow2_ceil, _wg
from vkgrad.lowering.launch import Launch, grid

_PAIR_BYTES = 8          # a float key and a uint index per element


def max_row(info=None) -> int:
    shared = int(getattr(info, "max_shared_memory", 32768) or 32768)
    return 1 << ((shared // _PAIR_BYTES).bit_length() - 1)


def plan_argsort(rows: int, n: int, *, descending: bool = False, info=None) -> OpPlan:
    """out[r, :] = the stable argsort of x[r, :] (x [rows, n] float32, out int32). Roles: "x",
    "out". Raises ValueError above max_row(info)."""
    _check_sizes(rows=rows, n=n)
    if rows * n == 0:
        return OpPlan(())
    if n > max_row(info):
        raise ValueError(f"argsort of rows of {n} elements: the kernel sorts at most "
                         f"{max_row(info)} per row in shared memory")
    np2 = _pow2_ceil(n)
    wg = _wg(max(1, min(np2 // 2, 256)), info)   # each thread exchanges NP / (2 WG) pairs
    launch = Launch(name="argsort", shader="argsort.comp", bindings=2, groups=grid(rows),
                    push=(rows, n), spec=(wg,), defines=_defines(NP=np2,
                                                                  DESCENDING=descending))
    return OpPlan(((launch, ("x", "out")),))
