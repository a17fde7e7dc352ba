"""Flash attention's backward on cooperative matrices alone, through kp: the forward
(kernels_glsl/flash_attention_coop.comp) then the two backward passes
(flash_attention_coop_dq.comp: dq and delta; flash_attention_coop_dkdv.comp: dk and dv), checked
against numpy's gradients (plain and causal, D64 and D128, Lq != Lk, rows that see no key),
then timed at B4 H8 L1024/L4096 (and the LM small preset's B32 H8 L256 D32) against torch's
F.scaled_dot_product_attention f16 forward and backward (bench_attention.torch_sdpa: CUDA
events), interleaved in the same run. Kernel times are wall times of back-to-back dispatches of
each kernel alone; the total is their sum.

    python3 bench/coop_attention_bwd_probe.py [--out results.json] [--rounds 5]

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
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from coop_attention_probe import Attention, reference, time_algo  # noqa: E402
from coop_attention_probe import defines as fwd_defines  # noqa: E402
from bench_attention import torch_sdpa  # noqa: E402
from coop_matmul_probe import Runner  # noqa: E402
from peers import cuda_torch  # noqa: E402
from pipestats import build_pipestats, resident, statistics_line  # noqa: E402
from vkgrad.runtime.shaders import compile_file, compile_many  # noqa: E402

# (BC rows a step, MR 16-row fragments a subgroup, NSG subgroups, PREFETCH the next step's
# tiles loaded while this one computes): a workgroup owns 16 MR NSG rows
BWD_CONFIGS = ((16, 1, 4, 0), (16, 1, 4, 1), (16, 1, 8, 1), (16, 2, 4, 1))
# the forward's tiling (BC, MR, PREFETCH)
FWD = {32: (16, 2, 1), 64: (16, 2, 1), 128: (16, 2, 0)}
CHECKS = [(2, 128, 128, 64, False), (2, 128, 128, 64, True), (2, 128, 256, 128, False),
          (2, 256, 128, 64, True), (1, 256, 64, 128, True), (3, 128, 128, 128, True),
          (1, 256, 256, 64, False), (2, 256, 256, 32, True), (1, 256, 128, 32, False)]
SHAPES = [(32, L, D, c) for L in (1024, 4096) for D in (64, 128) for c in (False, True)] + \
    [(256, 256, 32, True)]     # the LM small preset's attention, B32 H8


def shared_bytes(d, bc, mr, nsg, pre=0):
    """The larger of the dq and dkdv kernels' shared memory (their #errors say past 48 KB)."""
    bufs = 1 + pre
    dq = bufs * 2 * bc * (d + 8) * 2 + nsg * 16 * mr * (bc + 4) * 4 + 2048
    dkdv = (bufs * (2 * bc * (d + 8) * 2 + 2 * 16 * (bc + 4) * 4)
            + 2 * nsg * 16 * mr * (bc + 8) // 2 * 4 + 1024)
    return max(dq, dkdv)


def configs(d):
    return tuple(c for c in BWD_CONFIGS if shared_bytes(d, *c) <= 49152)


def name(bc, mr, nsg, pre=0):
    return (f"BC{bc}" + (f"x{16 * mr}" if mr > 1 else "") + (f"w{nsg}" if nsg != 4 else "")
            + ("p" if pre else ""))


def rows(cfg):
    """Rows a workgroup owns."""
    return 16 * cfg[1] * cfg[2]


def defines(d, bc, mr, nsg, pre, causal):
    out = dict(D=d, BC=bc, MR=mr, NSG=nsg, SG=32)
    if causal:
        out["CAUSAL"] = 1
    if pre:
        out["PREFETCH"] = 1
    return out


def spirv(kernel, d, cfg, causal):
    return compile_file(f"flash_attention_coop_{kernel}.comp", defines(d, *cfg, causal),
                        target_env="vulkan1.3")


def reference_grads(q, k, v, do, causal):
    """dq, dk, dv (f32) of attention's f16 q, k, v [BH, L, D] against the cotangent do."""
    q, k, v, do = (x.astype(np.float32) for x in (q, k, v, do))
    lq, lk, d = q.shape[1], k.shape[1], q.shape[2]
    scale = 1.0 / math.sqrt(d)
    s = q @ k.transpose(0, 2, 1) * scale
    if causal:
        keep = np.arange(lk)[None, :] <= np.arange(lq)[:, None] + lk - lq
        s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    seen = np.isfinite(m)
    e = np.where(seen, np.exp(s - np.where(seen, m, 0)), 0)
    tot = e.sum(-1, keepdims=True)
    pr = e / np.where(tot > 0, tot, 1)
    o = pr @ v
    dv = pr.transpose(0, 2, 1) @ do
    dp = do @ v.transpose(0, 2, 1)
    ds = pr * (dp - (do * o).sum(-1, keepdims=True))
    return scale * ds @ k, scale * ds.transpose(0, 2, 1) @ q, dv


def halves(t, n):
    return np.asarray(t.data()).view(np.float16)[:n]


class Backward:
    def __init__(self, r: Runner):
        self.r, self.fwd = r, Attention(r)

    def algos(self, bh, lq, lk, d, cfg, causal, q, k, v, do):
        """The forward's algorithm, then dq's and dkdv's, on tensors that chain them."""
        r = self.r
        bc, mr, pre = FWD[d]
        fwd, to, tl = self.fwd.algo(bh, lq, lk, d, bc, mr, causal, q, k, v, pre)
        tq, tk, tv, tdo = (r.tensor(x) for x in (q, k, v, do))
        tdq = r.tensor(np.zeros(bh * lq * d, np.float16))
        tdk, tdv = (r.tensor(np.zeros(bh * lk * d, np.float16)) for _ in range(2))
        tdl = r.tensor(np.zeros(bh * lq, np.float32))
        scale = struct.unpack("<I", struct.pack("<f", 1.0 / math.sqrt(d)))[0]
        push = np.array([lq, lk, scale], np.uint32)
        dq = r.mgr.algorithm([tq, tk, tv, to, tdo, tl, tdq, tdl],
                             spirv("dq", d, cfg, causal), (lq // rows(cfg), bh, 1), [], push)
        dkdv = r.mgr.algorithm([tq, tk, tv, tdo, tl, tdl, tdk, tdv],
                               spirv("dkdv", d, cfg, causal), (lk // rows(cfg), bh, 1), [],
                               push)
        return dict(fwd=fwd, dq=dq, dkdv=dkdv), (to, tl, tdq, tdk, tdv)

    def run(self, bh, lq, lk, d, cfg, causal, q, k, v, do):
        algos, (to, tl, tdq, tdk, tdv) = self.algos(bh, lq, lk, d, cfg, causal, q, k, v, do)
        kp = self.r.kp
        for a in ("fwd", "dq", "dkdv"):   # one submission each: each waits for the one before
            self.r.mgr.sequence().eval(kp.OpAlgoDispatch(algos[a]))
        self.r.mgr.sequence().eval(kp.OpTensorSyncLocal([tdq, tdk, tdv]))
        return tuple(halves(t, bh * n * d).astype(np.float32).reshape(bh, n, d)
                     for t, n in ((tdq, lq), (tdk, lk), (tdv, lk)))


def check(bwd, rng, results):
    bad = 0
    for bh, lq, lk, d, causal in CHECKS:
        q, k, v = (rng.standard_normal((bh, n, d)).astype(np.float16) for n in (lq, lk, lk))
        do = rng.standard_normal((bh, lq, d)).astype(np.float16)
        want = reference_grads(q, k, v, do, causal)
        for cfg in configs(d):
            if lq % max(rows(cfg), 64 * FWD[d][1]) or lk % rows(cfg):
                continue
            got = bwd.run(bh, lq, lk, d, cfg, causal, q, k, v, do)
            errs = [float(np.max(np.abs(g - w)) / (np.max(np.abs(w)) + 1e-6))
                    for g, w in zip(got, want)]
            ok = all(e < 2e-2 for e in errs) and all(np.all(np.isfinite(g)) for g in got)
            bad += not ok
            results["checks"].append(dict(bh=bh, lq=lq, lk=lk, d=d, causal=causal, bc=cfg[0],
                                          mr=cfg[1], nsg=cfg[2], prefetch=cfg[3], rel_err_dq=errs[0], rel_err_dk=errs[1],
                                          rel_err_dv=errs[2], ok=ok))
            print(f"check BH{bh} Lq{lq} Lk{lk} D{d} {'causal ' if causal else ''}{name(*cfg)}: "
                  f"rel err dq {errs[0]:.1e} dk {errs[1]:.1e} dv {errs[2]:.1e} "
                  f"{'ok' if ok else 'WRONG'}", flush=True)
    return bad


def print_stats():
    """The driver's statistics of the forward and of every backward variant, D32/64/128."""
    tmp = Path(tempfile.mkdtemp(prefix="coop-stats-"))
    exe = build_pipestats(tmp)
    if exe is None:
        return
    for d in FWD:
        bc, mr, pre = FWD[d]
        kernels = [("fwd", "flash_attention_coop.comp", 5, name(bc, mr, 4, pre),
                    fwd_defines(d, bc, mr, False, pre), 4)]
        kernels += [(kn, f"flash_attention_coop_{kn}.comp", 8, name(*cfg),
                     defines(d, *cfg, False), cfg[2]) for kn in ("dq", "dkdv") for cfg in configs(d)]
        for kn, shader, bindings, label, defs, nsg in kernels:
            spv = tmp / f"{kn}_{d}_{label}.spv"
            spv.write_bytes(compile_file(shader, defs, target_env="vulkan1.3"))
            try:
                line = statistics_line(exe, spv, bindings, 12, label)
            except RuntimeError as e:
                print(f"--stats: {e}")
                return
            print(f"  stats D{d} {kn:>4} {label:>10}: {line} {resident(line, 32 * nsg)}",
                  flush=True)


def torch_fwd_bwd(torch, q, k, v, do, l, d, causal):
    """torch SDPA f16 forward + backward, ms: bench_attention.torch_sdpa (CUDA events over its
    iterations, as bench_attention_paths times it)."""
    b, h = 4, q.shape[0] // 4
    return torch_sdpa(torch, q, k, v, do, b, h, l, d, causal, 1.0 / math.sqrt(d), "float16")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--stats", action="store_true", help="the driver's statistics (registers "
                    "a thread) of every kernel variant (bench/tools/pipestats.c)")
    ap.add_argument("--shapes", default="", help="only cases whose name has one of these, "
                    "comma-separated (e.g. L1024)")
    args = ap.parse_args()
    fn = functools.partial(compile_file, target_env="vulkan1.3")
    jobs = [(fn, (f"flash_attention_coop_{kn}.comp", defines(d, *cfg, c)))
            for kn in ("dq", "dkdv") for d in FWD for cfg in configs(d) for c in (False, True)]
    jobs += [(fn, ("flash_attention_coop.comp", fwd_defines(d, *FWD[d][:2], c, FWD[d][2])))
             for d in FWD for c in (False, True)]
    compile_many(jobs)
    if args.stats:
        print_stats()
    r = Runner()
    bwd = Backward(r)
    rng = np.random.default_rng(0)
    results = {"kind": "coop_attention_bwd", "date": datetime.datetime.now().strftime(
        "%Y-%m-%d %H:%M"), "device": r.kp.list_physical_devices()[0]["device_name"],
        "rounds": args.rounds, "forward": {str(d): name(c[0], c[1], 4, c[2]) for d, c in FWD.items()},
        "checks": [], "rows": []}
    bad = check(bwd, rng, results)
    print(f"{len(results['checks'])} checks, {bad} wrong", flush=True)
    only = [s for s in args.shapes.split(",") if s]
    torch = None if args.no_torch else cuda_torch()
    for bh, l, d, causal in SHAPES:
        case = f"B{bh // 8} H8 L{l} D{d}{' causal' if causal else ''}"
        if only and not any(s in case for s in only):
            continue
        q, k, v, do = (rng.standard_normal((bh, l, d)).astype(np.float16) for _ in range(4))
        sets = {name(*c): bwd.algos(bh, l, l, d, c, causal, q, k, v, do)[0] for c in configs(d)}
        times = {f"{n} {a}": [] for n in sets for a in ("fwd", "dq", "dkdv")}
        if torch is not None:
            times["torch"] = []
        for _ in range(args.rounds):
            for n, algos in sets.items():
                for a, algo in algos.items():
                    times[f"{n} {a}"].append(time_algo(r, algo, args.reps) * 1e6)
            if torch is not None:
                times["torch"].append(torch_fwd_bwd(torch, q, k, v, do, l, d, causal) * 1e3)
        us = {n: dict(median=statistics.median(t), min=min(t), max=max(t))
              for n, t in times.items()}
        for n in sets:
            us[f"{n} total"] = dict(median=sum(us[f"{n} {a}"]["median"]
                                               for a in ("fwd", "dq", "dkdv")))
        flop = 4 * bh * l * l * d * (0.5 if causal else 1.0) * 3.5   # fwd 2 products, bwd 5
        row = {"case": case, "bh": bh, "l": l, "d": d, "causal": causal, "gflop": flop / 1e9,
               "us": us}
        results["rows"].append(row)
        cells = "  ".join(f"{n} {us[f'{n} total']['median']:8.1f} us (fwd "
                          f"{us[f'{n} fwd']['median']:.0f} dq {us[f'{n} dq']['median']:.0f} "
                          f"dkdv {us[f'{n} dkdv']['median']:.0f})" for n in sets)
        torch_cell = (f"  torch {us['torch']['median']:8.1f} us" if "torch" in us else "")
        print(f"{case:<24} {cells}{torch_cell}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
