"""Planner for the batched matmul kernel (vkgrad/kernels_glsl/matmul.comp).

`plan_matmul` turns shapes and layout flags into a `Launch` binding three buffers (A, B, C, in
that order): which tile variant, its specialization constants, push constants, workgroup count.
`plan_matmul_op` wraps it as an `OpPlan` (roles "a", "b", "c"; what the lowering calls) and adds
split-K where the output is too small to fill a GPU, or fills half a wave over a long K (see
`choose_splits`). Pure Python, no
device: tested directly, and on lavapipe by tests/test_matmul.py.

Variants (one shader; they differ only in specialization constants):

| variant | block   | BK | per thread | K slices | threads | used for                          |
| ------- | ------- | -- | ---------- | -------- | ------- | --------------------------------- |
| large   | 128x128 |  8 | 16x8       | 1        | 128     | GPU, >= 128 workgroups of it      |
| medium  | 128x64  | 16 | 8x8        | 1        | 128     | GPU, N <= 64, or >= 96 workgroups |
| small   | 32x64   | 16 | 4x8        | 2        | 128     | GPU, smaller outputs (MLP layers) |
| large64 | 128x64  |  8 | 16x8       | 1        |  64     | GPU, large's 2nd wave             |
| wide64  | 64x64   |  8 | 8x8        | 1        |  64     | lavapipe, where `large` would pad |

Measured on an H200 (bench/NOTES_matmul.md, 2026-11-29, TFLOP/s vs cuBLAS fp32 in the same run):
large 46.7 vs 49.9 at 4096^3 and 46.0 vs 48.5 at 2048^3; medium 36.0 vs 28.8 at 1024^3; small
16-22 vs 11-16 on the MLP step's 256 x 784..1024 x 1024 products. On lavapipe the large tile is
2-4x faster than small ones (fewer workgroups to switch between) and compiles in well under a
second, so it is used there too unless its edge tiles would waste much work.
"""

from __future__ import annotations

from dataclasses import dataclass

from vkgrad import primitives as P
from vkgrad.lowering.contracts import Concat, KernelContract, Unsupported, need_f32, register
from vkgrad.lowering.kernels import OpPlan, plan_split_sum
from vkgrad.lowering.launch import MAX_GROUPS_X, Launch, cdiv
from vkgrad.lowering import matmul_coop
from vkgrad.target import target_of

_U32 = 2**32


@dataclass(frozen=True)
class Tile:
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    ks: int = 1         # K slices per workgroup (each slice: its own threads and tiles)
    warp_x: int = 0     # 0: threads row-major over the TX x TY grid; else warp_x x 32/warp_x warps
    phases: int = 1     # the next k step is prefetched in this many parts
    always_prefetch: bool = False   # the last step prefetches too: a loop body without branches

    @property
    def threads(self) -> int:
        return self.ks * self.slice_threads

    @property
    def slice_threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def shared_bytes(self) -> int:
        tiles = self.ks * 2 * self.bk * (self.bm // 4 + 1 + self.bn // 4 + 1)
        reduce = (self.ks - 1) * self.tm * self.tn // 4 * self.slice_threads
        return 16 * max(tiles, reduce)

    def check(self, max_shared: int = 32768) -> None:
        t, tx, ty = self.slice_threads, self.bn // self.tn, self.bm // self.tm
        ok = (self.tm % 4 == 0 and self.tn % 4 == 0 and self.bk % 4 == 0 and self.ks >= 1
              and self.bm % self.tm == 0 and self.bn % self.tn == 0
              and (self.bm * self.bk // 4) % t == 0 and (self.bn * self.bk // 4) % t == 0
              and (self.bm * self.bk // 4) >= t and (self.bn * self.bk // 4) >= t)
        ok = ok and self.phases >= 1 and self.bk % self.phases == 0 and \
            (self.bm * self.bk // 4 // t) % self.phases == 0 and \
            (self.bn * self.bk // 4 // t) % self.phases == 0
        if ok and self.warp_x:
            ok = (32 % self.warp_x == 0 and t % 32 == 0 and tx % self.warp_x == 0
                  and ty % (32 // self.warp_x) == 0)
        if not ok:
            raise ValueError(f"matmul tile {self} is not valid: TM, TN, BK must be multiples of 4 "
                             "dividing the block, each thread must load whole vec4s, and warps "
                             "must tile the thread grid")
        if self.shared_bytes > max_shared:
            raise ValueError(f"matmul tile {self} needs {self.shared_bytes} bytes of shared "
                             f"memory; the device has {max_shared}")


VARIANTS = {
    # 215 registers: 2 workgroups (8 warps) per multiprocessor. Without always_prefetch the same
    # tile measured 41.3 TFLOP/s at 4096^3 (46.7 with it); the 8x8-per-thread, 256-thread tile
    # of the usual recipe 39.4 (127 registers, the compiler's cap for 2 such workgroups).
    "large": Tile(bm=128, bn=128, bk=8, tm=16, tn=8, always_prefetch=True),
    # always_prefetch made this one slower (27 vs 39 TFLOP/s at 4096^3), so it is left off here.
    "medium": Tile(bm=128, bn=64, bk=16, tm=8, tn=8),
    # Few workgroups: two K slices per workgroup double the warps that hide memory latency
    # (13.7 -> 20-22 TFLOP/s at 256x1024x1024 against one slice).
    "small": Tile(bm=32, bn=64, bk=16, tm=4, tn=8, ks=2),
    # large's threads on half its block: twice the workgroups of 64 threads. 8192x256x768 NN
    # (384 workgroups of large, 1.45 waves) 37.5 TFLOP/s against large's 31.5 and cuBLAS's 33.1
    # (H200, 2026-12-02, bench_matmul.py --sweep); 8192x768x256 NT 35.9 (large 37.9)
    "large64": Tile(bm=128, bn=64, bk=8, tm=16, tn=8, always_prefetch=True),
    # named for its shape, not where it runs: a Target with matmul_tiles="padding" picks it
    "wide64": Tile(bm=64, bn=64, bk=8, tm=8, tn=8),
}

# The GPU's variant by workgroup counts (H200: 132 multiprocessors; large runs 2 workgroups on
# each, so LARGE_WAVE = 264 at a time):
# - large from LARGE_MIN_GROUPS workgroups of it: at 128 (one per multiprocessor) it ran
#   8192x768x256 NT at 37.9 TFLOP/s against medium's 34.9 and 8 x 512^3 at 36.6 against 35.1;
# - ... but large64 where large would leave most of a second wave idle (more than one wave,
#   at most LARGE64_WAVES of them: 384 workgroups, above);
# - ... and medium (a 64-wide block like large64's) where N <= 64 would pad half of large's
#   block: 32 x 1024x1024x64 NN (the transformer block's P V) ran medium at 34.1 TFLOP/s,
#   large64 29.2, large 22.9 (cuBLAS 37.0; H200, 2026-12-02, bench_matmul.py --sweep);
# - else medium from MEDIUM_MIN_GROUPS workgroups (about 0.75 waves of it at 1 a multiprocessor:
#   its 25.6 KB of shared memory, since the H200's multiprocessors give all their resident
#   workgroups 48 KiB, bench/occupancy_probe.py; 3 by its registers);
# - else small.
LARGE_WAVE = 264
LARGE_MIN_GROUPS = 128
LARGE64_WAVES = 1.75
MEDIUM_MIN_GROUPS = 96

# Split-K (GPU only; see choose_splits). Designed from the H200's numbers (132 SMs, ~2-3 us per
# extra dispatch, the `small` tile's k loop latency-bound at ~1.5-2.4 us per step of BK*KS when
# there are few workgroups); bench/NOTES_matmul.md says what is measured and what is not.
SPLIT_BELOW_GROUPS = 66     # split only outputs of fewer workgroups (half the H200's 132 SMs)
SPLIT_TARGET_GROUPS = 132   # ... into about this many (one per SM)
SPLIT_MIN_ITERS = 8         # ... and only when a workgroup would loop this many k steps (of BK*KS)
SPLIT_SLICE_ITERS = 2       # each K slice keeps at least this many steps
MAX_SPLITS = 64

# Half a wave: the large tile with at most LARGE_WAVE / 2 workgroups (one a multiprocessor)
# and K >= HALF_WAVE_MIN_K is cut into LARGE_WAVE // groups K slices (2 at 128 workgroups):
# the second workgroup on each multiprocessor hides the first's latency. At 128 workgroups
# (H200, 2026-12-02, bench_matmul.py --sweep; TFLOP/s unsplit -> 2 slices, cuBLAS):
# 4096x2048x512 NN 29.8 -> 43.1 (42.5), NT 32.6 -> 42.3 (41.3); 8192x1024x256 NN 30.7 -> 39.2
# (39.3), NT 32.1 -> 38.7 (39.6); 4096x1536x512 NT 34.3-39.3 -> 41.5 (41.5); but K = 768
# (8192x768x256 NT) 38.0 -> 36.9 and K = 256 33.3 -> 27.1: short slices lose the prefetch.
HALF_WAVE_MIN_K = 1024


def choose_variant(batch: int, m: int, n: int, target=None) -> str:
    if target_of(target).matmul_tiles == "padding":
        # lavapipe: bigger tiles run faster (fewer workgroups to switch between) but compute the
        # padding of edge tiles too; use the large one only where it wastes little.
        big = VARIANTS["large"]
        padded = cdiv(m, big.bm) * big.bm * cdiv(n, big.bn) * big.bn
        return "large" if padded <= 1.25 * max(m * n, 1) else "wide64"
    def groups(name):
        t = VARIANTS[name]
        return cdiv(m, t.bm) * cdiv(n, t.bn) * batch

    large = groups("large")
    if large >= LARGE_MIN_GROUPS:
        if n <= VARIANTS["medium"].bn:
            return "medium"
        return "large64" if LARGE_WAVE < large <= LARGE64_WAVES * LARGE_WAVE else "large"
    return "medium" if groups("medium") >= MEDIUM_MIN_GROUPS else "small"


def split_count(k: int, tile: Tile, splits: int) -> int:
    """How many K slices `splits` requested ones become: the shader cuts K into slices of
    ceil(steps / splits) whole steps of BK*KS, so none is empty and each is tile-aligned."""
    steps = cdiv(k, tile.bk * tile.ks)
    if splits <= 1 or steps <= 1:
        return 1
    per = cdiv(steps, min(int(splits), steps))
    return cdiv(steps, per)


# A device that ends long loops early (lavapipe: Target.max_loop_iterations, 65,535 counted
# over all of an invocation's loops) gets K slices short enough to finish: on lavapipe a 1 x K
# x 1 product of ones gave 18,073 for every K from 18,074 up, every tile with BK = 8, so about
# 29 counted iterations per k step; 48 per step leaves room (K slices of up to 10,920 at BK 8).
LOOP_ITERATIONS_PER_STEP = 48


def loop_limit_splits(k: int, tile: Tile, target=None) -> int:
    """The fewest K slices whose k loops stay under the Target's loop limit (1: none needed)."""
    limit = target_of(target).max_loop_iterations
    if not limit:
        return 1
    steps = cdiv(k, tile.bk * tile.ks)
    return cdiv(steps, max(1, limit // LOOP_ITERATIONS_PER_STEP))


# Tall K: a weight gradient ([m, n] = op(A)^T op(B) over K tokens) with K >= TALL_K_MIN whose
# output is at most TALL_K_MAX_BLOCKS blocks of the large tile (a quarter of a wave). By output
# size alone it got the small tile unsplit: [1024, 256] from 8,192 tokens ran 128 workgroups of
# it at 24 TFLOP/s (175 us; the small LM's 12 weight gradients, 2.1 ms of its 10.7, H200,
# 2026-12-01). Such a product takes the large tile cut into K slices for at most
# TALL_K_TARGET_GROUPS workgroups (one wave, two per multiprocessor of the H200), each slice
# TALL_K_SLICE_STEPS k steps or more. [256, 768] from 8,192 (12 blocks): 22 slices, 264
# workgroups, 38.5 TFLOP/s; 16, 24, 32, 64 slices (192, 288, 384, 768) 30.5, 22.6, 28.2, 29.6;
# unsplit small 19.7 (H200, 2026-12-02): a whole wave, not more, is what pays. The transformer
# block's [512, 1536..2048] and [2048, 512] from 4,096 tokens (48-64 blocks; medium unsplit ran
# them at 0.72-0.88x cuBLAS) are tall by this rule too.
TALL_K_MIN = 2048
TALL_K_MAX_BLOCKS = 66
TALL_K_TARGET_GROUPS = 264
TALL_K_SLICE_STEPS = 32


def tall_k(batch: int, m: int, k: int, n: int, target=None) -> bool:
    """... and whose output the large tile covers with little padding (a [64, 48] one would
    leave three quarters of each 128 x 128 block idle: the split small tile keeps it)."""
    t, big = target_of(target), VARIANTS["large"]
    blocks = cdiv(m, big.bm) * cdiv(n, big.bn)
    return (t.split_k and t.matmul_tiles != "padding" and batch == 1 and k >= TALL_K_MIN
            and blocks <= TALL_K_MAX_BLOCKS and blocks * big.bm * big.bn <= 1.25 * m * n)


def choose_splits(batch: int, m: int, k: int, n: int, tile: Tile, target=None) -> int:
    """K slices across workgroups for split-K; 1 means none.

    On a GPU (Target.split_k): when `tile` gives fewer than SPLIT_BELOW_GROUPS workgroups and
    each would loop at least SPLIT_MIN_ITERS k steps, split K into enough slices for about
    SPLIT_TARGET_GROUPS workgroups, each slice SPLIT_SLICE_ITERS steps or more. On any device,
    at least `loop_limit_splits` slices. The partial products then cost a second dispatch (a
    sum over the slices, in a fixed order: deterministic).
    """
    target = target_of(target)
    need = loop_limit_splits(k, tile, target)
    s = 1
    if target.split_k:
        groups = cdiv(m, tile.bm) * cdiv(n, tile.bn) * batch
        steps = cdiv(k, tile.bk * tile.ks)
        if tile == VARIANTS["large"] and tall_k(batch, m, k, n, target):
            s = max(1, min(TALL_K_TARGET_GROUPS // max(groups, 1),
                           steps // TALL_K_SLICE_STEPS, MAX_SPLITS))
        elif (tile == VARIANTS["large"] and batch == 1 and 0 < groups <= LARGE_WAVE // 2
              and k >= HALF_WAVE_MIN_K):
            s = LARGE_WAVE // groups
        elif 0 < groups < SPLIT_BELOW_GROUPS and steps >= SPLIT_MIN_ITERS:
            s = min(cdiv(SPLIT_TARGET_GROUPS, groups), steps // SPLIT_SLICE_ITERS, MAX_SPLITS,
                    MAX_GROUPS_X // batch)
    s = max(s, need)
    return split_count(k, tile, s) if s > 1 else 1


def choose_plan(batch: int, m: int, k: int, n: int, target=None) -> tuple[str, int]:
    """(variant, K slices) for a matmul left to the planner: the variant by output size
    (`choose_variant`) or the tall-K rule, then `choose_splits` for it."""
    variant = "large" if tall_k(batch, m, k, n, target) else choose_variant(batch, m, n, target)
    return variant, choose_splits(batch, m, k, n, VARIANTS[variant], target)


def plan_matmul_op(batch: int, m: int, k: int, n: int, transpose_a: bool, transpose_b: bool,
                   a_batch_stride: int, b_batch_stride: int, target=None, *,
                   splits: int | None = None, ones_row: bool = False, **options) -> OpPlan:
    """The matmul as an OpPlan: roles "a", "b" (the operands) and "c" (the result), bound as
    `plan_matmul`'s Launch binds them (0 = A, 1 = B, 2 = C); arguments as for `plan_matmul`.

    Usually one launch. With split-K (`choose_splits`, or forced by `splits`: None chooses,
    1 turns it off, S > 1 asks for S slices, fewer if K has fewer steps) it is two: the matmul
    writes S partial products to the float32 temp "partials" [S, batch*m*n], then the reduction
    kernel sums them into "c" (its own roles "x"/"out" renamed to those). `options` go to
    `plan_matmul` (variant, tile, bake, range_checks). `ones_row`: C gets an extra row M holding
    the column sums of op(B) (see `plan_matmul`); "c" is then [m + 1, n].
    """
    if splits is None and options.get("variant") is None and options.get("tile") is None:
        variant, splits = choose_plan(batch, m, k, n, target)
        options = dict(options, variant=variant)
    launch = plan_matmul(batch, m, k, n, transpose_a, transpose_b, a_batch_stride,
                         b_batch_stride, target, ones_row=ones_row, **options)
    _, tile = _resolve_tile(batch, m, n, target, options.get("variant"), options.get("tile"))
    if splits is None:
        s = choose_splits(batch, m, k, n, tile, target)
    else:
        if int(splits) != splits or splits < 1:
            raise ValueError(f"matmul: splits = {splits!r} must be a positive integer")
        s = split_count(k, tile, int(splits))
    if s == 1 or batch * m * n == 0:
        return OpPlan(((launch, ("a", "b", "c")),))
    partial = plan_matmul(batch, m, k, n, transpose_a, transpose_b, a_batch_stride,
                          b_batch_stride, target, splits=s, ones_row=ones_row, **options)
    return plan_split_sum(partial, ("a", "b"), "c", s, batch * (m + int(ones_row)) * n,
                          target=target)


def _resolve_tile(batch, m, n, target, variant, tile) -> tuple[str, Tile]:
    """(variant name, Tile) that plan_matmul uses for these arguments."""
    if tile is not None:
        return "custom", tile
    name = variant or choose_variant(batch, m, n, target)
    if name not in VARIANTS:
        raise ValueError(f"matmul: unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    return name, VARIANTS[name]


def plan_matmul(batch: int, m: int, k: int, n: int, transpose_a: bool, transpose_b: bool,
                a_batch_stride: int, b_batch_stride: int, target=None, *,
                variant: str | None = None, tile: Tile | None = None,
                bake: bool = False, range_checks: bool | None = None,
                splits: int = 1, ones_row: bool = False) -> Launch:
    """C[b] = op(A[b]) @ op(B[b]) for b < batch, fp32, row-major contiguous storage.

    A is stored [m, k] ([k, m] if transpose_a), B [k, n] ([n, k] if transpose_b), C [batch, m, n].
    Batch entry b of A starts at element b * a_batch_stride (0 broadcasts A), likewise B.
    `variant` forces one of VARIANTS (tests, benchmarks), `tile` any valid Tile; `bake` compiles
    the tile into the SPIR-V as defines instead of specialization constants. `range_checks`:
    None leaves them out where m, n, k are multiples of the tile, True keeps them always.
    `splits` > 1: the split-K partial product: K is cut into `splits` slices of whole k steps
    (`split_count` must give `splits` back, so that none is empty) and C is [splits, batch, m, n],
    slice s's partial product at C[s]; someone else sums them (`plan_matmul_op` does).
    `ones_row` (batch 1): op(A) gets a virtual row M of ones, so C is [m + 1, n] and its last row
    is the column sums of op(B): a bias gradient computed in the same pass as the weight
    gradient. Its stores must go through a fusion hook (lowering/hooks.py), which splits C.
    """
    if ones_row and batch != 1:
        raise ValueError("matmul: ones_row needs batch 1")
    rows = m + int(ones_row)
    for label, v in (("batch", batch), ("m", m), ("k", k), ("n", n)):
        if int(v) != v or v < 0:
            raise ValueError(f"matmul: {label} = {v!r} must be a non-negative integer")
    if batch < 1:
        raise ValueError(f"matmul: batch = {batch} must be at least 1")
    for label, s in (("a_batch_stride", a_batch_stride), ("b_batch_stride", b_batch_stride)):
        if int(s) != s or s < 0:
            raise ValueError(f"matmul: {label} = {s!r} must be a non-negative integer")
    last_a = (batch - 1) * a_batch_stride + m * k
    last_b = (batch - 1) * b_batch_stride + k * n
    if int(splits) != splits or splits < 1:
        raise ValueError(f"matmul: splits = {splits!r} must be a positive integer")
    splits = int(splits)
    if max(last_a, last_b, splits * batch * rows * n) >= _U32:
        raise ValueError(f"matmul: operands of {max(last_a, last_b, splits * batch * rows * n)} "
                         "elements exceed the kernel's 32-bit indexing")

    name, tile = _resolve_tile(batch, m, n, target, variant, tile)
    tile.check(target_of(target).max_shared_memory)

    if splits > 1 and split_count(k, tile, splits) != splits:
        raise ValueError(f"matmul: {splits} K slices of whole {tile.bk * tile.ks}-steps do not "
                         f"divide k = {k} without an empty one (use split_count)")
    groups = (cdiv(n, tile.bn), cdiv(rows, tile.bm), batch * splits)
    if max(groups) > MAX_GROUPS_X:
        raise ValueError(f"matmul: workgroup count {groups} exceeds {MAX_GROUPS_X} in one "
                         f"dimension (batch {batch}, m {m}, n {n}, splits {splits})")
    groups = tuple(max(1, g) for g in groups)

    ta, tb = bool(transpose_a), bool(transpose_b)
    # vec4 loads need the operand's contiguous dimension and its batch stride to be multiples
    # of 4 (so every vec4 is aligned and either wholly in range or wholly out).
    vec_a = (m if ta else k) % 4 == 0 and a_batch_stride % 4 == 0
    vec_b = (k if tb else n) % 4 == 0 and b_batch_stride % 4 == 0
    vec_c = n % 4 == 0
    # (the ones row, when m is a multiple of BM, is a block row of its own: the others stay exact)
    exact = m % tile.bm == 0 and n % tile.bn == 0 and k % (tile.bk * tile.ks) == 0 and k > 0
    checks = True if range_checks else not exact
    values = (tile.threads, tile.bm, tile.bn, tile.bk, tile.tm, tile.tn, ta, tb, vec_a, vec_b,
              vec_c, tile.ks, tile.warp_x, tile.phases, checks, tile.always_prefetch)
    # SPLITS (constant 16) is only given when > 1: an unsplit launch's constants, and so its
    # pipeline, do not depend on split-K.
    if splits > 1:
        values += (splits,)
    if bake:
        keys = ("MM_BM", "MM_BN", "MM_BK", "MM_TM", "MM_TN", "MM_TRANS_A", "MM_TRANS_B",
                "MM_VEC_A", "MM_VEC_B", "MM_VEC_C", "MM_KS", "MM_WARP_X", "MM_PHASES", "MM_CHECK",
                "MM_ALWAYS_PREFETCH", "MM_SPLITS")
        defines = (("VKGRAD_BAKE_SPEC", 1),) + tuple(
            (key, str(v).lower() if isinstance(v, bool) else v) for key, v in zip(keys, values[1:]))
        spec = ()
    else:
        defines, spec = (), values
    if splits > 1:
        name += f"_splitk{splits}"
    if ones_row:
        defines += (("VKG_ONES_ROW", 1),)
    return Launch(name=f"matmul_{name}", shader="matmul.comp", bindings=3, groups=groups,
                  push=(m, n, k, a_batch_stride, b_batch_stride), spec=spec, defines=defines)


# ------------------------------------------------------------------ the contract

def _operands(e):
    """(batch, m, k, n) of matmul eqn `e`."""
    a, c = e.inputs[0], e.out
    k = a.shape[-2] if e.params["transpose_a"] else a.shape[-1]
    return (c.shape[0] if c.ndim == 3 else 1), c.shape[-2], k, c.shape[-1]


def would_split(e, target=None) -> bool:
    """Does matmul eqn `e` run split-K on `target` (as `plan_matmul_op` chooses)?"""
    return choose_plan(*_operands(e), target)[1] > 1


def takes_hooks(e, target=None, loads: bool = False) -> bool:
    """Generated stores (or, `loads`, loads and a column sum) pay only for a matmul up to the
    Target's flop limits, and never for one that splits K: a split-K matmul with fused loads
    feeding one with its epilogue in the K-slice sum gave wrong results on the H200, and the
    weight gradients over 8,192 tokens ran 406 us ([256,256] with a fused column sum) and
    1510 us ([512,48] with fused loads) unsplit (bench_lm, 2026-12-01)."""
    target = target_of(target)
    if e.inputs[0].dtype in matmul_coop.DTYPES:
        return False             # the cooperative-matrix kernel has no hooks
    batch, m, k, n = _operands(e)
    limit = target.matmul_load_hook_max_flops if loads else target.matmul_hook_max_flops
    return 2 * batch * m * n * k <= limit and not would_split(e, target)


def plan_eqn(e, target, column_sum=None, fused=False):
    """`column_sum`: a reduce_sum eqn summing B over the contracted axis (multi_output fusion):
    C gets an extra row for it, and "c" stands for both results. `fused`: the kernel takes
    generated loads or stores, and then never split-K (see `takes_hooks`)."""
    a, b = e.inputs
    c = e.out
    batch, m, k, n = _operands(e)
    if a.dtype == b.dtype and a.dtype in matmul_coop.DTYPES and column_sum is None:
        return (matmul_coop.plan_matmul_coop(batch, m, k, n, e.params["transpose_a"],
                                             e.params["transpose_b"],
                                             m * k if a.ndim == 3 else 0,
                                             k * n if b.ndim == 3 else 0, target, a.dtype,
                                             out_dtype=c.dtype),
                {"a": a, "b": b, "c": c})
    need_f32(e, a, b)
    plan = plan_matmul_op(batch, m, k, n, e.params["transpose_a"], e.params["transpose_b"],
                          m * k if a.ndim == 3 else 0, k * n if b.ndim == 3 else 0, target,
                          ones_row=column_sum is not None,
                          splits=1 if fused or column_sum is not None else None)
    return plan, {"a": a, "b": b, "c": c if column_sum is None else Concat((c, column_sum.out))}


def plan_group(anchors, target, root, body=None):
    """A matmul with fused loads or stores, or a matmul and the column sum of its B."""
    prims = [a.prim for a in anchors]
    if prims == [P.matmul_p]:
        return plan_eqn(anchors[0], target, fused=True)
    if sorted(p.name for p in prims) == ["matmul", "reduce_sum"]:
        mm, red = sorted(anchors, key=lambda a: a.prim is not P.matmul_p)
        if root(mm.inputs[1]) is not root(red.inputs[0]) and red.inputs[0] is not mm.inputs[1]:
            raise Unsupported("a column sum fused with a matmul over another operand")
        return plan_eqn(mm, target, column_sum=red, fused=True)
    return None


CONTRACT = register(KernelContract(
    name="matmul", shader="matmul.comp", primitives=(P.matmul_p,),
    plan=plan_eqn, plan_group=plan_group,
    # each operand element is loaded once per tile of the other operand: only short chains
    # that read no more memory per element than the operand itself (add, mul, max, select;
    # no exp/tanh/pow per load; one full-size input)
    fused_loads={P.matmul_p: (0, 1)}, load_max_cost=3, load_max_full_inputs=1,
    fused_stores=frozenset({P.matmul_p}),
    takes_hooks=takes_hooks, column_sum=True,
    # float16 and bfloat16 on the tensor cores (lowering/matmul_coop.py) where the target
    # has them
    target_dtypes=matmul_coop.dtypes_on,
    limits="f32; operands and result under 2^32 elements; workgroup counts under 65,535 per "
           "dimension"))
