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

The weight gradient runs the same algebra transposed (`plan_winograd_wgrad`): the forward's
input transform V, the output gradient's 2 x 2 tiles transformed to 4 x 4 (A dy A^T), 16 GEMMs
over the tiles (a tall K: N x tiles) and G^T M G into the 3 x 3 weights, 2.25x fewer
multiplies again.

Numerics: the transforms add and halve, so the result differs from the direct sum by rounding
only, a few ulps of the input tile's and weights' magnitudes (tests/test_conv_winograd.py
checks it against the float64 interpreter).
"""

from __future__ import annotations

from vkgrad.lowering.kernels import OpPlan, Temp, _defines
from vkgrad.lowering.launch import Launch, cdiv, grid
from vkgrad.lowering.matmul import (TALL_K_SLICE_STEPS, TALL_K_TARGET_GROUPS,
                                    VARIANTS as MATMUL_TILES, plan_matmul_op)
from vkgrad.target import target_of

TRANSFORMS = 16                 # (xi, nu): the 4 x 4 transformed tile
GEMM_VARIANT = None             # the GEMM's matmul tile (None: its planner's; bench_conv's sweep)
# The weight gradient's tall-K GEMMs split into about this many workgroups of the large tile
# (the matmul's tall-K target: one H200 wave of 2 a multiprocessor; bench_conv --set
# winograd.WGRAD_TARGET_GROUPS=N tries others)
WGRAD_TARGET_GROUPS = TALL_K_TARGET_GROUPS
MODE_NAMES = ("winograd_w", "winograd_in", "winograd_out", "winograd_dy", "winograd_dw")


def applies(lhs: tuple, rhs: tuple, window_strides, lhs_dilation, rhs_dilation, groups: int,
            x_layout: int, w_layout: int) -> bool:
    """Whether this convolution is one the Winograd path computes: 2-D, a 3x3 window, stride 1,
    no dilation, one group, x in its own layout and w in its own or an input gradient's
    (flipped, transposed)."""
    return (len(lhs) == 4 and tuple(rhs[2:]) == (3, 3) and tuple(window_strides) == (1, 1)
            and tuple(lhs_dilation) == (1, 1) and tuple(rhs_dilation) == (1, 1) and groups == 1
            and x_layout == 0 and w_layout in (0, 1))


def applies_wgrad(lhs: tuple, rhs: tuple, out: tuple, window_strides, lhs_dilation,
                  rhs_dilation, groups: int, x_layout: int, w_layout: int) -> bool:
    """Whether this convolution is the weight gradient of one `applies` accepts, as the
    primitive writes it (primitives/convolution.py's _grad_rhs) with its views read in place
    (lowering/conv_layouts.py: x [N, C, H, W] viewed [C, N, H, W], x layout 1; the output
    gradient dy [N, O, OH, OW] viewed [O, N, OH, OW], w layout 2) or not (layouts 0), a 3 x 3
    result [C, O, 3, 3] (then transposed to the weights' [O, C, 3, 3] by an op of its own)."""
    return (len(lhs) == 4 and tuple(out[2:]) == (3, 3) and tuple(window_strides) == (1, 1)
            and tuple(lhs_dilation) == (1, 1) and tuple(rhs_dilation) == (1, 1) and groups == 1
            and x_layout in (0, 1) and w_layout in (0, 2))


def tiles(out: tuple) -> int:
    """Tp: the GEMM's columns, the output's 2 x 2 tiles rounded up to 4 (vec4 loads)."""
    return cdiv(out[0] * cdiv(out[2], 2) * cdiv(out[3], 2), 4) * 4


def fits(features: tuple, out: tuple, target=None) -> bool:
    """Whether the transformed tiles ([16, F, Tp] floats for F each of `features`, the
    forward's input and output features; `out` the forward's output shape) each fit one buffer
    of the device (else the GEMM kernel runs the convolution, which needs none)."""
    return 4 * TRANSFORMS * max(features) * tiles(out) <= target_of(
        target).max_storage_buffer_range


def plan_winograd(lhs: tuple, rhs: tuple, out: tuple, padding, *, target=None,
                  w_layout: int = 0) -> OpPlan:
    """The dispatches of a convolution `applies` accepts and whose transforms `fits` the
    device (their 32-bit indices then too). Roles "x", "w", "out"; temps "wg_u", "wg_v",
    "wg_m" (and the GEMM's own, where it splits K)."""
    n, c, h, w = lhs
    o = rhs[0]
    tp = tiles(out)
    transform = _transforms(n, c, h, w, o, out[2:], padding)

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
    return _around(gemm, rename, ((transform(0, c * o, WG_WL=w_layout), ("w", "wg_u")),
                                  (transform(1, c * tp), ("x", "wg_v"))),
                   (transform(2, o * tp, WG_MT=mt), ("wg_m", "out")),
                   {"wg_u": c * o, "wg_v": c * tp, "wg_m": o * tp})


def plan_winograd_wgrad(lhs: tuple, rhs: tuple, out: tuple, padding, *, target=None,
                        x_layout: int = 1, w_layout: int = 2) -> OpPlan:
    """The dispatches of a weight gradient `applies_wgrad` accepts (in its terms: lhs [C, N,
    H, W], rhs [O, N, OH, OW], out [C, O, 3, 3]) and whose transforms fit the device: the
    input transform of the forward (V), the output gradient's (Y), 16 GEMMs M = Y V^T over
    the tiles (a tall K: on a GPU the large tile split into one wave, the matmul's tall-K
    target), and G^T M G. Roles "x", "w", "out"; temps "wg_v", "wg_y", "wg_m" and the GEMM's."""
    c, n, h, w = lhs
    o = rhs[0]
    fwd_out = (n, o) + tuple(rhs[2:])
    tp = tiles(fwd_out)
    transform = _transforms(n, c, h, w, o, rhs[2:], padding)
    options = {}
    if target_of(target).split_k:
        # the large tile where the features fill it, else wide64 (64 x 64, half its threads:
        # twice the workgroups a wave)
        big = MATMUL_TILES["large"]
        name, per_wave = ("large", 1) if o % big.bm == 0 and c % big.bn == 0 else ("wide64", 2)
        tile = MATMUL_TILES[name]
        blocks = TRANSFORMS * cdiv(o, tile.bm) * cdiv(c, tile.bn)
        options = dict(variant=name, splits=max(1, min(
            per_wave * WGRAD_TARGET_GROUPS // blocks, cdiv(tp, tile.bk) // TALL_K_SLICE_STEPS)))
    gemm = plan_matmul_op(TRANSFORMS, o, tp, c, False, True, o * tp, c * tp, target, **options)
    rename = {"a": "wg_y", "b": "wg_v", "c": "wg_m"}
    return _around(gemm, rename, ((transform(1, c * tp, WG_CN=x_layout == 0), ("x", "wg_v")),
                                  (transform(3, o * tp, WG_CN=w_layout == 0), ("w", "wg_y"))),
                   (transform(4, c * o), ("wg_m", "out")),
                   {"wg_v": c * tp, "wg_y": o * tp, "wg_m": o * c})


def _around(gemm: OpPlan, rename: dict, before: tuple, after: tuple, temps: dict) -> OpPlan:
    """The GEMM's plan (its roles renamed) between the transforms `before` and `after`, with
    the transformed matrices `temps` ({role: floats a transform}) and the GEMM's own."""
    steps = (*before, *((launch, tuple(rename.get(r, r) for r in roles))
                        for launch, roles in gemm.steps), after)
    return OpPlan(steps, tuple(Temp(role, TRANSFORMS * size, "float32")
                               for role, size in temps.items()) + gemm.temps)


def _transforms(n, c, h, w, o, out_spatial, padding):
    """A Launch maker for winograd.comp's modes at these sizes (the forward's: its batch n,
    input x [n, c, h, w], o features, output spatial sizes, padding)."""
    oh, ow = out_spatial
    push = (n, c, h, w, o, oh, ow, padding[0][0], padding[1][0], cdiv(oh, 2), cdiv(ow, 2),
            tiles((n, o, oh, ow)))

    def transform(mode, threads, **defines):
        defines = dict(WG_WL=0, WG_MT=0, WG_CN=0) | defines
        return Launch(name=MODE_NAMES[mode], shader="winograd.comp", bindings=2,
                      groups=grid(cdiv(threads, 256)), push=push,
                      defines=_defines(WG_MODE=mode, **defines))
    return transform
