"""Planner of the direct depthwise convolution (vkgrad/kernels_glsl/conv_depthwise.comp): one
output feature per group reading one input feature (Og = 1, I = 1: a depthwise convolution
with channel multiplier 1, its input gradient, Mamba's short conv1d) with a small window.

The implicit GEMM (lowering/conv.py) gives such a convolution a tile of one live column and a k
of the window alone. Measured on the H200 (bench/bench_conv.py, 2026-12-01, before this kernel):
a depthwise 3x3 at N32 C256 28x28 took 739 us forward against cuDNN's 81, and the k = 4 conv1d
at N8 C1024 L2048 1503 us against 187. This kernel is one thread per output element looping
over the window (bound by memory). A depthwise convolution's weight gradient (Og = 1, but I =
the batch and the window the output gradient: few outputs, each a long sum; 3.2 ms against
cuDNN's 0.12 at C256 28x28 on the GEMM) runs in the same file's reduce form: a workgroup per
output element. lowering/conv.py's planner asks `mode` first.
"""

from __future__ import annotations

from vkgrad.lowering.kernels import OpPlan, _defines
from vkgrad.lowering.launch import Launch, cdiv, grid

THREADS = 256
MAX_WINDOW = 256        # window elements per output (the loop each thread runs)
MIN_REDUCE_K = 1024     # k = I * window from which an output element is a workgroup's sum ...
MAX_REDUCE_OUTPUTS = 1 << 20    # ... for at most this many outputs (one workgroup each)


def mode(og: int, i: int, window: int, outputs: int, target) -> str | None:
    """"direct" (a thread per output), "reduce" (a workgroup per output), or None: the GEMM."""
    if og != 1:
        return None
    if i == 1 and window <= MAX_WINDOW:
        return "direct"
    k = i * window
    if k >= MIN_REDUCE_K and outputs <= MAX_REDUCE_OUTPUTS and (
            not target.max_loop_iterations or cdiv(k, THREADS) <= target.max_loop_iterations // 4):
        return "reduce"
    return None


def plan_depthwise(push: tuple, outputs: int, how: str) -> OpPlan:
    """The one dispatch for `outputs` output elements, with conv.comp's push constants."""
    groups = grid(cdiv(outputs, THREADS) if how == "direct" else outputs)
    launch = Launch(name=f"conv_depthwise{'_reduce' if how == 'reduce' else ''}",
                    shader="conv_depthwise.comp", bindings=3, groups=groups, push=push,
                    defines=_defines(DW_REDUCE=1) if how == "reduce" else ())
    return OpPlan(((launch, ("x", "w", "out")),))
