"""The cooperative-matrix matmul (kernels_glsl/matmul_coop.comp): f16 operands on the tensor
cores, accumulating in f32, the result rounded to f16 once (the interpreter's rule). The matmul
family's contract (lowering/matmul.py) sends a float16 matmul here on a Target that runs
16 x 16 x 16 f16 x f16 + f32 subgroup matrices (`Target.cooperative_shape`) and has the Vulkan
memory model; elsewhere (lavapipe) the fusion pass widen_halves gives the f32 kernel converts
around it, so the same program runs everywhere.

The tile: 128 x 128 blocks of C, K 32 at a time, four subgroups of 64 x 64, shared tiles kept in
16-byte words. On the H200 (bench/coop_matmul_probe.py, 2026-12-01) that was the best of the
tilings tried: 241 TFLOP/s at 4096^3 (cuBLAS f16: 739), 137-178 at the LM's shapes; without
unrolled loops the same kernel ran 33; double-buffered shared tiles ran slower (148).
The kernel takes no generated loads or stores (matmul.takes_hooks says so for f16).
"""

from __future__ import annotations

from vkgrad.lowering.contracts import Unsupported
from vkgrad.lowering.kernels import OpPlan
from vkgrad.lowering.launch import MAX_GROUPS_X, Launch, cdiv
from vkgrad.target import target_of

TILE = dict(BM=128, BN=128, BK=32, WM=64, WN=64)


def runs_on(target) -> bool:
    """Whether `target` runs this kernel: the shape it is written for, the memory model, 16-bit
    storage (it reads float16_t[] buffers) and a known subgroup size (the kernel's workgroup is
    four subgroups)."""
    t = target_of(target)
    return (t.cooperative_shape("f16", "f32") is not None and t.memory_model
            and t.storage_16bit and t.subgroup_size is not None)


def plan_matmul_coop(batch: int, m: int, k: int, n: int, transpose_a: bool, transpose_b: bool,
                     a_batch_stride: int, b_batch_stride: int, target=None) -> OpPlan:
    """C [batch, m, n] (f16) = A @ B of f16 operands: A [batch?, m, k] (or [.., k, m] with
    transpose_a), B [batch?, k, n] (or [.., n, k]); a batch stride of 0 broadcasts an operand.
    Roles "a", "b", "c"."""
    t = target_of(target)
    if not runs_on(t):
        raise Unsupported(f"float16 matmul on cooperative matrices: {t.name} has none "
                          "(16x16x16 f16 x f16 + f32)")
    if batch * m * n == 0:
        return OpPlan(())
    groups = (cdiv(n, TILE["BN"]), cdiv(m, TILE["BM"]), batch)
    if max(groups) > MAX_GROUPS_X or max(batch * m * k, batch * k * n, batch * m * n) >= 2 ** 31:
        raise Unsupported(f"matmul {m}x{k}x{n} (batch {batch}) is past the cooperative-matrix "
                          "kernel's limits (65,535 workgroups a dimension, 2^31 elements)")
    lda = m if transpose_a else k
    ldb = k if transpose_b else n
    # 16-byte loads where every row of A and B, and every batch, starts on 8 halves
    vec = all(x % 8 == 0 for x in (lda, ldb, a_batch_stride, b_batch_stride))
    defines = dict(TILE, SG=t.subgroup_size, SH_VEC=1, OUT_F16=1)
    if vec:
        defines["VEC"] = 1
    if transpose_a:
        defines["TRANS_A"] = 1
    if transpose_b:
        defines["TRANS_B"] = 1
    launch = Launch(name="matmul_coop", shader="matmul_coop.comp", bindings=3, groups=groups,
                    push=(m, n, k, lda, ldb, n, a_batch_stride, b_batch_stride, m * n),
                    defines=tuple(sorted(defines.items())), spirv_env="vulkan1.3")
    return OpPlan(((launch, ("a", "b", "c")),))
