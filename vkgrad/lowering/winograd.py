"""Winograd F(2x2, 3x3): a planned path of the convolution (lowering/conv.py's `plan_conv`) for
3x3, stride-1, undilated, ungrouped 2-D convolutions with enough channels: the forward, and the
input gradient, which is such a convolution of the output gradient with the kernel flipped and
transposed (read in place: conv_layouts' w layout 1). Four dispatches
(vkgrad/kernels_glsl/winograd.comp has the algebra):
  1. the weight transform U = G w G^T, [16, C, O] (small: once per call);
  2. the input transform V = B^T d B of every 4 x 4 input tile (stride 2, overlap 2), [16, C, Tp];
  3. a batched GEMM over the 16 matrices, M[e] = U[e]^T V[e], [16, O, Tp] (or its transpose,
     where O does not fill 128-row tiles): the matmul kernel and its planner
     (lowering/matmul.py), not a GEMM of its own;
  4. the output transform A^T M A into the 2 x 2 outputs of each tile.
2.25x fewer multiplies than the direct convolution (16 products a tile of 4 outputs instead of
36), for the traffic of V and M: 2 x 16 x C x T floats each written and read once (C128 28x28,
N32: T = 6272 tiles, 51 MB each). A fused epilogue (a bias, an activation) runs in the output
transform's store (VKG_STORE_B1).

Numerics: the transforms add and halve, so the result differs from the direct sum by rounding
only, a few ulps of the input tile's and weights' magnitudes (tests/test_conv_winograd.py
checks it against the float64 interpreter).
"""

from __future__ import annotations

from vkgrad.lowering.kernels import OpPlan, Temp, _defines
from vkgrad.lowering.launch import Launch, cdiv, grid
from vkgrad.lowering.matmul import VARIANTS as MATMUL_TILES, plan_matmul_op
from vkgrad.target import target_of

TRANSFORMS = 16                 # (xi, nu): the 4 x 4 transformed tile
GEMM_VARIANT = None             # the GEMM's matmul tile (None: its planner's; bench_conv's sweep)


def applies(lhs: tuple, rhs: tuple, window_strides, lhs_dilation, rhs_dilation, groups: int,
            x_layout: int, w_layout: int) -> bool:
    """Whether this convolution is one the Winograd path computes: 2-D, a 3x3 window, stride 1,
    no dilation, one group, x in its own layout and w in its own or an input gradient's
    (flipped, transposed)."""
    return (len(lhs) == 4 and tuple(rhs[2:]) == (3, 3) and tuple(window_strides) == (1, 1)
            and tuple(lhs_dilation) == (1, 1) and tuple(rhs_dilation) == (1, 1) and groups == 1
            and x_layout == 0 and w_layout in (0, 1))


def tiles(out: tuple) -> int:
    """Tp: the GEMM's columns, the output's 2 x 2 tiles rounded up to 4 (vec4 loads)."""
    return cdiv(out[0] * cdiv(out[2], 2) * cdiv(out[3], 2), 4) * 4


def fits(rhs: tuple, out: tuple, target=None) -> bool:
    """Whether the transformed input and output ([16, C, Tp], [16, O, Tp] floats) each fit one
    buffer of the device (else the GEMM kernel runs the convolution, which needs none)."""
    return 4 * TRANSFORMS * max(rhs[:2]) * tiles(out) <= target_of(
        target).max_storage_buffer_range


def plan_winograd(lhs: tuple, rhs: tuple, out: tuple, padding, *, target=None,
                  w_layout: int = 0) -> OpPlan:
    """The dispatches of a convolution `applies` accepts and whose transforms `fits` the
    device (their 32-bit indices then too). Roles "x", "w", "out"; temps "wg_u", "wg_v",
    "wg_m" (and the GEMM's own, where it splits K)."""
    n, c, h, w = lhs
    o = rhs[0]
    oh, ow = out[2:]
    th, tw = cdiv(oh, 2), cdiv(ow, 2)
    tp = tiles(out)
    push = (n, c, h, w, o, oh, ow, padding[0][0], padding[1][0], th, tw, tp)

    def transform(mode, threads, **defines):
        return Launch(name=("winograd_w", "winograd_in", "winograd_out")[mode],
                      shader="winograd.comp", bindings=2, groups=grid(cdiv(threads, 256)),
                      push=push, defines=_defines(WG_MODE=mode, **defines))

    # M = U^T V, [16, O, Tp], where O fills the matmul's 128-row tiles; else M = V^T U,
    # [16, Tp, O] (the features the GEMM's columns: its 64-column `medium` tile, not half
    # of a 128-row block idle)
    mt = o % MATMUL_TILES["large"].bm != 0
    if mt:
        gemm = plan_matmul_op(TRANSFORMS, tp, c, o, True, False, c * tp, c * o, target,
                              variant=GEMM_VARIANT)
        rename = {"a": "wg_v", "b": "wg_u", "c": "wg_m"}
    else:
        gemm = plan_matmul_op(TRANSFORMS, o, c, tp, True, False, c * o, c * tp, target,
                              variant=GEMM_VARIANT)
        rename = {"a": "wg_u", "b": "wg_v", "c": "wg_m"}
    steps = ((transform(0, c * o, WG_WL=w_layout, WG_MT=0), ("w", "wg_u")),
             (transform(1, c * tp, WG_WL=0, WG_MT=0), ("x", "wg_v")),
             *((launch, tuple(rename.get(r, r) for r in roles)) for launch, roles in gemm.steps),
             (transform(2, o * tp, WG_WL=0, WG_MT=mt), ("wg_m", "out")))
    temps = (Temp("wg_u", TRANSFORMS * c * o, "float32"),
             Temp("wg_v", TRANSFORMS * c * tp, "float32"),
             Temp("wg_m", TRANSFORMS * o * tp, "float32")) + gemm.temps
    return OpPlan(steps, temps)
