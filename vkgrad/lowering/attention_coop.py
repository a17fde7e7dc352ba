"""attention_coop: float16 flash attention on cooperative matrices (the tensor cores), forward
and backward, planned for lowering/attention.py's contract (flash_attention_p and
flash_attention_bwd_p) where `takes` holds; lowering/attention.py's `scores_path` says when it
runs rather than attention written out.

    forward   flash_attention_coop.comp:       q, k, v -> o, lse
    backward  flash_attention_coop_dq.comp:    q, k, v, o, do, lse (, dlse) -> dq, delta
              flash_attention_coop_dkdv.comp:  q, k, v, do, lse, delta -> dk, dv

f16 q, k, v, o, do and gradients, f16 lse and dlse (the primitive's: q's dtype), f32 scores,
softmax statistics, delta and accumulators. The backward is FlashAttention-2's in two passes
(S and dP computed by both: 7/2 of the forward's flops), each gradient row summed by one
subgroup in a fixed order: deterministic, no atomics. The kernels' comments say how they work.

What they take: head dim 32, 64 or 128; Lq and Lk multiples of 64 (a workgroup owns 64 query
rows, or 64 key rows in the dk/dv pass, and loads and stores whole 16-row fragments); a device whose
subgroups are 32 wide with 16 x 16 x 16 f16 cooperative matrices (matmul_coop.runs_on). bfloat16
does not run here: the kernels compute on their 16-bit values (the matmul only moves them).

Tiles (bench/coop_attention_probe.py and coop_attention_bwd_probe.py, H200): the forward takes
16 keys a step and 32 query rows a subgroup (MR 2), loading the next step's K and V during
each step up to D64 (PREFETCH; 2026-12-04 00:53, B4 H8 L4096 D64 1189 us against 1241
without, D128 2783 against 1660: registers); the backward passes 16 rows a step and 16 a
subgroup, dS made in registers, no prefetch. 2026-12-04 01:02, B4 H8 fwd+bwd us, kernels' sum
(BC16 / with PREFETCH / eight subgroups): L1024 D64 267 / 273 / 264, causal 229 / 228 / 263;
D128 484 / 601 / 506, causal 411 / 440 / 442; L4096 D64 3814 / 4059 / 4170, causal 2354 /
2371 / 2741; D128 6574 / 7413 / 6648, causal 3728 / 4232 / 3855; B32 H8 L256 D32 causal 102 /
101 / 107 (torch SDPA f16 in the same run: 222, 184, 288, 314, 1081, 690, 1686, 1047, 269).
The driver's statistics there: dq 128 registers at D64 (198 at D128), dkdv 153 (255), the
forward 195 (255); more shared memory ran slower even with fewer registers (dq with its lse
and delta in shared tiles: 114 registers, 20 KB, 1765 us at L4096 D64 against 1035), since a
multiprocessor's workgroups share 48 KiB (bench/occupancy_probe.py): two at 20 KB, four at 12.
"""

from __future__ import annotations

from vkgrad.lowering import matmul_coop
from vkgrad.lowering.contracts import Unsupported
from vkgrad.lowering.kernels import OpPlan, Temp
from vkgrad.lowering.launch import MAX_GROUPS_X, Launch
from vkgrad.primitives.attention import flash_attention_p
from vkgrad.target import target_of

HEAD_DIMS = (32, 64, 128)
ROWS = 64                    # rows a workgroup owns (16 a subgroup, four subgroups)
FORWARD_KEYS_A_STEP = 16
FORWARD_ROW_FRAGMENTS = 2    # 32 query rows a subgroup, where Lq is a multiple of 128
FORWARD_PREFETCH_MAX_HEAD_DIM = 64   # the next K, V tiles loaded during a step (PREFETCH)
BACKWARD_ROWS_A_STEP = 16
SUBGROUP = 32


def runs_on(target) -> bool:
    """Whether `target` runs the kernels: matmul_coop's f16 cooperative matrices, 32-wide
    subgroups."""
    t = target_of(target)
    return matmul_coop.runs_on(t, "f16") and t.subgroup_size == SUBGROUP


def takes(q_shape, k_shape, dtype: str, target=None) -> bool:
    """Whether attention of q [B, H, Lq, D] over k [B, H, Lk, D] in `dtype` runs on these
    kernels on `target`."""
    bh = q_shape[0] * q_shape[1]
    lq, lk, d = q_shape[2], k_shape[2], q_shape[3]
    return (dtype == "f16" and d in HEAD_DIMS and lq > 0 and lk > 0 and lq % ROWS == 0
            and lk % ROWS == 0 and bh <= MAX_GROUPS_X and bh * max(lq, lk) * d < 2 ** 31
            and runs_on(target))


def _launch(kernel: str, bindings: int, groups: tuple, lq: int, lk: int, scale: float,
            **defines) -> Launch:
    name = "flash_attention_coop" + (f"_{kernel}" if kernel else "")
    defines = {k: v for k, v in defines.items() if v is not None}
    return Launch(name=name, shader=f"{name}.comp", bindings=bindings, groups=groups,
                  push=(lq, lk, float(scale)), defines=tuple(sorted(defines.items())),
                  spirv_env="vulkan1.3")


def plan_forward(bh: int, lq: int, lk: int, d: int, *, causal: bool, scale: float) -> OpPlan:
    """Roles "q", "k", "v" -> "o", "lse"."""
    mr = FORWARD_ROW_FRAGMENTS if lq % (ROWS * FORWARD_ROW_FRAGMENTS) == 0 else 1
    fwd = _launch("", 5, (lq // (ROWS * mr), bh, 1), lq, lk, scale, D=d,
                  BC=FORWARD_KEYS_A_STEP, MR=mr, SG=SUBGROUP, LSE16=1,
                  CAUSAL=1 if causal else None,
                  PREFETCH=1 if d <= FORWARD_PREFETCH_MAX_HEAD_DIM else None)
    return OpPlan(((fwd, ("q", "k", "v", "o", "lse")),))


def plan_backward(bh: int, lq: int, lk: int, d: int, *, causal: bool, scale: float,
                  dlse_zero: bool) -> OpPlan:
    """Roles "q", "k", "v", "o", "lse", "do", "dlse" -> "dq", "dk", "dv"; temp "delta"
    float32 [BH, Lq] (rowsum(do o) - dlse). `dlse_zero`: dlse is known zero, not read."""
    common = dict(D=d, BC=BACKWARD_ROWS_A_STEP, MR=1, SG=SUBGROUP, LSE16=1,
                  CAUSAL=1 if causal else None)
    dq_roles = ("q", "k", "v", "o", "do", "lse", "dq", "delta") + (() if dlse_zero else ("dlse",))
    dq = _launch("dq", len(dq_roles), (lq // ROWS, bh, 1), lq, lk, scale,
                 DLSE=None if dlse_zero else 1, **common)
    dkdv = _launch("dkdv", 8, (lk // ROWS, bh, 1), lq, lk, scale, **common)
    return OpPlan(((dq, dq_roles), (dkdv, ("q", "k", "v", "do", "lse", "delta", "dk", "dv"))),
                  (Temp("delta", bh * lq, "float32"),))


def plan_eqn(e, target, dlse_zero: bool = False):
    """(OpPlan, roles) of flash attention eqn `e` (the forward or its backward)."""
    q, k = e.inputs[0], e.inputs[1]
    if not takes(q.shape, k.shape, q.dtype, target):
        raise Unsupported(f"{e.prim.name} of {q.dtype} {q.shape} over {k.shape} on cooperative "
                          "matrices (f16, head dim 32, 64 or 128, lengths multiples of 64)", e)
    b, h, lq, d = q.shape
    kw = dict(causal=e.params["causal"], scale=e.params["scale"])
    if e.prim is flash_attention_p:
        roles = dict(zip(("q", "k", "v"), e.inputs), o=e.outputs[0], lse=e.outputs[1])
        return plan_forward(b * h, lq, k.shape[2], d, **kw), roles
    roles = dict(zip(("q", "k", "v", "o", "lse", "do", "dlse"), e.inputs))
    roles.update(zip(("dq", "dk", "dv"), e.outputs))
    if dlse_zero:
        del roles["dlse"]
    return plan_backward(b * h, lq, k.shape[2], d, dlse_zero=dlse_zero, **kw), roles
