"""Planner and contract of the convolution kernels: implicit GEMMs per feature group, C = A B
with one GEMM dimension the output positions (N * out spatial), one the output features, and k
the window (I * window), the input's elements gathered in the kernel (no im2col buffer). The
same kernels run the forward and both gradients, which are convolutions too
(primitives/convolution.py: the input gradient one with lhs dilation, run as its phases, the
weight gradient one whose "window" is the output gradient, so its k runs over N * out spatial).

Two kernels:
- vkgrad/kernels_glsl/conv_gemm.comp, from GEMM_MIN_FEATURES output features per group, 1-D
  and 2-D without lhs dilation: the matmul kernel's tiling (its `large` tile's structure, the
  product step shared through gemm_tile.glsl; lowering/matmul.py's Tile describes the tiles).
  Rows are output features, columns output positions (so stores run along ow). k is (kh, kw,
  c) with channels innermost where I % BK == 0 and the window is short: a k step is BK
  channels at one window offset, so padding is tested once per position and step, and w is
  relaid out [O, KH, KW, I] first (conv_relayout.comp, a small dispatch: w is small) for vec4
  loads along k (every tile but `gemm_small`: CIN_TILES); else w's storage order (c, kh,
  kw), vec4 loads of w where K % 4 == 0. Tiles: GEMM_VARIANTS, chosen by
  `choose_gemm_variant`, a rule fitted to the H200 sweep (its reasoning beside it: work per
  workgroup, workgroups against the 132 multiprocessors, whether K is long enough to split).
- vkgrad/kernels_glsl/conv.comp, for the rest (fewer features per group, 3-D, lhs
  dilation): rows are positions; variants (defines; a thread holds RM x RN accumulators,
  TX x TY threads):

| variant   | threads | block (BM x BN) | BK | for                                                  |
| --------- | ------- | --------------- | -- | ---------------------------------------------------- |
| wide      | 16 x 16 | 64 x 64         | 16 | Og >= 32 output features per group; Og <= 4 with few |
|           |         |                 |    | output positions (a depthwise weight gradient)       |
| narrow    | 64 x 4  | 128 x 16        | 16 | 4 < Og < 32                                          |
| depthwise | 256 x 1 | 512 x 4         | 16 | Og <= 4 (depthwise: Og = 1; short 1-D)               |
| big       | 16 x 16 | 128 x 128       | 16 | Og >= 128 with at most 2304 output positions         |
| tall      | 32 x 8  | 128 x 64        | 16 | 64 <= Og < 128 with at most 2304 output positions    |

The choice follows `bench/bench_conv.py --sweep` on the H200 (2026-12-01; BENCHMARKS.md): the
output positions m = N * out spatial decide as much as Og. A ResNet weight gradient (m = C *
window, at most 2304 here, Og = 64 to 256) runs 10-34% faster on the 128-row tiles (the
C128 stride-2 one 262 -> 174 us); a depthwise weight gradient (m = the window, Og = 1) 4.8x
faster on `wide` than on `depthwise` (17.2 -> 3.6 ms at C256 28x28; 44 -> 8.3 ms for the
Mamba-shaped conv1d), whose 512-row tile it would fill with 9 rows. A forced GEMM variant
(the sweep) that the GEMM kernel cannot run falls back to conv.comp's choice.

Epilogues: elementwise work on the result (a bias, an activation) runs in either kernel's
store (VKG_STORE_B2) unless K is split.

Views: the gradients' flipped and transposed operands are read in place by conv_gemm.comp and
conv_depthwise.comp (lowering/conv_layouts.py finds them; `plan_group` plans such a fused
kernel, binding the viewed buffers).

Split-K: a weight gradient has few output positions (m = C/G * window) and a long k (N * out
spatial), so the k range is split over workgroups (grid z = splits * groups) into partial
results [splits, N, O, P] that a reduction sums in a fixed order (deterministic, no atomics),
on a GPU when the output alone gives fewer than SPLIT_BELOW_GROUPS workgroups (into about
SPLIT_TARGET_THREADS invocations, the matmul's tall-K target; f64 short of F64_MIN_GROUPS
and small with short k into F64_FILL_GROUPS / SMALL_FILL_GROUPS: `choose_gemm_variant`'s
rules) or one would run more than LONG_STEPS k steps, and on a Target whose loops stop early
(lavapipe) wherever one workgroup would loop too long. Measured on the H200 by bench/bench_conv.py (BENCHMARKS.md).

Winograd: plan_conv hands 3x3 stride-1 ungrouped 2-D convolutions (forwards, input gradients)
from the Target's winograd_min_channels features (128 on a GPU, off on lavapipe), and their
weight gradients from WINOGRAD_WGRAD_MIN_CHANNELS (off: not yet measured), to
lowering/winograd.py's F(2x2, 3x3) path (transforms around the matmul kernel's batched GEMM).
Weight gradients of stride-1 convolutions with a long K split into whole waves of the large
tile on a GPU (WGRAD_WAVE_GROUPS, the matmul's tall-K rule).

plan_conv hands one output feature per group to lowering/conv_depthwise.py's kernels where
they apply (a depthwise convolution and its input gradient, directly; its weight gradient's
long sums: the DW_SPLIT form, a workgroup per channel and slice of k, which the H200 Target
plans for bench_conv's depthwise_c256_28 and conv1d_k4_c1024_l2048 weight gradients).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vkgrad import primitives as P
from vkgrad.lowering import conv_depthwise, conv_layouts, winograd
from vkgrad.lowering.conv_depthwise import mixed_radix
from vkgrad.lowering.contracts import KernelContract, Unsupported, need_f32, register
from vkgrad.lowering.kernels import OpPlan, Temp, _defines, plan_split_sum
from vkgrad.lowering.launch import MAX_GROUPS_X, Launch, cdiv, grid
from vkgrad.lowering.matmul import TALL_K_SLICE_STEPS, TALL_K_TARGET_GROUPS, Tile
from vkgrad.target import target_of


@dataclass(frozen=True)
class ConvTile:
    tx: int
    ty: int
    rm: int
    rn: int
    bk: int = 16

    @property
    def bm(self) -> int:
        return self.tx * self.rm

    @property
    def bn(self) -> int:
        return self.ty * self.rn

    @property
    def threads(self) -> int:
        return self.tx * self.ty

    def check(self) -> None:
        """The shader's gathers: every thread loads whole rows of A's tile (BM a multiple or a
        divisor of the thread count, BM * BK a multiple of it)."""
        t = self.threads
        if (self.bm * self.bk) % t or (t % self.bm and self.bm % t):
            raise ValueError(f"conv tile {self} does not divide its A tile among {t} threads")


VARIANTS = {
    "wide": ConvTile(tx=16, ty=16, rm=4, rn=4),
    "narrow": ConvTile(tx=64, ty=4, rm=2, rn=4),
    "depthwise": ConvTile(tx=256, ty=1, rm=2, rn=4),
    "big": ConvTile(tx=16, ty=16, rm=8, rn=8),
    "tall": ConvTile(tx=32, ty=8, rm=4, rn=8),
}

# Counted loop iterations per k step on a Target that ends long loops (lavapipe counts about
# 29 per step of the matmul kernel, whose loops are like these; lowering/matmul.py; one per step
# of conv_gemm.comp: a 70,000-step sum stopped at 65,535 steps): with room.
LOOP_ITERATIONS_PER_STEP = 64
SPLIT_BELOW_GROUPS = 66      # a GPU splits K when the output gives fewer workgroups ...
# ... into about SPLIT_TARGET_THREADS invocations: the matmul's tall-K target, 264 x 256
# threads, so 528 workgroups of the GEMM tiles' 128 threads (4 per H200 multiprocessor). The
# weight gradients split to 132-135 workgroups (1 per multiprocessor) ran at 11-16 TFLOP/s
# where the same kernel's forwards, 196-784 workgroups, ran at 27-34 (H200 sweep,
# 2026-12-01); at 528, C128 28x28's took 308 us (was 509) and C256 14x14 stride 2's 101
# (was 174). f64w (64 x 256) is the exception, SPLIT_TARGET_TILE_THREADS: at C64 56x56 its
# weight gradient (3 column blocks) took 362 us split for 264 workgroups, 482 for 384
# (its 128-slice cap), while f64 took 362 at 640 and large 570 at 530.
SPLIT_TARGET_THREADS = TALL_K_TARGET_GROUPS * 256
SPLIT_TARGET_TILE_THREADS = {"gemm_f64w": TALL_K_TARGET_GROUPS * 128}
SPLIT_MIN_STEPS = TALL_K_SLICE_STEPS   # ... each slice keeping at least this many k steps
MAX_SPLITS = 128             # (the partial sums: splits x the output, written and read once)
LONG_STEPS = 256             # ... and, with enough workgroups, keeps at most this many k steps
                             # per workgroup (a depthwise weight gradient: 256 groups, 1568)


FEW_POSITIONS = 2304          # m at most this: the 128-row tiles (big, tall) for Og >= 64

# The GEMM kernel's tiles (conv_gemm.comp: the matmul kernel's tiling, lowering/matmul.py's
# Tile; rows are output features, columns output positions). always_prefetch as the matmul's:
# on for its `large` (41 -> 47 TFLOP/s there) and the tile of the same step and accumulators
# (f64w), off for `medium` (27 vs 39 with it) and the rest.
GEMM_VARIANTS = {
    "gemm_large": Tile(bm=128, bn=128, bk=8, tm=16, tn=8, always_prefetch=True),  # `large`
    "gemm_f64w": Tile(bm=64, bn=256, bk=8, tm=8, tn=16, always_prefetch=True),
    "gemm_medium": Tile(bm=128, bn=64, bk=16, tm=8, tn=8),     # matmul's `medium`
    "gemm_f64": Tile(bm=64, bn=128, bk=8, tm=8, tn=8),
    "gemm_small": Tile(bm=64, bn=64, bk=16, tm=4, tn=8),
    # For the sweep (choose_gemm_variant picks neither): f64 with 1.5x its columns and
    # large's rows at 3/4 of its columns, 8 x 12 sums a thread: C128 28x28's forward in 262
    # workgroups (2 per H200 multiprocessor, one wave) where f64 gives 392 and large 196
    # (1.5 a multiprocessor); C256 14x14's in 132 (64x192) and 264 (128x96)
    "gemm_64x192": Tile(bm=64, bn=192, bk=8, tm=8, tn=12),
    "gemm_128x96": Tile(bm=128, bn=96, bk=16, tm=8, tn=12),
}
# Channels innermost in k (CG_CIN) on every tile but `small`, where w's storage order ran
# faster at all 6 ResNet shapes' forwards (H200 sweep 2026-12-01: 336 vs 362 us at C64 56x56,
# 144 vs 213 at C256 14x14 stride 2; BK = 16 and 128 threads: 4 threads a position, so a warp's
# loads of x span 4 channel planes; `medium`, the other BK = 16 tile, ran faster with it).
CIN_TILES = frozenset(GEMM_VARIANTS) - {"gemm_small"}
GEMM_MAX_PADDING = 1.25
GEMM_MIN_FEATURES = 32        # fewer output features per group: conv.comp's narrow tiles
CIN_MAX_WINDOW = 64           # channels innermost in k for windows up to this (3x3, 7x7)
# With channels innermost, w is relaid out first (conv_relayout.comp) for vec4 loads of the A
# tile; False: the A tile reads w in place (4 scalars a slot, in any of conv_layouts' layouts),
# one dispatch fewer (the sweep's ".direct").
CIN_RELAYOUT = True
# The rule `choose_gemm_variant` follows, fitted to the H200 sweep of 2026-12-01 (every tile
# at the 6 ResNet shapes, forward and both gradients; kernel us):
# (every tile has 128 threads; they differ in the block each computes)
# - f64 (64 x 128, 8 x 8 sums a thread) was the fastest wherever it gave at least
#   F64_MIN_GROUPS workgroups unsplit (1.5 per multiprocessor): the stride-1 forwards 214-218
#   us against 261-390 on the other tiles, C64 56x56 stride 2 84 against 96-153;
# - with fewer, the 128 x 128 tile (16 x 8 sums a thread: twice f64's work per workgroup)
#   split in K to fill the GPU: C256 14x14 stride 2 forward 105 (+6 for the sum) against f64's 130 (+5),
#   small's 213; the weight gradients at C128 (427 against 498-604) and C256 stride 2 (118);
#   it needs og a multiple of 128 (its padding) and K long enough to split into at least
#   SPLIT_FILL_GROUPS workgroups with SPLIT_MIN_STEPS steps each;
# - 64-feature outputs too small for f64 (a C64 weight gradient: 576 positions): f64w
#   (64 x 256) split in K, 476 us against small's 596 and f64's 616;
# - else (short k, few positions: a stride-2 input gradient's phases, k = 256-1024) the tile
#   with the most workgroups, small, unsplit: C256 14x14 stride 2 160 us (w's order) against
#   large's 170 + 21 for its sums.
F64_MIN_GROUPS = 192
SPLIT_FILL_GROUPS = 132
# Fitted to the sweep at the ResNet-18 step's own convolutions (bench_conv.py's r18_ cases:
# batch 64, 32x32 to 4x4, H200, 2026-12-02; program us, forward / input gradient / weight
# gradient), four more rules, each before the one above it would apply:
# - 64 features with the 64 x 256 tile filling F64_MIN_GROUPS unsplit (the 32x32 stride-1
#   convolutions, m = 65536, k = 576): f64w 145 / 145 us against f64's 188 / 182. Measured
#   up to F64W_MAX_POSITIONS positions and from k = F64W_MIN_K (at C64 56x56, m = 100352, f64
#   ran faster: 221 against 273 us, 2026-12-01);
# - f64 short of F64_MIN_GROUPS, where k >= F64_FILL_MIN_K and m >= F64_FILL_MIN_POSITIONS,
#   split in K into about F64_FILL_GROUPS workgroups (2 per multiprocessor, one wave), not
#   the 128 x 128 tile split for 528: the 8x8 stride-1 convolutions 162 / 165 / 226 us
#   against 185 / 189 / 265, the 4x4 ones 168 / 177 against 200 / 209, the 8x8 -> 4x4
#   stride-2 forward 94 against 122, the 16x16 -> 8x8 weight gradient 143 against 192;
#   more slices measured slower (the 4x4 forward: 4 slices 168, 5 189, 17 179);
# - few output positions (m <= SMALL_MAX_POSITIONS: a weight gradient of 64 input features,
#   or of a 1x1 shortcut) with k up to SMALL_MAX_K: small, split as before (the 32x32 weight
#   gradients 231 / 134 us against f64w's 254 and large's 197; at C64 56x56, k = 100352,
#   f64w measured faster: 476 against 596);
# - small with short k (k <= SMALL_FILL_MAX_K: a stride-2 input gradient's phases, a 1x1
#   shortcut's) split into about SMALL_FILL_GROUPS workgroups of at least SMALL_FILL_STEPS
#   k steps: the 8x8 -> 4x4 block's input gradient 168 against 196 us unsplit, its
#   shortcut's 31 against 45, the 16x16 -> 8x8 one's 167 against 179.
F64W_MAX_POSITIONS = 65536
F64W_MIN_K = 576
F64_FILL_MIN_K = 2304
F64_FILL_MIN_POSITIONS = 1024
F64_FILL_GROUPS = 256
SMALL_MAX_POSITIONS = 576
SMALL_MAX_K = 65536
SMALL_FILL_MAX_K = 2048
SMALL_FILL_GROUPS = 256
SMALL_FILL_STEPS = 8
# Tall-K weight gradients in whole waves, the matmul's tall-K rule (lowering/matmul.py: its TN
# weight gradients over 8,192 tokens run at cuBLAS speed that way), on a GPU Target (split-K):
# from WGRAD_MIN_K (k = N * out spatial, a weight gradient's) with og a multiple of the tile's
# rows and no window dilation (a stride-1 forward's), K split into floor(WGRAD_WAVE_GROUPS /
# blocks) slices, so the workgroups fill whole waves (2 of the large tile a multiprocessor:
# 264 on the H200) instead of spilling a few into another. H200, bench_conv.py, 2026-12-02
# (us): C128 28x28's weight gradient 268 as 9 blocks x 29 slices = 261 workgroups, where the
# f64-fill rule's 18 x 15 = 270 took 343 (large split for 528, 9 x 58, 314); C256 14x14's 265
# (36 x 7) against 336; the ResNet-18 step's C128 16x16 196 against 240. The stride-2 ones
# (a dilated window) lost: C128 28x28 123 against 116, the step's C64 32x32 141 against 133.
# WGRAD_WAVE_ROWS picks the tile by its rows (WGRAD_WAVE_TILES: f64 split for 396, 3 a
# multiprocessor, measured the same at C128 28x28, 266, and slower at C256 14x14, 283).
# WGRAD_WAVE_GROUPS 0: off.
WGRAD_WAVE_GROUPS = TALL_K_TARGET_GROUPS
WGRAD_WAVE_ROWS = 128
WGRAD_WAVE_TILES = {128: "gemm_large", 64: "gemm_f64"}
WGRAD_MIN_K = 6272
# Winograd F(2x2, 3x3) (lowering/winograd.py) for the 3x3 stride-1 convolutions it computes
# (the forward, the input gradient) from this many input and output features; 0: the
# Target's winograd_min_channels (vkgrad/target.py, with its measurements), 1 << 30: off.
WINOGRAD_MIN_CHANNELS = 0
# ... and their weight gradients (the same algebra transposed: a tall-K GEMM over the tiles)
# from this many input and output features of the forward; 1 << 30: off (not yet measured).
WINOGRAD_WGRAD_MIN_CHANNELS = 1 << 30


def choose_variant(og: int, m: int, k: int = 0) -> str:
    """The tile for og output features per group at m output positions and k = I * window:
    the GEMM kernel's from GEMM_MIN_FEATURES features (`choose_gemm_variant`), else
    conv.comp's (table above)."""
    if og >= GEMM_MIN_FEATURES:
        return choose_gemm_variant(og, m, k)
    return choose_gather_variant(og, m)


def choose_gemm_variant(og: int, m: int, k: int) -> str:
    """The rules above: f64w for 64 features with enough workgroups; f64 with enough
    workgroups, or split to fill the GPU where K is long; small for few positions; else the
    first of large and f64w that pads og by at most GEMM_MAX_PADDING and can split K into
    enough workgroups, else small."""
    def blocks(name):
        t = GEMM_VARIANTS[name]
        rows = cdiv(og, t.bm)
        return rows * cdiv(m, t.bn) if rows * t.bm <= GEMM_MAX_PADDING * og else 0

    if og == 64 and blocks("gemm_f64w") >= F64_MIN_GROUPS and m <= F64W_MAX_POSITIONS and \
            k >= F64W_MIN_K:
        return "gemm_f64w"
    if blocks("gemm_f64") >= F64_MIN_GROUPS or blocks("gemm_f64") and k >= F64_FILL_MIN_K \
            and m >= F64_FILL_MIN_POSITIONS:
        return "gemm_f64"
    if m <= SMALL_MAX_POSITIONS and k <= SMALL_MAX_K:
        return "gemm_small"
    for name in ("gemm_large", "gemm_f64w"):
        t = GEMM_VARIANTS[name]
        slices = min(cdiv(k, t.bk) // SPLIT_MIN_STEPS, MAX_SPLITS)
        if blocks(name) and blocks(name) * max(slices, 1) >= SPLIT_FILL_GROUPS:
            return name
    return "gemm_small"


def wave_tile() -> str:
    """The tile of the tall-K weight-gradient rule (WGRAD_WAVE_ROWS)."""
    return WGRAD_WAVE_TILES[WGRAD_WAVE_ROWS]


def wave_slices(og: int, m: int, k: int, rhs_dilation, target=None) -> int:
    """K slices of the tall-K weight-gradient rule (WGRAD_WAVE_GROUPS): as many as fit
    `wave_tile`'s blocks into WGRAD_WAVE_GROUPS workgroups, each SPLIT_MIN_STEPS k steps or
    more; 1 where the rule is off or does not apply (a Target without split-K, a dilated
    window, k short of WGRAD_MIN_K, og not a multiple of the tile's rows, or m padded by more
    than GEMM_MAX_PADDING: a 1x1 shortcut's)."""
    if not WGRAD_WAVE_GROUPS or not target_of(target).split_k or max(rhs_dilation) > 1:
        return 1
    t = GEMM_VARIANTS[wave_tile()]
    if og % t.bm or k < WGRAD_MIN_K or cdiv(m, t.bn) * t.bn > GEMM_MAX_PADDING * m:
        return 1
    blocks = og // t.bm * cdiv(m, t.bn)
    return max(1, min(WGRAD_WAVE_GROUPS // blocks, cdiv(k, t.bk) // SPLIT_MIN_STEPS,
                      MAX_SPLITS))


def choose_gather_variant(og: int, m: int) -> str:
    """conv.comp's tile for og output features per group at m output positions."""
    depthwise = VARIANTS["depthwise"]
    if og <= 4:
        return "depthwise" if m >= depthwise.bm else "wide"
    if og < 32:
        return "narrow"
    if m <= FEW_POSITIONS and og >= 64:
        return "big" if og >= 128 else "tall"
    return "wide"


def choose_splits(groups: int, k: int, tile: ConvTile | Tile, target=None, *,
                  split_threads: int | None = None, below: int = SPLIT_BELOW_GROUPS,
                  min_steps: int = SPLIT_MIN_STEPS) -> int:
    """K slices across workgroups: 1 means none. `split_threads` (default
    SPLIT_TARGET_THREADS): the invocations a split aims at (lower it to force splits), on a
    GPU where the output gives fewer than `below` workgroups, each slice `min_steps` k steps
    or more."""
    target = target_of(target)
    steps = cdiv(k, tile.bk)
    need = 1
    if target.max_loop_iterations:
        need = cdiv(steps, max(1, target.max_loop_iterations // LOOP_ITERATIONS_PER_STEP))
    want = 1
    threads = SPLIT_TARGET_THREADS if split_threads is None else split_threads
    if target.split_k and groups < below:
        want = min(cdiv(cdiv(threads, tile.threads), max(groups, 1)),
                   steps // min_steps, MAX_SPLITS)
    elif target.split_k and steps > LONG_STEPS:
        want = min(cdiv(steps, LONG_STEPS), MAX_SPLITS)
    s = max(need, want, 1)
    per = cdiv(steps, s)                 # whole k steps per slice
    return cdiv(steps, per)


def plan_conv(lhs: tuple, rhs: tuple, out: tuple, window_strides, padding, lhs_dilation,
              rhs_dilation, groups: int, *, target=None, variant: str | None = None,
              split_threads: int | None = None, x_layout: int = 0,
              w_layout: int = 0) -> OpPlan:
    """The dispatches of conv_general_dilated for operands of these shapes (1 to 3 spatial
    dims) and params. Roles "x", "w", "out" (temps "partials" with split-K, "w_cin" for w
    relaid out with its input features innermost). `variant` forces a tile, `split_threads`
    the invocations split-K aims at (choose_splits); `x_layout`, `w_layout`: the buffers bound
    as x and w hold views of them (lowering/conv_layouts.py; conv_gemm.comp's, and
    conv_depthwise.comp's where its forms read them: conv_depthwise.LAYOUTS)."""
    nd = len(lhs) - 2
    if not 1 <= nd <= 3:
        raise ValueError(f"a convolution with {nd} spatial dimensions (the kernel runs 1 to 3)")
    if math.prod(out) == 0:
        return OpPlan(())
    fill = lambda t, v: (v,) * (3 - nd) + tuple(t)     # noqa: E731  (1-D, 2-D as 3-D)
    n, c = lhs[:2]
    o, i = rhs[:2]
    og = o // groups
    m, k = n * math.prod(out[2:]), i * math.prod(rhs[2:])
    for what, size in (("input", math.prod(lhs)), ("kernel", math.prod(rhs)),
                       ("output", math.prod(out))):
        if size >= 2 ** 31:
            raise ValueError(f"a convolution {what} of {size} elements (32-bit indices)")
    push = (n, c, *fill(lhs[2:], 1), o, og, i, *fill(rhs[2:], 1), *fill(out[2:], 1),
            *fill(window_strides, 1), *fill((lo for lo, _ in padding), 0),
            *fill(lhs_dilation, 1), *fill(rhs_dilation, 1))
    window = math.prod(rhs[2:])
    how = None if variant else conv_depthwise.mode(og, i, window, math.prod(out),
                                                   math.prod(out[2:]), target_of(target))
    if how:
        return conv_depthwise.plan_depthwise(
            push, math.prod(out), how, k=k, per_group=fill(out[2:], 1),
            radix=(i, *fill(rhs[2:], 1)), target=target_of(target), x_layout=x_layout,
            w_layout=w_layout)
    winograd_channels = WINOGRAD_MIN_CHANNELS or target_of(target).winograd_min_channels
    if variant is None and min(i, og) >= winograd_channels and winograd.applies(
            lhs, rhs, window_strides, lhs_dilation, rhs_dilation, groups, x_layout, w_layout) \
            and winograd.fits(rhs[:2], out, target):
        return winograd.plan_winograd(lhs, rhs, out, padding, target=target, w_layout=w_layout)
    if variant is None and min(n, o) >= WINOGRAD_WGRAD_MIN_CHANNELS and winograd.applies_wgrad(
            lhs, rhs, out, window_strides, lhs_dilation, rhs_dilation, groups, x_layout,
            w_layout) and winograd.fits((o, n), (c, o) + tuple(rhs[2:]), target):
        return winograd.plan_winograd_wgrad(lhs, rhs, out, padding, target=target,
                                            x_layout=x_layout, w_layout=w_layout)
    waves = wave_slices(og, m, k, rhs_dilation, target) if nd == 2 else 1
    name = variant or (wave_tile() if waves > 1 else choose_variant(og, m, k))
    if name in GEMM_VARIANTS and (nd > 2 or max(lhs_dilation) > 1):
        name = choose_gather_variant(og, m)          # the GEMM kernel's limits
    if (x_layout or w_layout) and name not in GEMM_VARIANTS:
        raise ValueError(f"operand layouts ({x_layout}, {w_layout}) on conv.comp (the GEMM "
                         "and depthwise kernels' only)")
    if name in GEMM_VARIANTS:
        tile = GEMM_VARIANTS[name]
        gx, gy = cdiv(m, tile.bn), cdiv(og, tile.bm)
    else:
        tile = VARIANTS[name]
        gx, gy = cdiv(m, tile.bm), cdiv(og, tile.bn)
    if gx > MAX_GROUPS_X or gy > MAX_GROUPS_X:
        raise ValueError(f"a convolution of {m} output positions x {og} features per group "
                         "(more workgroups than a dispatch holds)")
    rule = {}                   # the rules that split to fill the GPU (choose_gemm_variant's)
    if name == wave_tile() and waves > 1 and split_threads is None:
        # (a wave's slices over all groups: choose_splits divides them among the groups)
        rule = dict(split_threads=waves * gx * gy * tile.threads, below=1 << 30)
    elif name == "gemm_f64" and gx * gy * groups < F64_MIN_GROUPS:
        rule = dict(split_threads=F64_FILL_GROUPS * tile.threads, below=F64_MIN_GROUPS)
    elif name == "gemm_small" and k <= SMALL_FILL_MAX_K:
        rule = dict(split_threads=SMALL_FILL_GROUPS * tile.threads, below=SMALL_FILL_GROUPS,
                    min_steps=SMALL_FILL_STEPS)
    if split_threads is not None:
        rule["split_threads"] = split_threads
    rule.setdefault("split_threads", SPLIT_TARGET_TILE_THREADS.get(name, SPLIT_TARGET_THREADS))
    splits = choose_splits(gx * gy * groups, k, tile, target, **rule)
    if splits * groups > MAX_GROUPS_X:
        raise ValueError(f"a convolution of {groups} groups (x {splits} K slices)")
    chunk = cdiv(cdiv(k, tile.bk), splits) * tile.bk
    push += (chunk, *mixed_radix(tile.bk, (i, *fill(rhs[2:], 1))))
    cin = name in CIN_TILES and i % tile.bk == 0 and 1 < window <= CIN_MAX_WINDOW
    relaid = cin and CIN_RELAYOUT
    vec_w = relaid or (k % 4 == 0 if w_layout == 0 else w_layout == 2 and window % 4 == 0)
    if name in GEMM_VARIANTS:
        launch = Launch(name="conv_gemm", shader="conv_gemm.comp", bindings=3,
                        groups=(gx, gy, splits * groups), push=push, defines=_defines(
                            CG_BM=tile.bm, CG_BN=tile.bn, CG_BK=tile.bk, CG_TM=tile.tm,
                            CG_TN=tile.tn, CG_ALWAYS_PREFETCH=tile.always_prefetch,
                            CG_CIN=cin, CG_VEC_W=vec_w, CG_VEC_O=math.prod(out[2:]) % 4 == 0,
                            CG_XL=x_layout, CG_WL=w_layout, CG_W_DIRECT=not relaid))
    else:
        launch = Launch(name="conv", shader="conv.comp", bindings=3,
                        groups=(gx, gy, splits * groups), push=push, defines=_defines(
                            CV_TX=tile.tx, CV_TY=tile.ty, CV_RM=tile.rm, CV_RN=tile.rn,
                            CV_BK=tile.bk))
    w = "w_cin" if relaid else "w"
    if splits == 1:
        plan = OpPlan(((launch, ("x", w, "out")),))
    else:
        plan = plan_split_sum(launch, ("x", w), "out", splits, math.prod(out), target=target)
    if not relaid:
        return plan
    # channels innermost: w relaid out [O, window, I] first, for vec4 loads along k
    relayout = Launch(name="conv_relayout", shader="conv_relayout.comp", bindings=2,
                      groups=grid(cdiv(o * k, 256)), push=(o, i, window, og),
                      defines=_defines(CR_WL=w_layout))
    return OpPlan(((relayout, ("w", "w_cin")),) + plan.steps,
                  (Temp("w_cin", o * k, "float32"),) + plan.temps)


def _plan(e, target, x_layout=0, w_layout=0):
    lhs, rhs = e.inputs
    prm = e.params
    return plan_conv(lhs.shape, rhs.shape, e.out.shape, prm["window_strides"], prm["padding"],
                     prm["lhs_dilation"], prm["rhs_dilation"], prm["feature_group_count"],
                     target=target, x_layout=x_layout, w_layout=w_layout)


def plan_eqn(e, target):
    lhs, rhs = e.inputs
    need_f32(e, lhs, rhs)
    try:
        plan = _plan(e, target)
    except ValueError as err:
        raise Unsupported(str(err), e) from None
    return plan, {"x": lhs, "w": rhs, "out": e.out}


def plan_group(anchors, target, root, body=None):
    """A convolution's fused kernel: an epilogue in its store (fusion/epilogues.py), and
    operands read in place where they are views of the kernel's inputs in a layout
    conv_gemm.comp reads (lowering/conv_layouts.py, its flips the only other anchors)."""
    convs = [a for a in anchors if a.prim is P.conv_p]
    if len(convs) != 1:
        return None
    e = convs[0]
    if body is None:
        return plan_eqn(e, target) if len(anchors) == 1 else None
    inputs = set(body.inputs)
    (xs, xl, x_eqns), (ws, wl, w_eqns) = conv_layouts.operand_layouts(
        e, conv_layouts.producers(body.eqns), inputs)
    if any(a is not e and a not in x_eqns + w_eqns for a in anchors):
        return None
    if xs not in inputs or ws not in inputs:
        return plan_eqn(e, target)
    need_f32(e, *e.inputs)
    try:
        plan = _plan(e, target, xl, wl)
    except ValueError:
        return plan_eqn(e, target)   # (the kernel that runs it reads no views: as it is)
    return plan, {"x": xs, "w": ws, "out": e.out}


def takes_hooks(e, target=None, loads: bool = False) -> bool:
    """An epilogue (bias, activation) in the store of a convolution that does not split K:
    a split one stores partial sums (the matmul's rule too, lowering/matmul.py). On the
    Winograd path the output transform's store runs it."""
    if loads or any(x.dtype != "f32" for x in e.inputs):
        return False
    try:
        return not any(t.role == "partials" for t in _plan(e, target).temps)
    except ValueError:
        return False


CONTRACT = register(KernelContract(
    name="conv", shader="conv_gemm.comp", primitives=(P.conv_p,), plan=plan_eqn,
    plan_group=plan_group,
    fused_stores=frozenset({P.conv_p}), takes_hooks=takes_hooks,
    limits="1 to 3 spatial dimensions, operands under 2**31 elements; epilogues only "
           "without split-K; conv_gemm.comp for 1-D and 2-D without lhs dilation from 32 "
           "features per group, conv.comp for the rest"))
