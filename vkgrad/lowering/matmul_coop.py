"""The cooperative-matrix matmul (kernels_glsl/matmul_coop.comp): f16 operands on the tensor
cores, accumulating in f32, the result rounded to f16 once (the interpreter's rule). The matmul
family's contract (lowering/matmul.py) sends a float16 matmul here on a Target that runs
16 x 16 x 16 f16 x f16 + f32 subgroup matrices (`Target.cooperative_shape`) and has the Vulkan
memory model; elsewhere (lavapipe) the fusion pass widen_halves gives the f32 kernel converts
around it, so the same program runs everywhere.

The tile: 128 x 128 blocks of C, K 32 at a time, four subgroups of 64 x 64, shared tiles kept in
16-byte words. On the H200 (bench/coop_matmul_probe.py, 2026-12-01) that was the best of the
tilings tried: 241 TFLOP/s at 4096^3 (cuBLAS f16: 739), 137-178 at the LM's shapes; without
unrolled loops the same kernel ran 33; double-buffered shared tiles ran slower (148); K 64 at a
time (169), 128 x 256 or 256 x 128 blocks of eight subgroups (232, 214) and eight subgroups of
32 x 64 (161) ran slower too, except for C = A B^T (TILE_NT). Where every tile lies inside the
operands (ALIGNED: no edge tests, addresses computed once) and B's fragments are loaded one
at a time (FRAG_B_ONE), 4096^3 ran 274 (the same run: 240 without), the LM's NN 177-196 (was
163-179), its A^T B 162-189 (137-157); one barrier a k-step (PIPE) ran 167-182, K 16 125. The
driver gives the 64 x 64 subgroups 230-251 registers: two 128-thread workgroups a
multiprocessor (bench/coop_pipeline_stats.py).

bfloat16 runs the same kernel: it does no arithmetic on its operands (it moves their bits and
multiplies them on the tensor cores), so with VKG_BFLOAT16 its one 16-bit float type is made
bfloat16 in the SPIR-V (runtime/spirv_bfloat16.py; glslang 13 has no GL_EXT_bfloat16) where the
device runs VK_KHR_shader_bfloat16's cooperative matrices (kp patch 0011 enables them).
The kernel takes no generated loads or stores (matmul.takes_hooks says so for f16).
"""

from __future__ import annotations

from vkgrad.lowering.contracts import Unsupported
from vkgrad.lowering.kernels import OpPlan, Temp
from vkgrad.lowering.launch import MAX_GROUPS_X, Launch, cdiv, grid
from vkgrad.target import target_of

TILE = dict(BM=128, BN=128, BK=32, WM=64, WN=64, ALIGNED=1, FRAG_B_ONE=1)
# C = A B^T (the input gradients): eight subgroups of 64 x 32 and K 64 at a time ran 173 -> 211
# and 180 -> 217 TFLOP/s at the LM's [8192, 768] x [768, 2304 | 3072]^T shapes (f32 out,
# coop_matmul_probe, H200, 2026-12-01; ALIGNED: 220, 228); at C = A^T B one shape gained
# (163 -> 206) and one lost (190 -> 145), and at 4096^3 NN it lost (274 -> 247), so only B^T
# alone takes it
TILE_NT = dict(BM=128, BN=128, BK=64, WM=64, WN=32, ALIGNED=1)
# Products with a head dim as N or K (attention written out, lowering/attention_scores.py;
# bench/coop_matmul_probe.py att_*, batch 32 of B4 H8 L1024, H200 2026-12-02 21:50, TFLOP/s
# against the 128 x 128 x 32 default): N = 64 (P V, dS K, P^T dO, dS^T Q) in 256 x 64 x 64
# blocks of four 64 x 64 subgroups, 133-137 against 92-112 (only where every tile lies inside:
# off ALIGNED its edge buffer takes it past 48 KB of shared memory); N = 128 with B not
# transposed (P V at D128) as TILE_NT, 172 against 152; C = A B^T with K <= 128 (the scores,
# dP) in 128 x 64 x 32 blocks of two subgroups, 54 against 38 at K 64 (f32 out), 82 against 67
# at K 128.
TILE_NARROW = dict(BM=256, BN=64, BK=64, WM=64, WN=64, ALIGNED=1)
TILE_SHORT_K = dict(BM=128, BN=64, BK=32, WM=64, WN=64, ALIGNED=1, FRAG_B_ONE=1)


def choose_tile(m: int, k: int, n: int, transpose_a: bool, transpose_b: bool,
                vec: bool) -> dict:
    """The tile of C = op(A) op(B) (`vec`: every row of A and B starts on 16 bytes)."""
    if transpose_b and not transpose_a:
        return TILE_SHORT_K if k <= 128 else TILE_NT
    if n <= 64 and not transpose_b and vec and m % TILE_NARROW["BM"] == 0 and \
            n % TILE_NARROW["BN"] == 0 and k % TILE_NARROW["BK"] == 0:
        return TILE_NARROW
    if n <= 128 and not transpose_a and not transpose_b:
        return TILE_NT
    return TILE


DTYPES = ("f16", "bf16")


def runs_on(target, dtype: str = "f16") -> bool:
    """Whether `target` runs this kernel on `dtype` operands: the shape it is written for, the
    memory model, 16-bit storage (its results are 16-bit), a known subgroup size (the
    kernel's workgroup is whole subgroups) and, for bfloat16, VK_KHR_shader_bfloat16's
    cooperative matrices (kp patch 0011 enables them; the shader's float16_t is rewritten as
    bfloat16 in its SPIR-V, runtime/spirv_bfloat16.py)."""
    t = target_of(target)
    return (dtype in DTYPES and t.cooperative_shape(dtype, "f32") is not None
            and t.memory_model and t.storage_16bit and t.subgroup_size is not None
            and (dtype == "f16" or t.bfloat16))


def dtypes_on(target) -> tuple:
    """The operand types this kernel runs on `target`."""
    return tuple(d for d in DTYPES if runs_on(target, d))


def plan_matmul_coop(batch: int, m: int, k: int, n: int, transpose_a: bool, transpose_b: bool,
                     a_batch_stride: int, b_batch_stride: int, target=None,
                     dtype: str = "f16", tile: dict | None = None,
                     out_dtype: str | None = None) -> OpPlan:
    """C [batch, m, n] (`out_dtype`: `dtype`, or f32 for the accumulator as it is) = A @ B of
    `dtype` operands (f16 or bf16): A [batch?, m, k]
    (or [.., k, m] with transpose_a), B [batch?, k, n] (or [.., n, k]); a batch stride of 0
    broadcasts an operand. Roles "a", "b", "c". `tile` (BM BN BK WM WN and the kernel's
    options, as TILE) replaces the layout's default (bench/coop_matmul_probe.py)."""
    t = target_of(target)
    if not runs_on(t, dtype):
        raise Unsupported(f"{dtype} matmul on cooperative matrices: {t.name} has none "
                          f"(16x16x16 {dtype} x {dtype} + f32)")
    if batch * m * n == 0:
        return OpPlan(())
    lda = m if transpose_a else k
    ldb = k if transpose_b else n
    if tile is None:
        tile = choose_tile(m, k, n, transpose_a, transpose_b,
                           all(x % 8 == 0 for x in (lda, ldb, a_batch_stride, b_batch_stride)))
    groups = (cdiv(n, tile["BN"]), cdiv(m, tile["BM"]), batch)
    if max(groups) > MAX_GROUPS_X or max(batch * m * k, batch * k * n, batch * m * n) >= 2 ** 31:
        raise Unsupported(f"matmul {m}x{k}x{n} (batch {batch}) is past the cooperative-matrix "
                          "kernel's limits (65,535 workgroups a dimension, 2^31 elements)")
    splits = choose_splits(batch, m, k, n, tile, t)
    if splits > 1:
        # slice s of K is "batch" s of the kernel: A's and B's views start s * K/S along K
        kc = k // splits
        a_batch_stride = kc * lda if transpose_a else kc
        b_batch_stride = kc if transpose_b else kc * ldb
        batch, k = splits, kc
        groups = groups[:2] + (splits,)
    # 16-byte loads where every row of A and B, and every batch, starts on 8 halves
    vec = all(x % 8 == 0 for x in (lda, ldb, a_batch_stride, b_batch_stride))
    defines = dict(tile, SG=t.subgroup_size, SH_VEC=1)
    if not (vec and m % tile["BM"] == 0 and n % tile["BN"] == 0 and k % tile["BK"] == 0):
        defines.pop("ALIGNED", None)     # some tile reaches past an edge
    wide = out_dtype == "f32"
    if splits == 1 and not wide:
        defines["OUT_F16"] = 1
    if vec:
        defines["VEC"] = 1
    if dtype == "bf16":
        defines["VKG_BFLOAT16"] = 1     # runtime/shaders.py rewrites the SPIR-V for it
    if transpose_a:
        defines["TRANS_A"] = 1
    if transpose_b:
        defines["TRANS_B"] = 1
    name = "matmul_coop" if splits == 1 else f"matmul_coop_splitk{splits}"
    launch = Launch(name=name, shader="matmul_coop.comp", bindings=3, groups=groups,
                    push=(m, n, k, lda, ldb, n, a_batch_stride, b_batch_stride, m * n),
                    defines=tuple(sorted(defines.items())), spirv_env="vulkan1.3")
    if splits == 1:
        return OpPlan(((launch, ("a", "b", "c")),))
    total = m * n
    sum_ = Launch(name="matmul_coop_sum", shader="split_sum_half.comp", bindings=2,
                  groups=grid(cdiv(cdiv(total, 2), 256)), push=(total, splits),
                  defines=(("F32", 1),) if wide else (("BF16", 1),) if dtype == "bf16" else ())
    return OpPlan(((launch, ("a", "b", "partials")), (sum_, ("partials", "c"))),
                  (Temp("partials", splits * total, "float32"),))


# Split-K: a product with few output blocks and a long K (a weight gradient over a batch's
# tokens) leaves most multiprocessors idle: the medium LM's [512, 512] = [16384, 512]^T
# [16384, 512] in bf16 ran 16 workgroups at 22 TFLOP/s (393 us, H200, 2026-12-01). Below
# SPLIT_BELOW_GROUPS blocks, K is cut into S equal slices (a power of two, each a whole number
# of BK steps and at least SPLIT_MIN_STEPS of them) for about SPLIT_TARGET_GROUPS workgroups;
# the slices' f32 products are summed in order by a second dispatch, rounded once.
SPLIT_BELOW_GROUPS = 66
SPLIT_TARGET_GROUPS = 132
SPLIT_MIN_STEPS = 4
MAX_SPLITS = 64


def choose_splits(batch: int, m: int, k: int, n: int, tile: dict, target=None) -> int:
    """K slices for split-K (1: none); a batched product is never split."""
    t = target_of(target)
    blocks = cdiv(m, tile["BM"]) * cdiv(n, tile["BN"])
    if not t.split_k or batch != 1 or blocks >= SPLIT_BELOW_GROUPS:
        return 1
    want = min(cdiv(SPLIT_TARGET_GROUPS, blocks), k // (tile["BK"] * SPLIT_MIN_STEPS),
               MAX_SPLITS)
    s = 1
    while 2 * s <= want and k % (2 * s * tile["BK"]) == 0:
        s *= 2
    return s
