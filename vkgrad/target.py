"""What the device can do, in one object: the only place that knows what kind of device it is.

Every decision that depends on the device (which matmul tile, whether a matmul may split K,
which fused loads pay, how many buffers a kernel may bind, how pipelines are built) reads a
field of the `Target` the compile was given; no other module asks "is this a CPU device?".
The fields are plain data, so a plan can be made, printed and golden-tested for a device that
is not here: `Target.lavapipe()` and `Target.h200()` are the two that tests plan for.

A `Target` is built from the device's properties (`Target.from_device(info)`, where `info` is
the runtime's DeviceInfo or anything with the same attributes). Its policies are derived from
the device's type there, once, with the measurement that decided each (docs/architecture.md,
"Target").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

# A CPU implementation of Vulkan (lavapipe) and a GPU differ in these policies. Each value is
# what was measured on lavapipe (2-core machine) or on the NVIDIA H200, 2026-11-30..12-01.
_GPU_POLICY = dict(
    split_k=True,                 # few output tiles over a long K: slices across workgroups
    matmul_tiles="waves",         # the largest tile that still fills the multiprocessors
    prefetch=True,                # next tiles into registers during the products
    unroll_loops=True,
    # matmuls of 1.6-8.6 GFLOP with generated loads or stores ran 2-4x slower on the H200
    matmul_hook_max_flops=2 ** 30,
    # the MLP step's 0.4-0.5 GFLOP matmuls lost 9 us with fused loads, 33-44 us with a column sum
    matmul_load_hook_max_flops=2 ** 26,
    drain_before_compile=False,
    interpreter_faster=False,
    # the one-launch embedding gradient (take_grad_rows.comp) up to this many id tests. H200,
    # bench_take_grad.py, 2026-12-01: [256, 256] from 8,192 ids (2^21 tests) 12.3 us against
    # the sort plan's 35.5 (text-like ids: 22.8 against 45.8); [4096, 256] from 8,192 (2^25)
    # 55.0 against 37.4: the crossover lies between
    take_grad_rows_max_tests=2 ** 24,
    # a wait for a submission polls its fence this long before it sleeps (then kp's own 2 ms
    # poll, patch 0002): the LM small step's next call (the queue drained before it) took 295 us
    # of host time on the H200 against 434 with kp's poll only (docs/jit.md)
    wait_spin_us=20_000,
    # flash attention runs written out (matmul, softmax, matmul: lowering/attention_scores.py;
    # which shapes: lowering/attention.py's scores_path) where one attention's scores take at
    # most this many bytes. H200, 2026-12-02 (bench/bench_attention_paths.py, fwd+bwd of B4
    # H8): L1024 D64 0.95 ms against the flash kernels' 1.52, D128 1.41 against 3.58, L4096
    # D64 (2 GiB of scores) 13.4 against 24.7
    attention_scores_max_bytes=2 ** 31,
    # Winograd F(2x2, 3x3) (lowering/winograd.py) for 3x3 stride-1 forwards and input gradients
    # from this many input and output features. H200, bench_conv.py, 2026-12-02 (us, fwd / dx):
    # C128 28x28 141 / 139 against the GEMM kernel's 217 / 218, C256 14x14 153 / 150 against
    # 228 / 230, the ResNet-18 step's C128-C512 at 16x16-4x4 82-98 against 154-177; at C64 it
    # lost (56x56: 282 against 221; 32x32: 194 against 146); the step 1.31x JAX against 1.09
    winograd_min_channels=128,
    # flash attention reading q, k, v (and writing o) in the model's layouts instead of copies
    # (lowering/attention_layouts.py): off, as it lost where measured. H200, 2026-12-02 05:51
    # (bench_lm.py, the transformer LM small step, 154 dispatches against 166): its flash
    # kernels ran 122-127 us (forward) and 210-217 (backward) a layer reading the strided
    # projection with its bias, against 78.6 and 168.6 dense (bench_attention.py); tokens/s
    # with the loss read at the end 1.156M against 1.189M without the pass (03:22)
    attention_layouts_in_place=False,
)
_CPU_POLICY = dict(
    split_k=False,                # its 2-4 threads are busy with any output
    matmul_tiles="padding",       # bigger tiles run faster unless edge padding wastes work
    prefetch=False,               # no memory latency to hide; rolled copies compile faster
    unroll_loops=False,           # LLVM compiles rolled loops much faster
    matmul_hook_max_flops=2 ** 30,
    matmul_load_hook_max_flops=2 ** 30,   # a fused load saves a pass over memory there
    # the suite crashed inside lavapipe's pipeline creation about one run in four while its
    # queue thread ran earlier submissions (a race suspected, not proven): compiles let the
    # queue drain first
    drain_before_compile=True,
    # an MLP step (batch 256, 512-512-10, Adam) took 76-88 ms on the interpreter and 590-600 ms
    # on lavapipe: the default backend there is numpy
    interpreter_faster=True,
    # the one-launch embedding gradient lost from 2**19 id tests up (46 vs 24 ms at [64, 256]
    # from 8,192 ids), broke even at 2**16 (2.3 ms both at [32, 64] from 2,048) and won below
    take_grad_rows_max_tests=2 ** 16,
    # the device's threads are the host's cores: a spinning wait takes one from them
    wait_spin_us=0,
    attention_scores_max_bytes=0,
    winograd_min_channels=1 << 30,    # not measured there: the GEMM kernel's convolutions
    # lost there too: the tiny LM's gradient (2 layers, d 64, batch 8, L 64) 188 ms a step
    # against 176-184 with the copies (58 against 61 dispatches; 2026-12-02)
    attention_layouts_in_place=False,
)


@dataclass(frozen=True)
class CooperativeShape:
    """One cooperative-matrix shape a device runs: D (m x n, `result`) = A (m x k, `a`) times
    B (k x n, `b`) plus C (m x n, `c`), types as the IR names them ("f16", "f32", "bf16", "i8")."""
    m: int
    n: int
    k: int
    a: str
    b: str
    c: str
    result: str
    scope: str = "subgroup"
    saturating: bool = False

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k} {self.a}*{self.b}+{self.c}->{self.result}"


@dataclass(frozen=True)
class Target:
    name: str = "generic Vulkan device"
    kind: str = "discrete GPU"           # for messages only; decisions read the fields below
    # compiling shaders
    spirv_env: str = "vulkan1.1"         # subgroup operations need Vulkan 1.1 SPIR-V
    spirv_extensions: tuple = ()
    subgroup_size: int | None = None     # None: not reported
    # limits (Vulkan's guaranteed minimums where a device is not known)
    max_shared_memory: int = 32768
    max_workgroup_invocations: int = 1024
    max_storage_buffer_range: int = 2 ** 27
    max_storage_buffers: int = 32        # per stage: the most buffers one kernel may bind
    device_local_bytes: int = 0          # the largest device-local heap (0: not known)
    max_loop_iterations: int | None = None   # a shader loop stops after this many (lavapipe)
    # features
    storage_16bit: bool = False          # 16-bit loads and stores in storage buffers
    float16: bool = False                # float16_t arithmetic in shaders
    int8: bool = False
    memory_model: bool = False           # the Vulkan memory model (cooperative matrices need it)
    nan_preserve: bool = False           # SignedZeroInfNanPreserve for float32 honoured
    denorm_preserve: bool = False        # DenormPreserve for float32 honoured (else flushed)
    cooperative_matrix: tuple = ()       # the shapes the device runs (CooperativeShape)
    bfloat16: bool = False               # bfloat16 cooperative matrices (VK_KHR_shader_bfloat16)
    # policies (see _GPU_POLICY / _CPU_POLICY)
    split_k: bool = True
    matmul_tiles: str = "waves"
    prefetch: bool = True
    unroll_loops: bool = True
    matmul_hook_max_flops: int = 2 ** 30
    matmul_load_hook_max_flops: int = 2 ** 26
    drain_before_compile: bool = False
    interpreter_faster: bool = False
    pipeline_threads: int = 1            # threads that build pipelines at once
    take_grad_rows_max_tests: int = 2 ** 24   # id tests up to which take_grad is one launch
    wait_spin_us: int = 20_000           # a wait polls the fence this long before it sleeps
    attention_scores_max_bytes: int = 2 ** 31   # unmasked attention written out up to this
    winograd_min_channels: int = 128     # convolutions on the Winograd path from these features
    attention_layouts_in_place: bool = False   # fold_attention_layouts runs (it lost: above)

    @classmethod
    def from_device(cls, info) -> "Target":
        """The Target of a device from its properties (the runtime's DeviceInfo)."""
        cpu = info.type == "CPU"
        policy = _CPU_POLICY if cpu else _GPU_POLICY
        return cls(
            name=info.name, kind=info.type,
            max_shared_memory=info.max_shared_memory,
            max_workgroup_invocations=info.max_workgroup_invocations,
            max_storage_buffer_range=info.max_storage_buffer_range,
            max_storage_buffers=info.max_storage_buffers,
            device_local_bytes=getattr(info, "device_local_bytes", 0),
            nan_preserve=getattr(info, "nan_preserve", False),
            denorm_preserve=getattr(info, "denorm_preserve", False),
            storage_16bit=_has(info, "storage_buffer_16bit_access"),
            float16=_has(info, "shader_float16"), int8=_has(info, "shader_int8"),
            memory_model=_has(info, "vulkan_memory_model"),
            cooperative_matrix=tuple(getattr(info, "cooperative_matrix", ())),
            bfloat16=_has(info, "bfloat16_cooperative_matrix"),
            subgroup_size=getattr(info, "subgroup_size", None),
            # lavapipe ends a loop after 65,535 iterations without a word (a 6-line GLSL loop
            # through kp alone sums 65,535 of 70,000); GPUs run them out
            max_loop_iterations=65535 if cpu else None,
            # LLVM compiles on the same cores as everything else there: 97 pipelines took
            # 1.6-1.8 s on one thread, 2.4-2.5 s on two; the H200's driver 185 ms each, in parallel
            pipeline_threads=1 if cpu else _compile_threads(),
            **policy)

    @classmethod
    def lavapipe(cls) -> "Target":
        """Mesa's lavapipe as the test machines report it (llvmpipe, 2 cores)."""
        return replace(cls(**_CPU_POLICY), name="llvmpipe (LLVM 15.0.6, 256 bits)", kind="CPU",
                       max_shared_memory=32768, max_workgroup_invocations=1024,
                       max_storage_buffer_range=2 ** 27, max_storage_buffers=32,
                       device_local_bytes=2 ** 31, max_loop_iterations=65535,
                       subgroup_size=8,    # 256-bit LLVM vectors of 32-bit lanes
                       storage_16bit=True, float16=True, int8=True, memory_model=True)

    @classmethod
    def h200(cls) -> "Target":
        """The NVIDIA H200 as its Vulkan driver reports it."""
        return replace(cls(**_GPU_POLICY), name="NVIDIA H200", kind="discrete GPU",
                       max_shared_memory=49152, max_workgroup_invocations=1024,
                       max_storage_buffer_range=2 ** 32 - 1, max_storage_buffers=2 ** 20,
                       device_local_bytes=143 * 2 ** 30, subgroup_size=32, pipeline_threads=16,
                       storage_16bit=True, float16=True, int8=True, memory_model=True,
                       cooperative_matrix=H200_COOPERATIVE_SHAPES, bfloat16=True)

    def cooperative_shape(self, a: str, c: str) -> "CooperativeShape | None":
        """A 16 x 16 x 16 subgroup shape taking `a` inputs and accumulating in `c` (what
        kernels_glsl/matmul_coop.comp is written for), or None."""
        for s in self.cooperative_matrix:
            if (s.m, s.n, s.k, s.a, s.b, s.c, s.result, s.scope) == (16, 16, 16, a, a, c, c,
                                                                    "subgroup"):
                return s
        return None


# What the H200's driver reported through kp patch 0010 (2026-12-01): f16 x f16 + f16/f32 at
# 16x16x16, 16x8x16, 16x8x8; i8/u8 at 16x16x32 and 16x8x32; bf16 x bf16 + f32 at 16x16x16.
H200_COOPERATIVE_SHAPES = tuple(
    [CooperativeShape(16, n, k, "f16", "f16", c, c) for c in ("f16", "f32")
     for n, k in ((16, 16), (8, 16), (8, 8))] +
    [CooperativeShape(16, n, 32, t, t, acc, acc) for n in (16, 8)
     for t, acc in (("u8", "u32"), ("i8", "i32"))] +
    [CooperativeShape(16, 16, 16, "bf16", "bf16", "f32", "f32")])


def _has(info, feature: str) -> bool:
    return dict(getattr(info, "features", ())).get(feature, False)


def _compile_threads() -> int:
    env = os.environ.get("VKGRAD_COMPILE_THREADS", "").strip()
    return max(1, int(env)) if env else (os.cpu_count() or 1)


# The Target a plan is made for when no device is given: limits at Vulkan's guaranteed minimums
# (so a plan made here runs anywhere), a GPU's policies.
GENERIC = Target()


def target_of(target) -> Target:
    """`target`, or the generic Target for None."""
    return GENERIC if target is None else target
