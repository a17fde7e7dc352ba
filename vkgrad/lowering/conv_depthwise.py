"""Planner of the direct depthwise convolution (vkgrad/kernels_glsl/conv_depthwise.comp): one
output feature per group reading one input feature (Og = 1, I = 1: a depthwise convolution
with channel multiplier 1, its input gradient, Mamba's short conv1d) with a small window.

The implicit GEMM (lowering/conv.py) gives such a convolution a tile of one live column and a k
of the window alone. Measured on the H200 (bench/bench_conv.py, 2026-12-01, before this kernel):
a depthwise 3x3 at N32 C256 28x28 took 739 us forward against cuDNN's 81, and the k = 4 conv1d
at N8 C1024 L2048 1503 us against 187. This kernel is one thread per output element looping
over the window (bound by memory). lowering/conv.py's planner asks `applies` first; the weight
gradient of a depthwise convolution (Og = 1 but I = the batch, a long window) stays a GEMM.
"""

from __future__ import annotations

from vkgrad.lowering.kernels import OpPlan
from vkgrad.lowering.launch import Launch, cdiv, grid

THREADS = 256
MAX_WINDOW = 256        # window elements per output (the loop each thread runs)


def applies(og: int, i: int, window: int) -> bool:
    return og == 1 and i == 1 and window <= MAX_WINDOW


def plan_depthwise(push: tuple, outputs: int) -> OpPlan:
    """The one dispatch for `outputs` output elements, with conv.comp's push constants."""
    launch = Launch(name="conv_depthwise", shader="conv_depthwise.comp", bindings=3,
                    groups=grid(cdiv(outputs, THREADS)), push=push)
    return OpPlan(((launch, ("x", "w", "out")),))
