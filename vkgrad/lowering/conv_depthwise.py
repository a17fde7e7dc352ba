"""Planner of the direct depthwise convolution (vkgrad/kernels_glsl/conv_depthwise.comp): one
output feature per group reading one input feature (Og = 1, I = 1: a depthwise convolution
with channel multiplier 1, its input gradient, Mamba's short conv1d) with a small window.

The implicit GEMM (lowering/conv.py) gives such a convolution a tile of one live column and a k
of the window alone. Measured on the H200 (bench/bench_conv.py, 2026-12-01, before this kernel):
a depthwise 3x3 at N32 C256 28x28 took 739 us forward against cuDNN's 81, and the k = 4 conv1d
at N8 C1024 L2048 1503 us against 187. This kernel is one thread per output element looping
over the window (bound by memory).

A depthwise convolution's weight gradient (Og = 1, but I = the batch and the window the output
gradient: few outputs, each a long sum) runs in the same file's reduction forms:
- DW_SPLIT ("split"), for at most SPLIT_MAX_OUTPUTS outputs per (n, g) (the weights of one
  channel: 9 for a 3x3, 4 for the conv1d): a workgroup per (n, g) and slice of k, each thread
  holding all of its outputs, so the output gradient is read once and not once per weight;
  K is cut into slices (summed after, in a fixed order) for about SPLIT_TARGET_GROUPS
  workgroups (4 per H200 multiprocessor), each slice SPLIT_MIN_K or more. Its first version
  took 181 us at both (H200, 2026-12-01; the transposes before it 54 and 119 more) with 3
  coordinate tests per output and k; a k's coordinates are now tested once per output row
  and column.
- DW_REDUCE ("reduce"), for more outputs: a workgroup per output element. It took 312 us at
  C256 28x28 (cuDNN 113) and 349 at the conv1d (cuDNN 121; H200, 2026-12-01): 2304 and 4096
  workgroups each reading a whole channel, with divisions per element.
lowering/conv.py's planner asks `mode` first.
"""

from __future__ import annotations

import math

from vkgrad.lowering.kernels import OpPlan, _defines, plan_split_sum
from vkgrad.lowering.launch import MAX_GROUPS_X, Launch, cdiv, grid

THREADS = 256
MAX_WINDOW = 256        # window elements per output (the loop each thread runs)
MIN_REDUCE_K = 1024     # k = I * window from which an output element is a workgroup's sum ...
MAX_REDUCE_OUTPUTS = 1 << 20    # ... for at most this many outputs (one workgroup each)
SPLIT_MAX_OUTPUTS = 16  # outputs per (n, g) a thread of DW_SPLIT holds (registers: one sum each)
SPLIT_TARGET_GROUPS = 528
SPLIT_MIN_K = 8 * THREADS


def mixed_radix(n: int, radices: tuple) -> tuple:
    """n's digits in the mixed radix (r0, r1, r2, r3), most significant first; the first digit
    takes what is left (n // (r1 * r2 * r3))."""
    digits = []
    for r in reversed(radices[1:]):
        digits.append(n % r)
        n //= r
    return (n,) + tuple(reversed(digits))


def mode(og: int, i: int, window: int, outputs: int, per_group: int, target) -> str | None:
    """"direct" (a thread per output), "split" (a workgroup per (n, g) and slice of k, for
    `per_group` outputs each), "reduce" (a workgroup per output), or None: the GEMM."""
    if og != 1:
        return None
    if i == 1 and window <= MAX_WINDOW:
        return "direct"
    k = i * window
    if k < MIN_REDUCE_K:
        return None
    if per_group <= SPLIT_MAX_OUTPUTS and outputs // per_group <= MAX_GROUPS_X:
        return "split"
    if outputs <= MAX_REDUCE_OUTPUTS and (
            not target.max_loop_iterations or cdiv(k, THREADS) <= target.max_loop_iterations // 4):
        return "reduce"
    return None


def split_slices(pairs: int, k: int, target, target_groups: int | None = None) -> int:
    """K slices of DW_SPLIT for `pairs` workgroups of (n, g): enough for about
    `target_groups` (default SPLIT_TARGET_GROUPS) workgroups on a GPU, each slice at least
    SPLIT_MIN_K long; on a Target that ends long loops, enough that none loops too long."""
    want = 1
    if target.split_k:
        groups = SPLIT_TARGET_GROUPS if target_groups is None else target_groups
        want = min(cdiv(groups, pairs), max(1, k // SPLIT_MIN_K))
    if target.max_loop_iterations:
        want = max(want, cdiv(cdiv(k, THREADS), target.max_loop_iterations // 4))
    return cdiv(k, cdiv(k, want))        # slices of whole chunks, none empty


# the operand layouts (lowering/conv_layouts.py) each form reads: (x layouts, w layouts)
LAYOUTS = {"direct": ((0,), (0, 1)), "split": ((0, 1), (0, 2)), "reduce": ((0,), (0,))}


def plan_depthwise(push: tuple, outputs: int, how: str, *, k: int = 0, per_group=(1, 1, 1),
                   radix=None, target=None, target_groups: int | None = None,
                   x_layout: int = 0, w_layout: int = 0) -> OpPlan:
    """The dispatches for `outputs` output elements, with conv.comp's push constants less
    its last five (chunk and the k step's digits); for "split", k = I * window, `per_group`
    the output's spatial sizes (OD, OH, OW: the outputs of one (n, g)) and `radix` (I, KD,
    KH, KW), k's mixed radix; `x_layout`, `w_layout` as lowering/conv.py's (LAYOUTS)."""
    xs, ws = LAYOUTS[how]
    if x_layout not in xs or w_layout not in ws:
        raise ValueError(f"operand layouts ({x_layout}, {w_layout}) on the depthwise kernel's "
                         f"{how} form")
    layouts = dict(DW_XL=x_layout, DW_WL=w_layout)
    if how != "split":
        groups = grid(cdiv(outputs, THREADS) if how == "direct" else outputs)
        launch = Launch(name=f"conv_depthwise{'_reduce' if how == 'reduce' else ''}",
                        shader="conv_depthwise.comp", bindings=3, groups=groups,
                        push=push + (0, 0, 0, 0, 0),
                        defines=_defines(**layouts, **({"DW_REDUCE": 1} if how == "reduce"
                                                       else {})))
        return OpPlan(((launch, ("x", "w", "out")),))
    pairs = outputs // math.prod(per_group)
    slices = split_slices(pairs, k, target, target_groups)
    if slices > MAX_GROUPS_X:
        raise ValueError(f"a depthwise weight gradient of {slices} K slices")
    launch = Launch(name="conv_depthwise_split", shader="conv_depthwise.comp", bindings=3,
                    groups=(pairs, slices, 1),
                    push=push + (cdiv(k, slices), *mixed_radix(THREADS, radix)),
                    defines=_defines(DW_SPLIT=1, DW_OD=per_group[0], DW_OH=per_group[1],
                                     DW_OW=per_group[2], **layouts))
    if slices == 1:
        return OpPlan(((launch, ("x", "w", "out")),))
    return plan_split_sum(launch, ("x", "w"), "out", slices, outputs, target=target)
