"""Planners for flash attention, forward and backward (vkgrad/kernels_glsl/flash_attention.comp).

Pure Python, no device: shapes, scale and the mask in, an `OpPlan` out (see kernels.py for the
buffer convention). Operands are float32, dense row-major whole buffers by default; `layouts`
({role: OperandLayout}, with `heads`) places any of q, k, v, o, do, dq, dk, dv elsewhere in
its buffer (a view of another array: lowering/attention_layouts.py reads the projection's
[B, L, 3, H, D] in place), as compile-time strides (flash_common.glsl's FA_LAYOUTS), and
gives q, k, v biases added as they load (roles "q_bias", "k_bias", "v_bias": FA_BIASES):

- plan_flash_attention:     reads "q" [BH, Lq, D], "k", "v" [BH, Lk, D];
                            writes "o" [BH, Lq, D], "lse" [BH, Lq]
- plan_flash_attention_bwd: reads "q", "k", "v", "o", "lse", "do" ([BH, Lq, D] like o),
                            "dlse" [BH, Lq] (lse's cotangent: zero in a first derivative);
                            writes "dq" [BH, Lq, D], "dk", "dv" [BH, Lk, D];
                            temps "delta" float32 [BH, Lq] (rowsum(do * o) - dlse) and, on
                            the fused path, "dqp" float32 [groups, BH, Lq, D] (dQ's slices)

o = softmax(scale * q k^T + mask) v per (batch*head); lse is the natural-log log-sum-exp of each
query row's scaled scores over its allowed keys, saved for the backward. `causal` masks bottom-
right aligned, as flash-attn >= 2.1: query i sees key j iff j <= i + (Lk - Lq). A query row
that sees no key (causal with Lq > Lk) gets o = 0, lse = -inf, dq = 0, and adds nothing to
dk, dv. Empty sizes: Lk == 0 gives o = 0, lse = -inf (and dq = 0); Lq == 0 gives dk = dv = 0;
a plan with no steps means there is nothing to write.

## Kernels and tiles

The forward is one launch (a workgroup per query tile, streaming key tiles with the online
softmax). The backward takes one of two paths (plan_flash_attention_bwd), both without float
atomics, so results are bit-identical run to run:
- fused (three launches), S and dP computed once: the delta kernel (rowsum(dO * O) - dlse, a
  workgroup per 64 query rows), then the backward kernel (a workgroup per group of `ktg` key
  tiles, streaming query tiles: dK and dV as the dK/dV kernel, and each query tile's dQ share,
  dS K, written to the workgroup's own slice of "dqp"; a group's later key tiles add to what the
  same thread wrote), then the dQ sum (a thread per vec4 of dq: scale times the sum of the slices
  whose key tiles the query sees, in slice order). The slices cost cdiv(key tiles, ktg) x |dq|
  bytes: the planner takes the fewest ktg that keep them under dq_partials_bound (1/8 of the
  largest buffer the device binds, at most 256 MiB), up to MAX_KEY_TILES_PER_GROUP, and
  otherwise the two kernels. At the LM small preset's attention (B32 H8 L256 D32, 32-key tiles)
  that is 8 slices of 8 MiB; B4 H8 L1024: D64 16 slices of 8 MiB, D128 16 of 16 MiB (ktg 2);
  L4096 takes the two kernels. The planner takes this path up to head dim 32
  (FUSED_BACKWARD_MAX_HEAD_DIM): above, the two kernels with their row tiles in registers ran
  faster on the H200.
- two kernels: the dQ kernel (a workgroup per query tile, streaming key tiles; it also computes
  and writes delta), then the dK/dV kernel (a workgroup per key tile, streaming query tiles,
  reading delta).

A `FlashTile` says how a workgroup works: BR rows (queries; keys for dK/dV) per workgroup, BC
columns (keys; queries for dK/dV) per streamed tile, TR rows and BC/TX columns per thread, TX
threads per row group, so (BR/TR)*TX threads; flash_common.glsl draws the layout. Every product
is register-tiled: per vec4 of D the dot products (S, dP) load TR + BC/TX vec4s from shared
memory for 4*TR*BC/TX fmas; per column the outer products (O, dQ, dK, dV) load TR/4 + D/(4 TX)
vec4s for TR*D/TX fmas. Shared memory holds the row tiles and the streamed column tiles
([*][D], rows padded to D/4+1 vec4s) and the transposed P or dS block ([BC][BR/4+1] vec4s); it
is what limits the tiles: the H200's Vulkan driver, like most, offers 48 KiB per workgroup,
lavapipe 32 KiB. With `one_col` (the shader's ONE_COL) the two column tiles of a step take turns
in one buffer: two more barriers per step (and in the dK/dV kernel a second load of the Q tile),
for one column tile less of shared memory, which at D = 128 is what makes room for 64-query
forward tiles and 128 threads in every kernel. With `row_regs` (ROW_REGS; not the fused
backward, whose dQ product reads the K tile) the row tiles (the forward's Q, the dQ kernel's Q
and dO, the dK/dV kernel's K and V) stay in registers, split over D across the row group, and
S (and dP) are summed over subgroup shuffles: no row tile in shared memory and one shared load
per 4*TR fmas, for TR*BC partials in registers; it needs subgroups of at least TX lanes. The
HEAD_DIM_TILES of the forward and of the two backward kernels use it. The planner takes the
first tile of HEAD_DIM_TILES[(mode, D)], then of TILES[mode], that fits (TX capped at D/4):

| mode | BR x BC | TR | TX | one_col | thr | shared bytes, D = 16 / 32 / 64 / 128 | 48 KiB: D | 32 KiB: D |
| ---- | ------- | -- | -- | ------- | --- | ------------------------------------ | --------- | --------- |
| fwd  | 64 x 32 |  4 |  8 |         | 128 | 18944 / 27136 / 43520 / 76288        | 16,32,64  | 16,32     |
| fwd  | 32 x 32 |  4 |  8 |         |  64 | 12288 / 18432 / 30720 / 55296        |           | 64        |
| fwd  | 64 x 16 |  4 |  8 | yes     | 128 | 10752 / 15872 / 26112 / 46592        | 128       |           |
| fwd  | 32 x 16 |  4 |  8 |         |  64 |  7424 / 11520 / 19712 / 36096        |           |           |
| fwd  | 16 x 16 |  4 |  8 |         |  32 |  5120 /  8192 / 14336 / 26624        |           | 128       |
| dq   | 64 x 16 |  4 |  8 |         | 128 | 17152 / 27392 / 47872 / 88832        | 16,32,64  | 16,32     |
| dq   | 32 x 16 |  4 |  8 |         |  64 |  9984 / 16128 / 28416 / 52992        |           | 64        |
| dq   | 32 x 16 |  4 | 16 | yes     | 128 |  8704 / 13824 / 24064 / 44544        | 128       |           |
| dq   | 16 x 8  |  4 |  8 |         |  32 |  4480 /  7552 / 13696 / 25984        |           | 128       |
| dkdv | 64 x 8  |  4 |  8 |         | 128 | 15936 / 25152 / 43584 / 80448        | 16,32,64  | 16,32     |
| dkdv | 32 x 16 |  4 |  8 |         |  64 | 12416 / 18560 / 30848 / 55424        |           | 64        |
| dkdv | 32 x 16 |  4 | 16 | yes     | 128 | 11136 / 16256 / 26496 / 46976        | 128       |           |
| dkdv | 16 x 8  |  4 |  8 |         |  32 |  5184 /  8256 / 14400 / 26688        |           | 128       |
| bwd  | 32 x 16 |  4 |  8 |         |  64 | 12416 / 18560 / 30848 / 55424        | (32)      | (32), 64  |
| bwd  | 64 x 16 |  4 |  8 |         | 128 | 21632 / 31872 / 52352 / 93312        | 16        | 16        |
| bwd  | 64 x 8  |  4 |  8 |         | 128 | 15936 / 25152 / 43584 / 80448        | 64        |           |
| bwd  | 32 x 16 |  4 | 16 | yes     | 128 | 11136 / 16256 / 26496 / 46976        | 128       |           |
| bwd  | 16 x 8  |  4 |  8 |         |  32 |  5184 /  8256 / 14400 / 26688        |           | 128       |

(TX is 4 at D = 16; TILES also has a 16 x 8 forward and a 16 x 16 tile for each backward kernel,
for devices with less shared memory; "(32)": HEAD_DIM_TILES puts the fused backward's 32 x 16
tile first at D = 32, where the H200 measured it fastest; it also puts the forward's row_regs
one_col tiles first, 64 x 32 at D = 32 and 64 (17 KiB at D = 64) and 64 x 8 at D = 128 (6.3
KiB), and the two backward kernels' row_regs tiles, on devices whose subgroups have at least
TX lanes: see HEAD_DIM_TILES.) The fused backward's shared memory is the dK/dV kernel's:
its dQ product reads the K tile and the transposed dS block already there; a thread computes
ceil(BC * D/4 / threads) vec4s of dQ per step (at 64 x 8, D = 32, half the threads idle there), sharing its 4 K loads per dS vec4 among them; with `dq_split` (DQ_SPLIT)
that many lanes split each output's key rows and combine over shuffles, for dq_split times the
outputs per thread (more reuse of each K load). The delta kernel's tile is a 64 x 8 one (64 rows, 8 threads each). The backward kernels cannot take 64-row tiles at D = 128:
their two row tiles alone (Q and dO, or K and V) are 66 KiB. Why these, for D = 64 on the H200
(the reasoning they were designed by;
`bench/bench_attention.py --sweep --stats` times every variant of ALTERNATIVES and prints the
driver's register counts, and BENCHMARKS.md has what it measured):
- per thread, the forward holds a 4x4 S block and a 4x8 O block, the dQ kernel 4x4 S and dP
  blocks and a 4x8 dQ block, the dK/dV kernel 4x4 S and dP and 4x8 dK and dV blocks: 146-176
  registers (the driver's count), which would allow 2-3 workgroups a multiprocessor; but the
  H200's Vulkan driver gives the workgroups resident on a multiprocessor 48 KiB of shared
  memory in all (bench/occupancy_probe.py, measured 2026-12-04: 8 KiB workgroups sit 6 to a
  multiprocessor, 16 KiB 3, 24 KiB 2, 26 KiB and more 1), so these 43-48 KiB tiles run one
  workgroup (4 warps) a multiprocessor. The forward's HEAD_DIM_TILES (Q in registers, one
  column buffer: 6-17 KiB) run two and were 22-33% faster; the backward kernels' tiles of 12-24
  KiB (two or three a multiprocessor) ran no faster than these, but with their row tiles in
  registers too (4-17 KiB) 12-34% faster (HEAD_DIM_TILES; the sweeps of 2026-12-04);
- a 64-query forward tile is the largest that leaves room for 32-key K and V tiles and the P
  block in 48 KiB (64 keys would need 68 KiB); the backward kernels hold two row tiles (Q and
  dO, or K and V) and two column tiles, so at 48 KiB they drop to 32 x 32;
- every shared load is a broadcast or consecutive vec4s in padded rows (conflict-free; a warp's
  load is one 128-byte wavefront), about one per 8 to 10 fmas: shared memory should run near
  half its bandwidth, so the fma pipe, not shared memory, is meant to be the limit;
- PREFETCH loads the next column tile into registers before the dot products, hiding global
  latency behind them; on a CPU (lavapipe) it is off: nothing to hide, and rolled copies
  compile faster there (as do rolled step loops, UNROLL_STEPS = 0).
Fully masked causal tiles are skipped, and causal workgroups are ordered longest first.

Cost model: the forward does 4*BH*Lq*Lk*D flops (about half with the causal mask). The fused
backward does 5/2 of that, as FlashAttention-2 (S, dP, dV, dK, dQ: five products), and moves
the dQ slices through memory (written once each, read by the dQ sum: about half of them with
the causal mask); the two kernels do 7/2 (S and dP are recomputed by both: the price of a dQ
without atomics and without slices). The benchmark reports the conventional count (5/2).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

from vkgrad import primitives as P
from vkgrad.lowering import attention_coop, attention_layouts, matmul_coop
from vkgrad.lowering.contracts import KernelContract, Unsupported, need_f32, register
from vkgrad.lowering.kernels import OpPlan, Temp, _check_sizes
from vkgrad.lowering.launch import Launch, cdiv, grid
from vkgrad.target import target_of

# Head dims the kernel is built for (each a specialization of one shader); other head dims
# run on the interpreter (a counted fallback naming this limit).
SUPPORTED_HEAD_DIMS = (16, 32, 64, 128)
MODES = {"fwd": 0, "dq": 1, "dkdv": 2, "bwd": 3, "delta": 4, "dq_sum": 5}
_NAMES = {"fwd": "flash_attn_fwd", "dq": "flash_attn_bwd_dq", "dkdv": "flash_attn_bwd_dkdv",
          "bwd": "flash_attn_bwd", "delta": "flash_attn_bwd_delta",
          "dq_sum": "flash_attn_bwd_dq_sum"}
_ROLES = {
    "fwd": ("q", "k", "v", "o", "lse"),
    "dq": ("q", "k", "v", "o", "lse", "do", "dq", "delta", "dlse"),
    "dkdv": ("q", "k", "v", "lse", "do", "delta", "dk", "dv"),
    "bwd": ("q", "k", "v", "lse", "do", "delta", "dk", "dv", "dqp"),
    "delta": ("o", "do", "dlse", "delta"),
    "dq_sum": ("dqp", "dq"),
}
_LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class OperandLayout:
    """Where an operand [B, H, L, D] lies in its float32 buffer: element (b, h, row, d) at
    offset + b * stride_b + h * stride_h + row * stride_row + d (in floats; D contiguous).
    The kernel reads and writes it in vec4s: every number a multiple of 4."""
    offset: int
    stride_b: int
    stride_h: int
    stride_row: int

    def defines(self, role: str) -> tuple:
        """The shader's X_AT, X_SB, X_SH, X_SR (vec4 units) for `role`; for a bias ("q_bias":
        the same for every batch and row, strides b and row 0) X_BAT, X_BSH."""
        x, bias = role.upper().removesuffix("_BIAS"), role.endswith("_bias")
        names, nums = (("BAT", "BSH"), (self.offset, self.stride_h)) if bias else (
            ("AT", "SB", "SH", "SR"), (self.offset, self.stride_b, self.stride_h,
                                       self.stride_row))
        return tuple((f"{x}_{k}", f"{n // 4}u") for k, n in zip(names, nums))


# roles a layout may place (lse, delta, dlse and the temps are always dense), and the biases
# q, k, v may carry (added as they load: flash_common.glsl's FA_BIASES)
LAYOUT_ROLES = ("q", "k", "v", "o", "do", "dq", "dk", "dv")
BIAS_ROLES = ("q_bias", "k_bias", "v_bias")


@dataclass(frozen=True)
class FlashTile:
    br: int                 # rows per workgroup (queries; keys in dkdv)
    bc: int                 # columns per streamed tile (keys; queries in dkdv)
    tr: int = 4             # rows per thread, a multiple of 4
    tx: int = 8             # threads per row group, a power of two
    prefetch: bool = True   # the next column tile loads into registers during the products
    always_prefetch: bool = False   # ... on every step (the last reloads its own): no branch
    unroll: int | None = None   # step loops: 1 unrolled, 0 rolled, 2 the driver's choice;
                                # None: the Target's unroll_loops
    one_col: bool = False   # the column tiles take turns in one shared buffer (ONE_COL)
    row_regs: bool = False  # the row tiles in registers (ROW_REGS; not the fused backward)
    ktg: int = 1            # key tiles per workgroup (the fused backward; KTG)
    dq_split: int = 1       # lanes that split the fused backward's dQ product (DQ_SPLIT)

    @property
    def threads(self) -> int:
        return (self.br // self.tr) * self.tx

    def shared_bytes(self, mode: str, d: int) -> int:
        rs, psr = d // 4 + 1, self.br // 4 + 1            # padded row strides, in vec4s
        cols = (1 if self.one_col else 2) * self.bc * rs  # the streamed column tiles
        rows = (0 if self.row_regs else 1) * self.br * rs  # a row tile ROW_REGS keeps out
        if mode == "delta":                               # ROW_REDUCE's scratch
            return 4 * self.br * self.tx
        vec4s = {"fwd": rows + cols + self.bc * psr,
                 "dq": 2 * rows + cols + self.bc * psr,
                 "dkdv": 2 * rows + cols + 2 * self.bc * psr}[_SHAPE_OF.get(mode, mode)]
        return 16 * vec4s + (8 * self.bc if mode in ("dkdv", "bwd") else 0)

    def problem(self, mode: str, d: int, target=None) -> str | None:
        """Why this tile cannot run `mode` at head dim d on the device, or None."""
        tx = self.tx
        if not (self.tr >= 4 and self.tr % 4 == 0 and self.br % self.tr == 0):
            return f"TR = {self.tr} must be a multiple of 4 dividing BR = {self.br}"
        if tx < 1 or tx & (tx - 1) or self.bc % tx or (d // 4) % tx:
            return f"TX = {tx} must be a power of two dividing BC = {self.bc} and D/4 = {d // 4}"
        if self.unroll not in (None, 0, 1, 2):
            return f"unroll = {self.unroll!r} must be None, 0, 1 or 2"
        target = target_of(target)
        if self.row_regs and mode == "bwd":
            return ("row_regs keeps the row tiles in registers; the fused backward's dQ product "
                    "reads its K tile from shared memory")
        if self.ktg < 1 or (self.ktg > 1 and mode != "bwd"):
            return f"ktg = {self.ktg}: key tiles per workgroup are the fused backward's, at least 1"
        if self.row_regs and not (target.subgroup_size or 0) >= tx:
            return (f"row_regs needs subgroups of at least TX = {tx} lanes; the device's are "
                    f"{target.subgroup_size or 'not reported'}")
        shared, limit = target.max_shared_memory, target.max_workgroup_invocations
        if self.shared_bytes(mode, d) > shared:
            return (f"needs {self.shared_bytes(mode, d)} bytes of shared memory; "
                    f"the device has {shared}")
        if self.threads > limit:
            return f"needs {self.threads} threads per workgroup; the device allows {limit}"
        return self._dq_problem(mode, d, target)

    def _dq_problem(self, mode: str, d: int, target) -> str | None:
        """Why the fused backward's dQ product cannot take this tile (flash_attention.comp:
        lane groups of dq_split threads, each group a vec4 of D of several queries)."""
        split, dv = self.dq_split, d // 4
        if mode != "bwd":
            return None if split == 1 else f"dq_split = {split} is the fused backward's"
        groups = self.threads // split
        if split < 1 or split & (split - 1) or (self.br // 4) % split:
            return f"dq_split = {split} must be a power of two dividing BR/4 = {self.br // 4}"
        if groups % dv and self.bc * dv > groups:
            return (f"the fused backward's dQ product needs its {groups} lane groups to be a "
                    f"multiple of D/4 = {dv}, or BC * D/4 = {self.bc * dv} at most that")
        if split > 1 and ((self.bc * dv) % groups or (target.subgroup_size or 0) < split):
            return (f"dq_split = {split} needs BC * D/4 = {self.bc * dv} to be a multiple of "
                    f"its {groups} lane groups and subgroups of at least {split} lanes "
                    f"(the device's: {target.subgroup_size or 'not reported'})")
        return None


# Best first; the planner takes the first that fits the device (TX capped at D/4).
# Measured on the H200 (B4 H8 L1024/4096 D64, bench/results/attention_sweep_2026-11-30.json):
# occupancy decides. The forward with rolled step loops (156 registers instead of 176) ran
# 5664 us instead of 6085 at L4096; dQ with 64 x 16 tiles (146 registers, 4 warps) 7138 us
# instead of 18325 with 32 x 32 (238 registers); dK/dV with 64 x 8 tiles (165 registers) 11773 us
# instead of 23623 with 32 x 32 (254 registers).
# The ONE_COL tiles are what 48 KiB takes at D = 128 (with two column buffers the tiles there
# shrink to 32 x 16 / 16 x 16 / 16 x 16 with 64 / 32 / 32 threads); they come after every tile
# that fits at D <= 64, so they change no smaller head dim and nothing on lavapipe (32 KiB). Not
# yet timed on the H200: bench/bench_attention.py --sweep times them against ALTERNATIVES[128].
TILES = {
    "fwd": (FlashTile(64, 32, unroll=0), FlashTile(32, 32),
            FlashTile(64, 16, unroll=0, one_col=True), FlashTile(32, 16),
            FlashTile(16, 16), FlashTile(16, 8)),
    "dq": (FlashTile(64, 16), FlashTile(32, 16), FlashTile(32, 16, tx=16, one_col=True),
           FlashTile(16, 16), FlashTile(16, 8)),
    "dkdv": (FlashTile(64, 8), FlashTile(32, 16), FlashTile(32, 16, tx=16, one_col=True),
             FlashTile(16, 16), FlashTile(16, 8)),
    "bwd": (FlashTile(64, 16), FlashTile(64, 8), FlashTile(32, 16),
            FlashTile(32, 16, tx=16, one_col=True, unroll=0), FlashTile(16, 16), FlashTile(16, 8)),
    "delta": (FlashTile(64, 8),),
}
# The fused backward on the H200 (bench/results/attentionsweep_2026-12-02_*.json, fused kernel +
# delta + dQ sum, against the two kernels' sum): at D = 32, the LM small preset's B32 H8 L256
# causal, 32 x 16 tiles (64 threads, 140 registers, 8 key tiles per head) ran 174 us, 64 x 16
# 202, 64 x 8 332, the two kernels 293; at D = 64, B4 H8 L1024, 64 x 8 ran 1129 us (two kernels
# 1232), causal 706 (662; 32 x 16 ONE_COL 662); at D = 128, B4 H8 L1024 with two key tiles per
# workgroup, the ONE_COL tile rolled 2715 us, unrolled 2929 (two kernels 3070), causal 1670
# (1550). Those causal runs ordered the key tiles lightest first, since fixed; the eight key
# tiles per workgroup that B4 H8 L4096 D64 would need ran 20195 us against the two kernels'
# 18933 (causal 14153 against 9448): past MAX_KEY_TILES_PER_GROUP the two kernels run.
# HEAD_DIM_TILES[(mode, d)] are tried before TILES[mode] at that head dim.
# The forward's: Q in registers and K, V taking turns in one buffer (ROW_REGS, ONE_COL), for the
# H200's 48 KiB of shared memory a multiprocessor (bench/occupancy_probe.py: the workgroups
# resident on one share 49,152 bytes, whatever their registers would allow). The 43.5 KiB
# 64 x 32 tile ran one workgroup a multiprocessor; 64 x 32 with ROW_REGS and ONE_COL (17 KiB,
# 184 registers) runs two. H200, 2026-12-04 (bench_attention.py --sweep, us, the TILES tile
# against this one): D64 B4 H8 L1024 365 -> 286, causal 199 -> 157, L4096 causal 2843 -> 2215;
# D32 B32 H8 L256 causal 79 -> 61; D128 (64 x 8: 6.3 KiB, 215 registers, two workgroups)
# L1024 causal 437 -> 293, L4096 causal 6340 -> 4242. Devices with subgroups narrower than TX
# take TILES.
# The backward's two kernels keep their row tiles in registers too (the dQ kernel Q and dO,
# the dK/dV kernel K and V). H200, 2026-12-04 (bench_attention.py --sweep --kernel dq --kernel
# dkdv, us, TILES' tile against this one): D64 B4 H8 L4096 causal dq 3561 -> 3102, dkdv 5888
# -> 3903; L1024 causal dq 259 -> 221, dkdv 403 -> 272 (their sum, 493, against the fused
# backward's 608: FUSED_BACKWARD_MAX_HEAD_DIM); D128 L1024 causal dq 666 -> 409, dkdv 878 ->
# 560 (fused: 1390); D32 B32 H8 L256 causal dq 114 -> 86, dkdv 178 -> 123 (the fused
# backward's 168 stays faster there).
HEAD_DIM_TILES = {("bwd", 32): (FlashTile(32, 16),),
                  ("fwd", 32): (FlashTile(64, 32, one_col=True, row_regs=True),),
                  ("fwd", 64): (FlashTile(64, 32, one_col=True, row_regs=True),),
                  ("fwd", 128): (FlashTile(64, 8, one_col=True, row_regs=True),),
                  ("dq", 32): (FlashTile(64, 16, row_regs=True),),
                  ("dkdv", 32): (FlashTile(64, 16),),
                  ("dq", 64): (FlashTile(64, 32, one_col=True, row_regs=True),),
                  ("dkdv", 64): (FlashTile(64, 16, row_regs=True),),
                  ("dq", 128): (FlashTile(64, 8, one_col=True, row_regs=True),),
                  ("dkdv", 128): (FlashTile(64, 16, tx=16, one_col=True, row_regs=True),)}


# The fused backward (MODE 3) is the dK/dV kernel with one more product in the same shared tiles.
_SHAPE_OF = {"bwd": "dkdv"}


def _one(br, bc, **kw):
    return FlashTile(br, bc, one_col=True, **kw)


def _regs(br, bc, **kw):
    return FlashTile(br, bc, row_regs=True, **kw)


# What bench/bench_attention.py --sweep also times, per head dim (on a 48 KiB device), each for
# a reason. The first sweep's lesson (D = 64): fewer registers (more warps) beat larger
# per-thread blocks, and rolled step loops cut the forward's registers 176 -> 156; so rolled
# variants of the chosen tiles, and a 128-row forward tile (more reuse of each streamed tile)
# with rolled loops. ONE_COL tiles need less shared memory (more workgroups per multiprocessor)
# for two more barriers per step; ROW_REGS tiles free the row tile too, and load each column
# vec4 once per 4 TR fmas, for TR*BC partials in registers and the shuffles that sum them.
ALTERNATIVES = {
    32: {   # the LM small preset (B32 H8 L256, causal): 4 query tiles per head at BR = 64
        "fwd": {
            "128x32_4x8_rolled": FlashTile(128, 32, unroll=0),          # 256 threads
            "64x16_4x8_rolled": FlashTile(64, 16, unroll=0),
            "32x32_4x8_rolled": FlashTile(32, 32, unroll=0),            # twice the workgroups
            "64x32_4x8": FlashTile(64, 32),
            "128x16_4x8_rowregs_rolled": _regs(128, 16, unroll=0),      # 256 threads
            "64x16_4x8_rowregs_onecol": _regs(64, 16, one_col=True),    # (2026-12-04)
            "64x8_4x8_rowregs_onecol": _regs(64, 8, one_col=True),
            "64x32_4x8_rowregs_onecol": _regs(64, 32, one_col=True),
            "32x16_4x8_rowregs_onecol": _regs(32, 16, one_col=True),    # twice the workgroups
        },
        "dq": {
            "64x32_4x8": FlashTile(64, 32),                             # 35.5 KiB
            "64x16_4x8_rowregs": _regs(64, 16),
            "64x16_4x8_rolled": FlashTile(64, 16, unroll=0),
            "32x32_4x8": FlashTile(32, 32),
            "32x16_4x8": FlashTile(32, 16),
        },
        "dkdv": {
            "64x16_4x8": FlashTile(64, 16),                             # 31.1 KiB
            "64x32_4x8": FlashTile(64, 32),                             # 44.3 KiB
            "64x8_4x8_rolled": FlashTile(64, 8, unroll=0),
            "32x32_4x8": FlashTile(32, 32),
        },
        "bwd": {    # planner: 32 x 16, 18.1 KiB, 64 threads, 2 dQ vec4s per thread per step
            "64x16_4x8": FlashTile(64, 16),                             # the planner's before
            "32x16_4x8_split2": FlashTile(32, 16, dq_split=2),          # dQ 4 per lane pair
            "64x16_4x8_split2": FlashTile(64, 16, dq_split=2),          # dQ 2 per lane pair
            "64x16_4x8_split4": FlashTile(64, 16, dq_split=4),          # 4 per 4 lanes
            "64x16_4x8_split8": FlashTile(64, 16, dq_split=8),
            "128x8_4x8_split4": FlashTile(128, 8, dq_split=4),          # 46.6 KiB, 256 threads
            "64x16_4x8_rolled": FlashTile(64, 16, unroll=0),
            "64x8_4x8": FlashTile(64, 8),                               # half idle in dQ
            "64x32_4x8": FlashTile(64, 32),                             # 44.3 KiB, dQ 2 each
            "64x16_8x8": FlashTile(64, 16, tr=8),                       # 64 threads, dQ 2 each
            "64x16_4x4": FlashTile(64, 16, tx=4),                       # S, dP 4x4, dQ 2 each
            "32x32_4x8": FlashTile(32, 32),                             # 64 threads, dQ 4 each
            "64x16_4x8_onecol": _one(64, 16),                           # 28.9 KiB
        },
    },
    64: {
        "fwd": {
            "64x16_4x8_rolled": FlashTile(64, 16, unroll=0),
            "128x8_4x8_rolled": FlashTile(128, 8, unroll=0),
            "64x32_4x8_rolled_noprefetch": FlashTile(64, 32, unroll=0, prefetch=False),
            "64x32_4x8_noprefetch": FlashTile(64, 32, prefetch=False),   # registers vs latency
            "64x32_8x8": FlashTile(64, 32, tr=8),                       # S 8x4, O 8x8: 2 warps
            "64x16_4x4": FlashTile(64, 16, tx=4),                       # O 4x16, BC 16: 2 warps
            "32x32_4x8": FlashTile(32, 32),                             # twice the workgroups
            "64x32_8x4": FlashTile(64, 32, tr=8, tx=4),                 # S 8x8, O 8x16: 1 warp
            "64x32_4x8_onecol_rolled": _one(64, 32, unroll=0),          # 34 KiB
            "128x16_4x8_onecol_rolled": _one(128, 16, unroll=0),        # 46.5 KiB, 8 warps
            "64x16_4x8_rowregs_rolled": _regs(64, 16, unroll=0),        # 12.8 KiB
            "128x16_4x8_rowregs_rolled": _regs(128, 16, unroll=0),      # 256 threads
            # 2026-12-04: the H200's multiprocessor gives its workgroups 48 KiB of shared
            # memory in all (bench/occupancy_probe.py), so the 43.5 KiB planner tile runs one
            # workgroup (4 warps) a multiprocessor: tiles of 24 KiB or less run two or more
            # (sizes: the driver's statistics)
            "64x8_4x8_rowregs_onecol": _regs(64, 8, one_col=True),      # 4.3 KiB
            "64x16_4x8_rowregs_onecol": _regs(64, 16, one_col=True),    # 8.5 KiB
            "64x32_4x8_rowregs_onecol": _regs(64, 32, one_col=True),    # 17.4 KiB
            "128x8_4x8_rowregs_onecol": _regs(128, 8, one_col=True),    # 11.3 KiB, 256 threads
            "64x16_4x16_rowregs_onecol": _regs(64, 16, tx=16, one_col=True),   # 256 threads
            "64x8_4x8_onecol": _one(64, 8),                             # 21.3 KiB
            "64x8_4x8": FlashTile(64, 8),                               # 23.4 KiB
        },
        "dq": {
            # (dq's row_regs keeps Q and dO in registers, dkdv's K and V; sizes as planned,
            # in KiB)
            "32x16_4x16_rowregs_onecol": _regs(32, 16, tx=16, one_col=True),   # 6.5
            "64x8_4x8_rowregs_onecol": _regs(64, 8, one_col=True),      # 4.3
            "64x16_4x8_rowregs_onecol": _regs(64, 16, one_col=True),    # 8.5
            "64x32_4x8_rowregs_onecol": _regs(64, 32, one_col=True),    # 17
            "32x16_4x16_onecol": _one(32, 16, tx=16),                   # 23.5 KiB
            "32x8_4x8_rowregs_onecol": _regs(32, 8, one_col=True),      # 3.3, 64 threads
            "64x16_4x8_rolled": FlashTile(64, 16, unroll=0),
            "64x8_4x8": FlashTile(64, 8),
            "64x8_4x8_rolled": FlashTile(64, 8, unroll=0),
            "32x32_4x8_noprefetch": FlashTile(32, 32, prefetch=False),
            "64x16_4x8": FlashTile(64, 16),                             # 47.9 KiB, 4 warps
            "64x16_4x4": FlashTile(64, 16, tx=4),                       # S 4x4, dQ 4x16
            "32x32_8x8": FlashTile(32, 32, tr=8),                       # S 8x4, dQ 8x8: 1 warp
            "32x16_4x8": FlashTile(32, 16),
            "64x16_4x8_onecol": _one(64, 16),                           # 42.5 KiB
            "64x16_4x8_rowregs": _regs(64, 16),                         # 12.8 KiB
            "64x32_4x16_rowregs": _regs(64, 32, tx=16),                 # 25.5 KiB, 256 threads
        },
        "dkdv": {
            "64x8_4x8_rolled": FlashTile(64, 8, unroll=0),
            "64x8_4x8_noprefetch": FlashTile(64, 8, prefetch=False),
            "32x32_4x8_noprefetch": FlashTile(32, 32, prefetch=False),
            "32x32_8x8": FlashTile(32, 32, tr=8),                       # dK, dV 8x8: 1 warp
            "32x32_4x4": FlashTile(32, 32, tx=4),                       # S 4x8, dK, dV 4x16
            "32x16_4x8": FlashTile(32, 16),
            "64x8_4x8": FlashTile(64, 8),                               # 43.5 KiB, 4 warps
            "64x8_4x8_onecol": _one(64, 8),                             # 40.4 KiB
            "64x16_4x8_onecol": _one(64, 16),                           # 46.9 KiB, BC 16
            "32x8_4x8_onecol": _one(32, 8),                             # 21.4 KiB, 64 threads
            "32x8_4x8": FlashTile(32, 8),                               # 23.6 KiB, 64 threads
            "32x16_4x16_onecol": _one(32, 16, tx=16),                   # 25.9 KiB
            "64x8_4x8_rowregs": _regs(64, 8),                           # K, V in registers
            "64x8_4x8_rowregs_onecol": _regs(64, 8, one_col=True),
            "64x16_4x8_rowregs": _regs(64, 16),
            "64x16_4x8_rowregs_onecol": _regs(64, 16, one_col=True),
            "32x16_4x16_rowregs_onecol": _regs(32, 16, tx=16, one_col=True),
        },
        "bwd": {    # planner: 64 x 8, 42.6 KiB, one dQ vec4 per thread per step
            "32x8_4x8_onecol": _one(32, 8),                             # 21.4 KiB, 64 threads
            "32x8_4x8": FlashTile(32, 8),                               # 23.6 KiB, 64 threads
            "64x8_4x8_split2": FlashTile(64, 8, dq_split=2),            # dQ 2 per lane pair
            "64x8_4x8_split4": FlashTile(64, 8, dq_split=4),            # 4 per 4 lanes
            "64x8_4x8_rolled": FlashTile(64, 8, unroll=0),
            "64x8_4x8_noprefetch": FlashTile(64, 8, prefetch=False),
            "64x8_4x4": FlashTile(64, 8, tx=4),                         # 64 threads, dQ 2 each
            "64x8_4x8_onecol": _one(64, 8),                             # 40.4 KiB
            "64x16_4x8_onecol": _one(64, 16),                           # 46.9 KiB, dQ 2 each
            "32x16_4x8": FlashTile(32, 16),                             # 30.1 KiB, dQ 4 each
            "32x32_4x8": FlashTile(32, 32),                             # 43.2 KiB, dQ 8 each
            "32x16_8x8": FlashTile(32, 16, tr=8),                       # 32 threads
            "32x16_4x16_onecol": _one(32, 16, tx=16),                   # 25.9 KiB, dQ 2 each
            "64x16_4x8_onecol_split2": _one(64, 16, dq_split=2),        # dQ 4 per lane pair
        },
    },
    128: {  # planner: 64 x 16 (128 threads), 32 x 16 (128), 32 x 16 (128), all ONE_COL
        "fwd": {
            "64x16_4x8_onecol": _one(64, 16),                           # unrolled steps
            "64x16_4x16_onecol_rolled": _one(64, 16, tx=16, unroll=0),  # 256 threads, O 4x8
            "64x16_4x16_onecol": _one(64, 16, tx=16),
            "64x16_4x8_onecol_rolled_noprefetch": _one(64, 16, unroll=0, prefetch=False),
            "64x8_4x8_onecol_rolled": _one(64, 8, unroll=0),            # 39.3 KiB: S 4x1
            "32x32_4x16_onecol_rolled": _one(32, 32, tx=16, unroll=0),  # 37.5 KiB, 128 threads
            "32x32_4x8_onecol_rolled": _one(32, 32, unroll=0),          # 64 threads
            "32x16_4x8": FlashTile(32, 16),                             # the planner's before
            "64x16_4x16_rowregs": _regs(64, 16, tx=16),                 # 20.8 KiB, 256 threads
            "64x16_4x16_rowregs_onecol": _regs(64, 16, tx=16, one_col=True),   # 12.5 KiB
            "32x16_4x16_rowregs": _regs(32, 16, tx=16),                 # 128 threads
            "64x8_4x8_rowregs_rolled": _regs(64, 8, unroll=0),          # Q 4x16 in registers
            "64x8_4x8_rowregs_onecol": _regs(64, 8, one_col=True),      # 6.3 KiB (2026-12-04)
            "128x8_4x8_rowregs_onecol": _regs(128, 8, one_col=True),    # 8.3 KiB, 256 threads
            "32x16_4x16_rowregs_onecol": _regs(32, 16, tx=16, one_col=True),   # 13 KiB
        },
        "dq": {
            "32x16_4x16_onecol_rolled": _one(32, 16, tx=16, unroll=0),
            "32x16_4x16_onecol_noprefetch": _one(32, 16, tx=16, prefetch=False),
            "32x16_4x8_onecol": _one(32, 16),                           # 64 threads, dQ 4x16
            "32x8_4x8": FlashTile(32, 8),                               # 42.4 KiB, 64 threads
            "32x8_4x8_onecol": _one(32, 8),                             # 38.3 KiB
            "16x16_4x16_onecol": _one(16, 16, tx=16),                   # 26 KiB, 64 threads
            "16x16_4x8": FlashTile(16, 16),                             # the planner's before
            "64x16_4x16_rowregs_onecol": _regs(64, 16, tx=16, one_col=True),   # 64 queries
            "64x8_4x8_rowregs_onecol": _regs(64, 8, one_col=True),      # 39.2 KiB, 128 threads
            "32x16_4x16_rowregs": _regs(32, 16, tx=16),                 # 35.2 KiB
        },
        "dkdv": {
            "32x16_4x16_onecol_rolled": _one(32, 16, tx=16, unroll=0),
            "32x16_4x16_onecol_noprefetch": _one(32, 16, tx=16, prefetch=False),
            "32x16_4x8_onecol": _one(32, 16),                           # 64 threads
            "32x8_4x8": FlashTile(32, 8),                               # 43.6 KiB, 64 threads
            "32x8_4x8_onecol": _one(32, 8),                             # 39.4 KiB
            "16x16_4x16_onecol": _one(16, 16, tx=16),                   # 27.4 KiB, 64 threads
            "16x16_4x8": FlashTile(16, 16),                             # the planner's before
            "32x16_4x16_rowregs_onecol": _regs(32, 16, tx=16, one_col=True),   # K, V in regs
            "64x16_4x16_rowregs_onecol": _regs(64, 16, tx=16, one_col=True),   # 256 threads
        },
        "bwd": {    # planner: 32 x 16 ONE_COL rolled, 128 threads, 45.9 KiB, dQ 4 each
            "32x16_4x16_onecol_split2": _one(32, 16, tx=16, dq_split=2),   # dQ 8 per lane pair
            "32x16_4x16_onecol": _one(32, 16, tx=16),                   # unrolled steps
            "32x8_4x8": FlashTile(32, 8),                               # 64 threads, dQ 4 each
            "32x8_4x8_onecol": _one(32, 8),
            "16x16_4x16_onecol": _one(16, 16, tx=16),                   # 64 threads, dQ 8 each
        },
    },
}


def choose_tile(mode: str, d: int, target=None) -> FlashTile:
    """The first tile of HEAD_DIM_TILES[(mode, d)] and TILES[mode] that runs at head dim d on
    the device; without PREFETCH
    where the Target says prefetching does not pay (lavapipe: no memory latency to hide, and
    the direct copies are rolled loops, which LLVM compiles faster)."""
    prefetch = target_of(target).prefetch
    reasons = []
    for tile in HEAD_DIM_TILES.get((mode, d), ()) + TILES[mode]:
        tile = replace(tile, tx=min(tile.tx, d // 4), prefetch=tile.prefetch and prefetch)
        why = tile.problem(mode, d, target)
        if why is None:
            return tile
        reasons.append(f"{tile}: {why}")
    raise ValueError(f"flash attention {mode}: no tile fits this device at D = {d}: "
                     + "; ".join(reasons))


def _forced(mode, D, target, tile) -> FlashTile:
    """`tile` (or the planner's when None), checked for `mode` at head dim D."""
    if tile is None:
        return choose_tile(mode, D, target)
    why = tile.problem(mode, D, target)
    if why is not None:
        raise ValueError(f"flash attention {mode}: tile {tile} cannot run at D = {D}: {why}")
    return tile


def _step(mode, BH, Lq, Lk, D, causal, scale, target, tile, layouts=()) -> tuple:
    """(launch, roles): one launch of `mode` with the (checked) `tile`; "dq_sum" takes the fused
    backward's tile (its slices hold tile.ktg * tile.br keys) and runs a thread per vec4 of dq.
    `layouts`: _check_layouts' (heads, {role: OperandLayout}), or () for dense operands; with
    biases, the modes that read q, k, v bind all three biases after their own roles."""
    roles = _ROLES[mode]
    if any(r in BIAS_ROLES for r in (layouts[1] if layouts else ())) and MODES[mode] <= 3:
        roles += BIAS_ROLES
    unroll = tile.unroll
    if unroll is None:
        unroll = int(target_of(target).unroll_loops)
    if mode in ("bwd", "dq_sum"):
        tiles = cdiv(cdiv(Lk, tile.br), tile.ktg)      # workgroups (dq slices) per head
    else:
        tiles = cdiv(Lk if mode == "dkdv" else Lq, tile.br)
    groups = cdiv(BH * Lq * D // 4, tile.threads) if mode == "dq_sum" else BH * tiles
    return Launch(name=_NAMES[mode], shader="flash_attention.comp", bindings=len(roles),
                  groups=grid(groups),
                  push=(Lq, Lk, BH, tiles, groups, float(scale * _LOG2E), float(scale),
                        int(bool(causal))),
                  spec=(tile.threads, tile.br, tile.bc, tile.tr, tile.tx, bool(tile.prefetch),
                        bool(tile.always_prefetch), bool(tile.one_col), bool(tile.row_regs),
                        tile.ktg, tile.dq_split),
                  defines=(("HEAD_DIM", D), ("MODE", MODES[mode]),
                           ("UNROLL_STEPS", int(unroll))) + _layout_defines(roles, layouts)), roles


def _layout_defines(roles, layouts) -> tuple:
    """The defines of the layouts of a launch's roles (none: the dense kernel)."""
    if not layouts:
        return ()
    heads, placed = layouts
    out = tuple(d for r in roles if r in placed for d in placed[r].defines(r))
    return ((("HEADS", f"{heads}u"),) + out) if out else ()


def _check_layouts(BH, Lq, Lk, D, heads, layouts) -> tuple:
    """(heads, {role: layout}) for the planner's launches, checked; () when all are dense."""
    if not layouts:
        return ()
    if not isinstance(heads, int) or heads < 1 or BH % heads:
        raise ValueError(f"flash attention: heads = {heads!r} must divide batch * heads = {BH}")
    for role, lay in layouts.items():
        if role not in LAYOUT_ROLES + BIAS_ROLES:
            raise ValueError(f"flash attention: no layout for role {role!r}; layouts place "
                             f"{', '.join(LAYOUT_ROLES + BIAS_ROLES)}")
        if role in BIAS_ROLES and (lay.stride_b or lay.stride_row):
            raise ValueError(f"flash attention: {role}'s layout {lay}: a bias is the same for "
                             "every batch and row (stride_b and stride_row 0)")
        nums = (lay.offset, lay.stride_b, lay.stride_h, lay.stride_row)
        if any(n < 0 or n % 4 for n in nums):
            raise ValueError(f"flash attention: {role}'s layout {lay}: the kernel reads vec4s, "
                             "so offset and strides must be non-negative multiples of 4 floats")
        rows = Lq if role in ("q", "o", "do", "dq", "q_bias") else Lk
        last = lay.offset + (BH // heads - 1) * lay.stride_b + (heads - 1) * lay.stride_h + \
            max(rows - 1, 0) * lay.stride_row + D
        if last >= 2**34:
            raise ValueError(f"flash attention: {role}'s layout {lay} reaches float {last}, past "
                             "the kernel's 32-bit vec4 indexing")
    return heads, dict(layouts)


def _check(BH, Lq, Lk, D, scale):
    _check_sizes(BH=BH, Lq=Lq, Lk=Lk, D=D)
    if D not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"flash attention: head dim D = {D} is not supported; supported: "
                         f"{', '.join(map(str, SUPPORTED_HEAD_DIMS))}")
    if BH * max(Lq, Lk) * D >= 2**32:
        raise ValueError(f"flash attention: {BH * max(Lq, Lk) * D} elements per operand exceed "
                         "the kernel's 32-bit indexing")
    if not isinstance(scale, numbers.Real) or not math.isfinite(scale):
        raise ValueError(f"flash attention: scale = {scale!r} must be a finite number")


def plan_flash_attention(BH: int, Lq: int, Lk: int, D: int, *, causal: bool, scale: float,
                         target=None, tile: FlashTile | None = None, layouts=None,
                         heads: int | None = None) -> OpPlan:
    """The forward: roles "q", "k", "v" -> "o", "lse". `tile` forces a FlashTile (tests, the
    benchmark's sweep); `layouts` {role: OperandLayout} places q, k, v or o in their buffers
    (`heads`: H of BH = B * H)."""
    _check(BH, Lq, Lk, D, scale)
    placed = _check_layouts(BH, Lq, Lk, D, heads, layouts)
    if BH * Lq == 0:
        return OpPlan(())
    return OpPlan((_step("fwd", BH, Lq, Lk, D, causal, scale, target,
                         _forced("fwd", D, target, tile), placed),))


def dq_partials_bound(target=None) -> int:
    """Bytes the fused backward's dQ slices may take: 1/8 of the largest buffer the device binds
    and at most 256 MiB (lavapipe: 16 MiB; the H200: 256 MiB)."""
    return min(target_of(target).max_storage_buffer_range // 8, 256 << 20)


# The most key tiles the fused backward gives one workgroup to keep its dQ slices under the
# bound; past that the two kernels run (fewer workgroups than that leave a GPU idle).
MAX_KEY_TILES_PER_GROUP = 4
# The planner's fused backward only up to this head dim: above it, the two kernels with their
# row tiles in registers (HEAD_DIM_TILES) ran faster on the H200 (B4 H8 L1024 causal, fwd+bwd
# kernels' us, 2026-12-04: D64 two kernels 493 against the fused 608, D128 975 against 1390);
# at D = 32 (the LM small preset) the fused one still wins, 168 against 208.
FUSED_BACKWARD_MAX_HEAD_DIM = 32


def fused_backward_planned(BH: int, Lq: int, Lk: int, D: int, target=None) -> FlashTile | None:
    """The fused backward's tile where the planner takes that path (head dim and dQ slices),
    else None."""
    if D > FUSED_BACKWARD_MAX_HEAD_DIM:
        return None
    return fused_backward_tile(BH, Lq, Lk, D, target)


def fused_backward_tile(BH: int, Lq: int, Lk: int, D: int, target=None,
                        tile: FlashTile | None = None) -> FlashTile | None:
    """The fused backward's tile for this shape (`tile`, or the planner's), with the fewest key
    tiles per workgroup (ktg; at least the tile's own) that keep its dQ slices,
    cdiv(key tiles, ktg) x |dq|, under dq_partials_bound; None when that takes more than
    MAX_KEY_TILES_PER_GROUP."""
    base = _forced("bwd", D, target, tile)
    slice_bytes, n_kt = 4 * BH * Lq * D, cdiv(Lk, base.br)
    for ktg in range(base.ktg, max(base.ktg, MAX_KEY_TILES_PER_GROUP) + 1):
        if cdiv(n_kt, ktg) * slice_bytes <= dq_partials_bound(target):
            return replace(base, ktg=ktg)
    return None


def plan_flash_attention_bwd(BH: int, Lq: int, Lk: int, D: int, *, causal: bool, scale: float,
                             target=None, fused: bool | None = None,
                             bwd_tile: FlashTile | None = None, dq_tile: FlashTile | None = None,
                             dkdv_tile: FlashTile | None = None, layouts=None,
                             heads: int | None = None, dlse_zero: bool = False) -> OpPlan:
    """The backward: roles "q", "k", "v", "o", "lse", "do", "dlse" -> "dq", "dk", "dv".

    Fused (`fused` None: up to FUSED_BACKWARD_MAX_HEAD_DIM, or with `bwd_tile`, whenever
    fused_backward_tile finds a tile and no two-kernel tile is forced; True forces it, False the
    two kernels): delta, then the backward kernel (dK, dV and dQ slices, S and dP computed
    once), then the dQ sum; temps "delta" and "dqp". Two kernels: dQ (which also writes delta),
    then dK/dV (which reads it); temp "delta". `bwd_tile` forces the fused kernel's tile (its
    ktg is then the least it takes), `dq_tile` and `dkdv_tile` the two kernels'. `layouts` and
    `heads` as plan_flash_attention's (roles q, k, v, o, do, dq, dk, dv). `dlse_zero`: dlse
    is known zero (a first derivative): the kernels never read it (its role may be bound to
    any buffer)."""
    plan = _plan_bwd(BH, Lq, Lk, D, causal, scale, target, fused, bwd_tile, dq_tile, dkdv_tile,
                     _check_layouts(BH, Lq, Lk, D, heads, layouts))
    if not dlse_zero:
        return plan
    return replace(plan, steps=tuple(
        (replace(launch, defines=launch.defines + (("DLSE_ZERO", 1),)) if "dlse" in roles
         else launch, roles) for launch, roles in plan.steps))


def _plan_bwd(BH, Lq, Lk, D, causal, scale, target, fused, bwd_tile, dq_tile, dkdv_tile,
              placed) -> OpPlan:
    _check(BH, Lq, Lk, D, scale)
    args = (BH, Lq, Lk, D, causal, scale, target)
    if fused is None and (dq_tile or dkdv_tile):
        fused = False
    if fused is None and bwd_tile is None and D > FUSED_BACKWARD_MAX_HEAD_DIM:
        fused = False
    if fused is not False:
        ftile = fused_backward_tile(BH, Lq, Lk, D, target, bwd_tile)
        if ftile is None and fused:
            raise ValueError(f"flash attention backward: the fused kernel's dQ slices for "
                             f"BH = {BH}, Lq = {Lq}, Lk = {Lk}, D = {D} exceed "
                             f"{dq_partials_bound(target)} bytes")
        if ftile is not None:
            return _fused_bwd(*args, ftile, placed)
    steps = []
    if BH * Lq:
        steps.append(_step("dq", *args, _forced("dq", D, target, dq_tile), placed))
    if BH * Lk:
        steps.append(_step("dkdv", *args, _forced("dkdv", D, target, dkdv_tile), placed))
    temps = (Temp("delta", BH * Lq, "float32"),) if steps else ()
    return OpPlan(tuple(steps), temps)


def _fused_bwd(BH, Lq, Lk, D, causal, scale, target, tile, placed) -> OpPlan:
    args = (BH, Lq, Lk, D, causal, scale, target)
    steps = []
    if BH * Lq:
        steps.append(_step("delta", *args, choose_tile("delta", D, target), placed))
    if BH * Lk:
        steps.append(_step("bwd", *args, tile, placed))
    if BH * Lq:
        steps.append(_step("dq_sum", *args, tile, placed))
    if not steps:
        return OpPlan(())
    slices = cdiv(cdiv(Lk, tile.br), tile.ktg)
    return OpPlan(tuple(steps), (Temp("delta", BH * Lq, "float32"),
                                 Temp("dqp", slices * BH * Lq * D, "float32")))


# ------------------------------------------------------------------ the contract

# A device that ends long loops early (Target.max_loop_iterations: lavapipe) must not stream
# more column tiles than it runs out. Counted iterations per streamed tile, bounded from
# lavapipe's measured cut-offs with about 2x to spare: the forward over 33,073 keys at D = 16
# and 22,831 at D = 64 (63 and 92 per 32-key tile), dK/dV over 15,554 queries at D = 16 and
# 12,859 at D = 64 (135 per 32-query tile, 81 per 16-query tile). The fused backward is dK/dV
# with the dQ product's BR/4 more, for each of its ktg key tiles.
def _iterations_per_tile(mode: str, d: int, tile: FlashTile) -> int:
    if mode == "bwd":
        return tile.ktg * (_iterations_per_tile("dkdv", d, tile) + tile.br // 4)
    return (8 if mode == "dkdv" else 4) * (d // 4 + tile.bc)


def loop_limit_problem(mode: str, streamed: int, d: int, target=None,
                       tile: FlashTile | None = None) -> str | None:
    """Why `mode` with `tile` (None: the planner's) cannot stream `streamed` keys (queries for
    dkdv and bwd) on `target`, or None."""
    limit = target_of(target).max_loop_iterations
    if not limit:
        return None
    tile = tile or choose_tile(mode, d, target)
    if cdiv(streamed, tile.bc) * _iterations_per_tile(mode, d, tile) <= limit:
        return None
    what = "queries" if mode in ("dkdv", "bwd") else "keys"
    return (f"flash attention {mode} over {streamed} {what} at head_dim {d}: "
            f"{target_of(target).name} ends a shader's loops after {limit} iterations")


# Attention written out (lowering/attention_scores.py) where its scores fit the Target's
# attention_scores_max_bytes and, summed over a program's attentions, a quarter of the
# device's memory (the forward's P is kept for the backward), and where the H200 measured it
# faster than the flash kernels (bench/bench_attention_paths.py --sweep, 2026-12-02 04:37,
# fwd+bwd us of B4 H8, written out against flash): unmasked, from head_dim 64 with
# head_dim * Lk >= 32768 (D64 L512 294 vs 408, L1024 952 vs 1520, L4096 13359 vs 24683; D128
# L256 168 vs 242, L1024 1413 vs 3576) but not below (D64 L256 134 vs 131; D32 L1024 870 vs
# 773, L512 273 vs 215); causal in blocks of query rows (causal_blocks, below) from
# head_dim 64 with head_dim * Lk >= 262144 (2026-12-04 05:11, --causal, after the backward's
# kernels took their row tiles into registers, written out against flash and torch SDPA: D64
# L4096 8848 vs 9297 and 7750; D128 L2048 4290 vs 4766 and 3707, L4096 14064 vs 18378 and
# 13043) but not below (D64 L2048 2576 vs 2457, L1024 840 vs 743; D128 L1024 1412 vs 1305;
# the LM small shape B32 H8 L256 D32 502 vs 250). A causal mask with Lq > Lk leaves rows without keys: those stay on the flash
# kernels. A head dim the kernels are not built for is written out on every device (else it
# would run on the interpreter).
SCORES_MIN_HEAD_DIM = 64
SCORES_MIN_HEAD_DIM_TIMES_KEYS = 32768
CAUSAL_SCORES_MIN_HEAD_DIM = 64
CAUSAL_SCORES_MIN_HEAD_DIM_TIMES_KEYS = 262144
# float16 and bfloat16 attention written out runs its products on the cooperative-matrix
# kernel (f32 scores, P kept in 16 bits) where the Target has it, and then by these rules; the
# flash kernels compute 16-bit attention in f32 on the shader cores. Elsewhere its products
# run on the f32 kernel (16-bit loads), and f32's rules apply.
HALF_SCORES_MIN_HEAD_DIM_TIMES_KEYS = 0
HALF_CAUSAL_SCORES_MIN_HEAD_DIM_TIMES_KEYS = 0
# float16 attention that the cooperative-matrix flash kernels take (lowering/attention_coop.py)
# runs on them up to this head dim (all they take), plain and causal. H200 B4 H8 fwd+bwd us,
# kernels' sum (bench/coop_attention_bwd_probe.py, 2026-12-04 01:02) against written out
# (2026-12-03 15:15): L1024 D64 267 against 491, causal 229 / 502; L4096 D64 3814 / 6217, causal
# 2354 / 4680; D128 L1024 484 / 598, L4096 6574 / 7482, causal 3728 / 5892; B32 H8 L256 D32
# causal 102 / 306. 0: f16 attention written out wherever it can be (bench_attention_paths).
COOP_FLASH_MAX_HEAD_DIM = 128


# Causal attention written out runs in blocks of query rows, each over the keys it sees: n
# blocks compute (n + 1) / 2n of the scores, and mask only the last block of keys of each
# (lowering/attention_scores.py). A block is CAUSAL_QUERY_ROWS_PER_HEAD_DIM x head_dim rows:
# 512 at D64, 1024 at D128. The runs (B4 H8 fwd+bwd us, blocks of 128 / 256 / 512 / 1024 rows;
# 2026-12-02 15:12 and, for 1024, 18:04): D64 L4096 13746 / 11237 / 8870 / 9078, L2048 3909 /
# 3190 / 2569 / 2801, L1024 1281 / 1014 / 839 / 947; D128 L1024 1871 / 1373 / 1433 / 1411,
# L2048 - / - / 4565 / 4285, L4096 23276 / 16102 / 15860 / 14041 (one block, all the scores:
# D128 L1024 1590, L4096 23559 at 04:26). Fewer, longer blocks win by more than the scores they
# add, up to a point that grows with the head dim (a longer row of each block's matmuls).
# CAUSAL_QUERY_BLOCK, when set, is a fixed number of rows instead (0: one block).
CAUSAL_QUERY_ROWS_PER_HEAD_DIM = 8
CAUSAL_QUERY_BLOCK = None
# 16-bit attention with its products on the tensor cores: blocks of 1024 rows at every head
# dim (bench_attention_paths.py --dtype f16 --causal --blocks, H200 2026-12-02 21:54, B4 H8
# fwd+bwd us, blocks of 512 rows a head dim's 8 / 1024 / 2048 / 4096): D64 L4096 5264 / 4697 /
# 5020 / 6413, L1024 534 / 502 / - / -; D128 L4096 - / 5891 / 6195 / 7690.
HALF_CAUSAL_QUERY_ROWS = 1024


def causal_blocks(lq: int, head_dim: int, half: bool = False) -> tuple:
    """The [start, stop) query rows of causal attention's written-out blocks (`half`: 16-bit
    attention on the tensor cores)."""
    rows = HALF_CAUSAL_QUERY_ROWS if half else CAUSAL_QUERY_ROWS_PER_HEAD_DIM * head_dim
    step = rows if CAUSAL_QUERY_BLOCK is None else CAUSAL_QUERY_BLOCK
    step = step or lq
    return tuple((a, min(a + step, lq)) for a in range(0, lq, step))


def scores_bytes(q_shape, k_shape) -> int:
    """Bytes of one attention's float32 scores [B, H, Lq, Lk]."""
    return 4 * math.prod(q_shape[:3]) * k_shape[2]


def scores_path(q_shape, k_shape, dtype: str, causal: bool, target=None) -> bool:
    """Whether attention of q [B, H, Lq, D] over k [B, H, Lk, D] runs written out on `target`
    (matmul, softmax, matmul) rather than on the flash kernels."""
    target = target_of(target)
    lq, lk, d = q_shape[2], k_shape[2], q_shape[3]
    if causal and lq > lk:
        return False
    fits = scores_bytes(q_shape, k_shape) <= target.max_storage_buffer_range
    if d not in SUPPORTED_HEAD_DIMS:     # no kernel for it: written out beats the interpreter
        return fits
    if attention_coop.takes(q_shape, k_shape, dtype, target) and d <= COOP_FLASH_MAX_HEAD_DIM:
        return False                     # the flash kernels on the tensor cores
    if dtype != "f32" and matmul_coop.runs_on(target, dtype):     # on the tensor cores
        pays = d * lk >= (HALF_CAUSAL_SCORES_MIN_HEAD_DIM_TIMES_KEYS if causal else
                          HALF_SCORES_MIN_HEAD_DIM_TIMES_KEYS)
    elif causal:
        pays = d >= CAUSAL_SCORES_MIN_HEAD_DIM and d * lk >= CAUSAL_SCORES_MIN_HEAD_DIM_TIMES_KEYS
    else:
        pays = d >= SCORES_MIN_HEAD_DIM and d * lk >= SCORES_MIN_HEAD_DIM_TIMES_KEYS
    return pays and fits and scores_bytes(q_shape, k_shape) <= target.attention_scores_max_bytes


def plan_eqn(e, target, placed=None, dlse_zero=False):
    """The eqn's plan and roles; `placed` {role: (buffer, OperandLayout)} reads or writes those
    roles in another array's buffer, `dlse_zero` the backward's dlse known zero (plan_group).
    float16 attention runs on cooperative matrices (lowering/attention_coop.py) where it
    takes the eqn; elsewhere widen_halves has made it f32 (`_dtypes`)."""
    if e.inputs[0].dtype == "f16":
        if placed:
            raise Unsupported(f"{e.prim.name} on cooperative matrices reads dense operands", e)
        return attention_coop.plan_eqn(e, target, dlse_zero)
    need_f32(e, *e.inputs)
    q, k = e.inputs[0], e.inputs[1]
    b, h, lq, d = q.shape
    if d not in SUPPORTED_HEAD_DIMS:
        raise Unsupported(f"{e.prim.name} at head_dim {d} (the kernel takes head_dim in "
                          f"{SUPPORTED_HEAD_DIMS})", e)
    lk = k.shape[2]
    kw = dict(causal=e.params["causal"], scale=e.params["scale"], target=target)
    if placed:
        kw.update(heads=h, layouts={r: lay for r, (_, lay) in placed.items()})
    if e.prim is P.flash_attention_bwd_p:
        fused = fused_backward_planned(b * h, lq, lk, d, target)
        if fused is not None and loop_limit_problem("bwd", lq, d, target, fused) is None:
            kw["fused"], modes = True, ()
        else:
            kw["fused"], modes = False, (("dq", lk), ("dkdv", lq))
    else:
        modes = (("fwd", lk),)
    for mode, streamed in modes:
        why = loop_limit_problem(mode, streamed, d, target)
        if why is not None:
            raise Unsupported(why, e)
    if e.prim is P.flash_attention_bwd_p:
        roles = dict(zip(("q", "k", "v", "o", "lse", "do", "dlse"), e.inputs))
        roles.update(zip(("dq", "dk", "dv"), e.outputs))
        plan = plan_flash_attention_bwd(b * h, lq, lk, d, dlse_zero=dlse_zero, **kw)
    else:
        roles = dict(zip(("q", "k", "v"), e.inputs))
        roles.update(o=e.outputs[0], lse=e.outputs[1])
        plan = plan_flash_attention(b * h, lq, lk, d, **kw)
    roles.update({r: buf for r, (buf, _) in (placed or {}).items()})
    for r in BIAS_ROLES if any(r in roles for r in BIAS_ROLES) else ():
        roles.setdefault(r, roles[r.removesuffix("_bias")])    # bound, never read
    if dlse_zero:
        roles["dlse"] = roles["o"]       # bound, never read
    return plan, roles


def plan_group(anchors, target, root, body=None):
    """A flash attention whose fused kernel also holds the views that make its operands
    (lowering/attention_layouts.py): the kernel reads the viewed buffers in place (and a
    backward's zero dlse, computed there, not at all)."""
    if len(anchors) != 1 or anchors[0].prim not in CONTRACT.primitives:
        return None
    e = anchors[0]
    if body is None:
        return plan_eqn(e, target)
    placed = {role: (src, OperandLayout(*strides)) for role, (src, strides) in
              attention_layouts.operand_layouts(e, body).items()}
    try:
        return plan_eqn(e, target, placed, attention_layouts.zero_dlse(e, body))
    except ValueError as err:
        raise Unsupported(str(err), e) from None


def _dtypes(e, target) -> tuple:
    """The element types eqn `e` runs in as it is: f32, and f16 where the cooperative-matrix
    kernels take it (lowering/attention_coop.py); widen_halves makes other 16-bit attention f32."""
    q, k = e.inputs[0], e.inputs[1]
    return ("f32", "f16") if attention_coop.takes(q.shape, k.shape, q.dtype, target) else ("f32",)


CONTRACT = register(KernelContract(
    name="flash_attention", shader="flash_attention.comp",
    primitives=(P.flash_attention_p, P.flash_attention_bwd_p), plan=plan_eqn,
    plan_group=plan_group, eqn_dtypes=_dtypes,
    limits=f"f32; head dims {', '.join(map(str, SUPPORTED_HEAD_DIMS))}; a tile of TILES that "
           "fits the device's shared memory"))
