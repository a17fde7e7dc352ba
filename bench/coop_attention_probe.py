"""Flash attention's forward on cooperative matrices (vkgrad/kernels_glsl/flash_attention_coop.comp)
alone, through kp: correctness against numpy (plain and causal, D64 and D128, a key count that is
no multiple of the key block, rows that see no key), then its time at B4 H8 L1024/L4096 for
several key blocks (BC), interleaved with torch's F.scaled_dot_product_attention in f16 (its
flash kernel) in the same run. Forward only: the kernel has no backward yet.

    python3 bench/coop_attention_probe.py [--out results.json] [--rounds 5]

Needs a device with VK_KHR_cooperative_matrix (kp patch 0010 enables it) and glslang 13.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import statistics
import struct
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from coop_matmul_probe import Runner  # noqa: E402
from vkgrad.runtime.shaders import compile_file, compile_many  # noqa: E402

# (BC keys a step, MR 16-row fragments a subgroup, PREFETCH the next step's K and V loaded
# while this one computes): a workgroup takes 64 MR query rows
CONFIGS = ((16, 2, 0), (16, 2, 1), (16, 1, 1), (32, 1, 1), (32, 2, 1), (64, 1, 1))


def shared_bytes(d, bc, mr, pre=0):
    """flash_attention_coop.comp's shared memory (its #error says past 48 KB)."""
    return (1 + pre) * 2 * bc * (d + 8) * 2 + 4 * 16 * mr * (bc + 4) * 4 + 4 * 16 * mr * 4 + 1024


def configs(d):
    return tuple(c for c in CONFIGS if shared_bytes(d, *c) <= 49152)


def name(bc, mr, pre=0):
    return f"BC{bc}" + (f"x{16 * mr}" if mr > 1 else "") + ("p" if pre else "")
CHECKS = [(2, 128, 128, 64, False), (2, 128, 128, 64, True), (2, 64, 200, 128, False),
          (2, 64, 200, 128, True), (1, 128, 64, 64, True), (3, 192, 192, 128, True),
          (2, 256, 200, 128, True), (1, 256, 128, 64, True), (2, 128, 328, 64, False)]
SHAPES = [(32, L, D, c) for L in (1024, 4096) for D in (64, 128) for c in (False, True)]


def defines(d, bc, mr, causal, pre=0):
    out = dict(D=d, BC=bc, MR=mr, SG=32)
    if causal:
        out["CAUSAL"] = 1
    if pre:
        out["PREFETCH"] = 1
    return out


def spirv(d, bc, mr, causal, pre=0):
    return compile_file("flash_attention_coop.comp", defines(d, bc, mr, causal, pre),
                        target_env="vulkan1.3")


def reference(q, k, v, causal):
    """o (f32) and lse of f16 q, k, v [BH, L, D], the mask aligned at the bottom right."""
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    lq, lk, d = q.shape[1], k.shape[1], q.shape[2]
    s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
    if causal:
        keep = np.arange(lk)[None, :] <= np.arange(lq)[:, None] + lk - lq
        s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    seen = np.isfinite(m)
    e = np.where(seen, np.exp(s - np.where(seen, m, 0)), 0)
    tot = e.sum(-1, keepdims=True)
    o = np.where(tot > 0, (e / np.where(tot > 0, tot, 1)) @ v, 0)
    lse = np.where(tot[..., 0] > 0, (m + np.log(np.where(tot > 0, tot, 1)))[..., 0], -np.inf)
    return o, lse


class Attention:
    def __init__(self, r: Runner):
        self.r = r

    def algo(self, bh, lq, lk, d, bc, mr, causal, q, k, v, pre=0):
        to = self.r.tensor(np.zeros(bh * lq * d, np.float16))
        tl = self.r.tensor(np.zeros(bh * lq, np.float32))
        scale = struct.unpack("<I", struct.pack("<f", 1.0 / math.sqrt(d)))[0]
        push = np.array([lq, lk, scale], np.uint32)
        algo = self.r.mgr.algorithm([self.r.tensor(q), self.r.tensor(k), self.r.tensor(v), to,
                                     tl], spirv(d, bc, mr, causal, pre), (lq // (64 * mr), bh, 1),
                                    [], push)
        return algo, to, tl

    def run(self, bh, lq, lk, d, bc, mr, causal, q, k, v, pre=0):
        algo, to, tl = self.algo(bh, lq, lk, d, bc, mr, causal, q, k, v, pre)
        kp = self.r.kp
        self.r.mgr.sequence().record(kp.OpAlgoDispatch(algo)).record(
            kp.OpTensorSyncLocal([to, tl])).eval()
        o = np.asarray(to.data()).view(np.float16)[:bh * lq * d].reshape(bh, lq, d)
        return o.astype(np.float32), np.asarray(tl.data()).reshape(bh, lq)


def check(att, rng, results):
    bad = 0
    for bh, lq, lk, d, causal in CHECKS:
        q, k, v = (rng.standard_normal((bh, n, d)).astype(np.float16) for n in (lq, lk, lk))
        want_o, want_lse = reference(q, k, v, causal)
        for bc, mr, pre in configs(d):
            if lq % (64 * mr):
                continue
            o, lse = att.run(bh, lq, lk, d, bc, mr, causal, q, k, v, pre)
            err_o = float(np.max(np.abs(o - want_o)))
            fin = np.isfinite(want_lse)
            err_l = float(np.max(np.abs(np.where(fin, lse - want_lse, 0))))
            ok = err_o < 1e-2 and err_l < 1e-3 and bool(np.all(np.isfinite(lse) == fin))
            bad += not ok
            results["checks"].append(dict(bh=bh, lq=lq, lk=lk, d=d, causal=causal, bc=bc, mr=mr,
                                          prefetch=pre, max_err_o=err_o, max_err_lse=err_l, ok=ok))
            print(f"check BH{bh} Lq{lq} Lk{lk} D{d} {'causal ' if causal else ''}"
                  f"{name(bc, mr, pre)}: "
                  f"o err {err_o:.2e} lse err {err_l:.2e} {'ok' if ok else 'WRONG'}", flush=True)
    return bad


def torch_sdpa(bh, l, d, causal, reps):
    import torch
    import torch.nn.functional as F
    q, k, v = (torch.randn(4, bh // 4, l, d, device="cuda", dtype=torch.float16)
               for _ in range(3))
    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps


def time_algo(r, algo, reps):
    seq = r.mgr.sequence()
    for _ in range(reps):
        seq.record(r.kp.OpAlgoDispatch(algo))
    seq.eval()
    t0 = time.perf_counter()
    seq.eval()
    return (time.perf_counter() - t0) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    fn = functools.partial(compile_file, target_env="vulkan1.3")
    compile_many([(fn, ("flash_attention_coop.comp", defines(d, *cfg[:2], c, *cfg[2:])))
                  for d in (64, 128) for cfg in configs(d) for c in (False, True)])
    r = Runner()
    att = Attention(r)
    rng = np.random.default_rng(0)
    results = {"kind": "coop_attention", "date": datetime.datetime.now().strftime(
        "%Y-%m-%d %H:%M"), "device": r.kp.list_physical_devices()[0]["device_name"],
        "rounds": args.rounds, "checks": [], "rows": []}
    bad = check(att, rng, results)
    print(f"{len(results['checks'])} checks, {bad} wrong", flush=True)
    for bh, l, d, causal in SHAPES:
        q, k, v = (rng.standard_normal((bh, l, d)).astype(np.float16) for _ in range(3))
        algos = {name(*c): att.algo(bh, l, l, d, c[0], c[1], causal, q, k, v, *c[2:])[0]
                 for c in configs(d)}
        times = {n: [] for n in algos}
        if not args.no_torch:
            times["torch"] = []
        for _ in range(args.rounds):
            for n, algo in algos.items():
                times[n].append(time_algo(r, algo, args.reps) * 1e6)
            if not args.no_torch:
                times["torch"].append(torch_sdpa(bh, l, d, causal, args.reps) * 1e6)
        flop = 4 * bh * l * l * d * (0.5 if causal else 1.0)
        row = {"case": f"B4 H8 L{l} D{d}{' causal' if causal else ''}", "bh": bh, "l": l,
               "d": d, "causal": causal, "gflop": flop / 1e9,
               "us": {n: dict(median=statistics.median(t), min=min(t), max=max(t))
                      for n, t in times.items()}}
        results["rows"].append(row)
        cells = "  ".join(f"{n} {x['median']:8.1f} us {flop / x['median'] / 1e6:6.1f} TF/s"
                          for n, x in row["us"].items())
        print(f"{row['case']:<24} {cells}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
