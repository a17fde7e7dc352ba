"""The cooperative-matrix matmul kernel (vkgrad/kernels_glsl/matmul_coop.comp) alone, through kp:
correctness against numpy for every layout and an odd shape, then f16 TFLOP/s at 4096^3 and at
the LM's shapes for several tilings, interleaved with torch's f16 matmul (cuBLAS) in the same run.

    python3 bench/coop_matmul_probe.py [--out results.json] [--rounds 5]

Needs a device with VK_KHR_cooperative_matrix (kp patch 0010 enables it) and glslang 13
(vkgrad.runtime.shaders finds the one `make setup` installs; GLSLANG=path overrides).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vkgrad.runtime.shaders import compile_file  # noqa: E402

CONFIGS = {   # name: (BM, BN, BK, WM, WN, shared tiles as 16-byte words, stages)
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
# (name, M, N, K, layout): layout "nn" C = A B, "tn" C = A^T B (weight gradients), "nt" C = A B^T
SHAPES = [("4096^3", 4096, 4096, 4096, "nn"),
          ("lm_qkv", 8192, 2304, 768, "nn"), ("lm_qkv_dW", 768, 2304, 8192, "tn"),
          ("lm_qkv_dX", 8192, 768, 2304, "nt"), ("lm_fc", 8192, 3072, 768, "nn"),
          ("lm_fc_dW", 768, 3072, 8192, "tn"), ("lm_fc_dX", 8192, 768, 3072, "nt")]


def _half(name):
    """The numpy type of "f16" or "bf16" (bfloat16 from ml_dtypes, which JAX brings)."""
    if name == "bf16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(np.float16)


def spirv_for(cfg, layout, vec, out_f16=False, half="f16"):
    bm, bn, bk, wm, wn, shvec, stages = cfg
    d = dict(BM=bm, BN=bn, BK=bk, WM=wm, WN=wn, SG=32, STAGES=stages)
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
    return compile_file("matmul_coop.comp", d, target_env="vulkan1.3")


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


def check(r, rng, results, names):
    for cname in names:
        cfg, bad = CONFIGS[cname], 0
        for layout in ("nn", "tn", "nt", "tt"):
            for (M, N, K, vec, batch) in ((200, 136, 72, True, 2), (131, 77, 45, False, 1),
                                          (512, 512, 512, True, 1)):
                for out_f16 in (False, True):
                    bad += not check_one(r, rng, results, cname, cfg, layout, M, N, K, vec,
                                         batch, out_f16)
        print(f"checks {cname}: {'all ok' if not bad else f'{bad} WRONG'}", flush=True)
    cname, bad = names[0], 0   # bfloat16 (VK_KHR_shader_bfloat16, kp patch 0011)
    for layout in ("nn", "tn", "nt", "tt"):
        for (M, N, K, vec, batch) in ((200, 136, 72, True, 2), (131, 77, 45, False, 1)):
            for out_f16 in (False, True):
                bad += not check_one(r, rng, results, cname, CONFIGS[cname], layout, M, N, K,
                                     vec, batch, out_f16, "bf16")
    print(f"checks {cname} bf16: {'all ok' if not bad else f'{bad} WRONG'}", flush=True)


def check_one(r, rng, results, cname, cfg, layout, M, N, K, vec, batch, out_f16, half="f16"):
    a, b = operands(rng, M, N, K, layout, batch, half)
    n = batch * M * N
    tc = r.tensor(np.zeros(n + n % 2, _half(half)) if out_f16 else np.zeros(n, np.float32))
    al = r.algo(spirv_for(cfg, layout, vec, out_f16, half), [r.tensor(a), r.tensor(b), tc],
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


def torch_time(M, N, K, layout, reps, half="f16"):
    import torch
    dt = torch.bfloat16 if half == "bf16" else torch.float16
    a = torch.randn((K, M) if layout[0] == "t" else (M, K), device="cuda", dtype=dt)
    b = torch.randn((N, K) if layout[1] == "t" else (K, N), device="cuda", dtype=dt)
    A = a.t() if layout[0] == "t" else a
    B = b.t() if layout[1] == "t" else b
    torch.matmul(A, B)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.matmul(A, B)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    args = ap.parse_args()
    import kp
    dev = kp.list_physical_devices()[0]
    print("device:", dev["device_name"], json.dumps(dev.get("features")), flush=True)
    print("cooperative matrix shapes:", dev.get("cooperative_matrix_shapes"), flush=True)
    results = {"device": dev["device_name"], "features": dev.get("features"),
               "shapes": dev.get("cooperative_matrix_shapes"), "checks": [], "timings": []}
    rng = np.random.default_rng(0)
    r = Runner()
    check(r, rng, results, args.configs.split(","))
    for name, M, N, K, layout in SHAPES:
        a, b = operands(rng, M, N, K, layout)
        c = np.zeros(M * N, np.float32)
        ta, tb, tc = r.tensor(a), r.tensor(b), r.tensor(c)
        flops = 2 * M * N * K
        reps = max(3, int(2e12 // flops))
        algos = {cn: r.algo(spirv_for(CONFIGS[cn], layout, True), [ta, tb, tc], M, N, K, layout,
                            CONFIGS[cn]) for cn in args.configs.split(",")}
        # the variant vkgrad runs (f16 output: lowering/matmul_coop.py)
        first = args.configs.split(",")[0]
        tc16 = r.tensor(np.zeros(M * N + (M * N) % 2, np.float16))
        algos[first + " f16out"] = r.algo(spirv_for(CONFIGS[first], layout, True, out_f16=True),
                                          [ta, tb, tc16], M, N, K, layout, CONFIGS[first])
        # bfloat16 operands and result (what vkgrad runs for bf16 matmuls)
        a16, b16 = operands(rng, M, N, K, layout, half="bf16")
        algos[first + " bf16"] = r.algo(
            spirv_for(CONFIGS[first], layout, True, out_f16=True, half="bf16"),
            [r.tensor(a16), r.tensor(b16), tc16], M, N, K, layout, CONFIGS[first])
        times = {cn: [] for cn in algos}
        times["torch"], times["torch bf16"] = [], []
        for _ in range(args.rounds):
            for cn, al in algos.items():
                times[cn].append(r.time(al, reps))
            times["torch"].append(torch_time(M, N, K, layout, reps))
            times["torch bf16"].append(torch_time(M, N, K, layout, reps, "bf16"))
        med = {k: float(np.median(v)) for k, v in times.items()}
        best = min((k for k in med if not k.startswith("torch") and "bf16" not in k),
                   key=med.get)
        row = dict(name=name, M=M, N=N, K=K, layout=layout,
                   tflops={k: flops / v / 1e12 for k, v in med.items()},
                   ranges_ms={k: [min(v) * 1e3, max(v) * 1e3] for k, v in times.items()},
                   best=best, ratio_best_vs_torch=med["torch"] / med[best],
                   ratio_bf16_vs_torch_bf16=med["torch bf16"] / med[first + " bf16"])
        results["timings"].append(row)
        print(f"{name} ({layout}, {M}x{N}x{K}): torch {row['tflops']['torch']:.0f} TFLOP/s; " +
              ", ".join(f"{k} {v:.0f}" for k, v in row["tflops"].items() if k != "torch") +
              f"; best {best}: {row['ratio_best_vs_torch']:.2f}x torch; bf16 "
              f"{row['ratio_bf16_vs_torch_bf16']:.2f}x torch bf16", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
