"""vkgrad's fp32 matmul against torch.matmul (cuBLAS, TF32 off), measured in the same run.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_matmul.py [--sweep] [--quick]
Prints a table and writes $OUT/matmul.json (or ./matmul.json without $OUT; --json names it).

vkgrad: one Executable holding REPS copies of the plan (`plan_matmul_op`: one dispatch, or two with
split-K), replayed a few times in one submission each, timed by GPU timestamps
(Executable(timestamps=True)); the median per copy is reported (with split-K: the matmul's and
the slice sum's times together, the barrier between them included).
torch: CUDA events around each call, median. TFLOP/s = 2*batch*m*k*n / median time.
Each measured shape is also checked against a float64 reference (torch on CUDA, or numpy).
--sweep also times every candidate (VARIANTS, the CANDIDATES tiles below, and split-K plans of
the SPLIT_TILES in K slices of SPLITS, those that give a GPU-sized grid) on every shape.
--quick: small shapes only (runs on lavapipe, to check the script itself).
--print-specs: each tile's specialization constants at 4096^3, as `name:w0,w1,...`, for a tool
that asks the driver for per-pipeline statistics (registers), see bench/NOTES_matmul.md.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from vkgrad.lowering.launch import cdiv  # noqa: E402
from vkgrad.lowering.matmul import (VARIANTS, Tile, plan_matmul, plan_matmul_op,  # noqa: E402
                                    split_count)
from vkgrad.runtime import Executable, get_device  # noqa: E402

from peers import cuda_torch  # noqa: E402

# (label, batch, m, k, n, transpose_a, transpose_b)
SHAPES = [
    ("cube1024", 1, 1024, 1024, 1024, False, False),
    ("cube2048", 1, 2048, 2048, 2048, False, False),
    ("cube4096", 1, 4096, 4096, 4096, False, False),
    # The MLP step (784-1024-1024-10, batch 256): forward, and backward's A^T B and A B^T forms.
    ("mlp_x@w1", 1, 256, 784, 1024, False, False),
    ("mlp_h@w2", 1, 256, 1024, 1024, False, False),
    ("mlp_dw2=hT@g", 1, 1024, 256, 1024, True, False),
    ("mlp_dh=g@w2T", 1, 256, 1024, 1024, False, True),
    ("mlp_dw1=xT@g", 1, 784, 256, 1024, True, False),
    # ... its n = 10 products: logits = h2 @ w3, dh2 = g @ w3^T, dw3 = h2^T @ g.
    ("mlp_h@w3", 1, 256, 1024, 10, False, False),
    ("mlp_dh2=g@w3T", 1, 256, 10, 1024, False, True),
    ("mlp_dw3=hT@g", 1, 1024, 256, 10, True, False),
    ("batched8x512", 8, 512, 512, 512, False, False),
    ("cube4096_TN", 1, 4096, 4096, 4096, True, False),
    ("cube4096_NT", 1, 4096, 4096, 4096, False, True),
    # The transformer block (d 512, L 1024, batch 4: 4096 tokens). Y = X W, and backward's
    # dX = dY W^T (NT) and dW = X^T dY (TN) for each of its three weights.
    ("tf_qkv", 1, 4096, 512, 1536, False, False),
    ("tf_qkv_dX", 1, 4096, 1536, 512, False, True),
    ("tf_qkv_dW", 1, 512, 4096, 1536, True, False),
    ("tf_fc", 1, 4096, 512, 2048, False, False),
    ("tf_fc_dX", 1, 4096, 2048, 512, False, True),
    ("tf_fc_dW", 1, 512, 4096, 2048, True, False),
    ("tf_out", 1, 4096, 2048, 512, False, False),
    ("tf_out_dX", 1, 4096, 512, 2048, False, True),
    ("tf_out_dW", 1, 2048, 4096, 512, True, False),
    # attention, 32 = batch 4 x 8 heads, head dim 64: scores [32,1024,64]x[32,64,1024] (as
    # written, and as q @ k^T after transpose folding), then probabilities @ v.
    ("tf_scores", 32, 1024, 64, 1024, False, False),
    ("tf_scores_qkT", 32, 1024, 64, 1024, False, True),
    ("tf_pv", 32, 1024, 1024, 64, False, False),
    # The LM small preset (bench_lm.py: d 256, 4 layers, 8,192 tokens a step): its four weights'
    # products (qkv, attention out, MLP up, MLP down), forward, dX (NT) and dW (TN, K = 8192).
    ("lm_qkv", 1, 8192, 256, 768, False, False),
    ("lm_qkv_dX", 1, 8192, 768, 256, False, True),
    ("lm_qkv_dW", 1, 256, 8192, 768, True, False),
    ("lm_out", 1, 8192, 256, 256, False, False),
    ("lm_out_dX", 1, 8192, 256, 256, False, True),
    ("lm_out_dW", 1, 256, 8192, 256, True, False),
    ("lm_up", 1, 8192, 256, 1024, False, False),
    ("lm_up_dX", 1, 8192, 1024, 256, False, True),
    ("lm_up_dW", 1, 256, 8192, 1024, True, False),
    ("lm_down", 1, 8192, 1024, 256, False, False),
    ("lm_down_dX", 1, 8192, 256, 1024, False, True),
    ("lm_down_dW", 1, 1024, 8192, 256, True, False),
]
QUICK = [
    ("q_64x96x80", 1, 64, 96, 80, False, False),
    ("q_130x257x33_T", 2, 130, 257, 33, True, True),
    ("q_256", 1, 256, 256, 256, False, False),
    ("q_512x768x512_TN", 1, 512, 768, 512, True, False),     # --sweep: split-K plans too
]

# Tiles timed by --sweep besides VARIANTS (bench/NOTES_matmul.md says what each measured).
CANDIDATES = [
    ("L_64x128_16x8", Tile(64, 128, 8, 16, 8)),
    # large's 16 x 8 per thread on half its block (64 threads): twice the workgroups, for the
    # N = 256 and N = 512 outputs (M 4096-8192) where large fills half the H200 or less
    ("N_128x64_16x8_ap", Tile(128, 64, 8, 16, 8, always_prefetch=True)),
    ("N_128x64_16x8", Tile(128, 64, 8, 16, 8)),
    # N = 64 (attention's P @ V): a tall narrow block, large's thread shape
    ("N_256x64_16x8_ap", Tile(256, 64, 8, 16, 8, always_prefetch=True)),
    ("W_64x64_8x8", VARIANTS["wide64"]),
    # between large (384 workgroups at 4096 x 1536: 1.45 waves) and medium
    ("L_96x128_12x8k16", Tile(96, 128, 16, 12, 8)),
    ("L_128x96_8x12k16", Tile(128, 96, 16, 8, 12)),
    # 256 threads, one workgroup a multiprocessor: 256 of them at 4096 x 1536 and 8192 x 768
    # (1.94 waves where large has 1.45)
    ("L_128x192_8x12k16", Tile(128, 192, 16, 8, 12)),
    # ... the same grid with 192 threads of large's 16 x 8 (or 8 x 16), BK 12: under 32 KB
    ("L_128x192_16x8k12", Tile(128, 192, 12, 16, 8)),
    ("L_128x192_16x8k12_ap", Tile(128, 192, 12, 16, 8, always_prefetch=True)),
    ("L_128x192_8x16k12", Tile(128, 192, 12, 8, 16)),
    # 2026-12-04: a multiprocessor's resident workgroups share 48 KiB of shared memory
    # (bench/occupancy_probe.py), so medium (25.6 KB) and small (26.6 KB) run one workgroup a
    # multiprocessor where their registers allow three: the same tiles at BK 8 (12.8 and
    # 13.3 KB) run three. Not yet timed on the H200.
    ("M_128x64_8x8k8", Tile(128, 64, 8, 8, 8)),
    ("S_32x64_4x8k8ks2", Tile(32, 64, 8, 4, 8, ks=2)),
]

# Split-K plans timed by --sweep: each of these tiles (on outputs up to its N) in each of SPLITS
# K slices, where that gives SPLIT_GROUPS workgroups and every slice SPLIT_MIN_STEPS k steps.
SPLIT_TILES = [("large", VARIANTS["large"], None), ("medium", VARIANTS["medium"], None),
               ("N_128x64_16x8_ap", Tile(128, 64, 8, 16, 8, always_prefetch=True), 1024),
               ("N_256x64_16x8_ap", Tile(256, 64, 8, 16, 8, always_prefetch=True), 256)]
SPLITS = (2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 64)
SPLIT_GROUPS = (180, 800)
SPLIT_MIN_STEPS = 12


def sweep_configs(batch, m, k, n):
    """(name, plan_matmul_op options) for --sweep: unsplit tiles, then split-K plans."""
    configs = [(v, dict(variant=v, splits=1)) for v in VARIANTS if v != "wide64"]
    configs += [(name, dict(tile=t, splits=1)) for name, t in CANDIDATES]
    for name, t, max_n in SPLIT_TILES:
        if max_n is not None and n > max_n:
            continue
        blocks = cdiv(m, t.bm) * cdiv(n, t.bn) * batch
        steps = cdiv(k, t.bk * t.ks)
        for s in SPLITS:
            if (split_count(k, t, s) == s and SPLIT_GROUPS[0] <= blocks * s <= SPLIT_GROUPS[1]
                    and steps // s >= SPLIT_MIN_STEPS):
                opt = dict(variant=name) if name in VARIANTS else dict(tile=t)
                configs.append((f"{name}/k{s}", dict(opt, splits=s)))
    return configs


def flops(batch, m, k, n):
    return 2.0 * batch * m * k * n


def operands(rng, batch, m, k, n, ta, tb):
    a = rng.standard_normal((batch, k, m) if ta else (batch, m, k), dtype=np.float32)
    b = rng.standard_normal((batch, n, k) if tb else (batch, k, n), dtype=np.float32)
    return a, b


def reference64(a, b, ta, tb, torch):
    if torch is not None:
        ta_ = torch.from_numpy(a).cuda().double()
        tb_ = torch.from_numpy(b).cuda().double()
        r = (ta_.transpose(1, 2) if ta else ta_) @ (tb_.transpose(1, 2) if tb else tb_)
        return r
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64.transpose(0, 2, 1) if ta else a64) @ (b64.transpose(0, 2, 1) if tb else b64)


def rel_err(out, ref, torch):
    if torch is not None:
        o = torch.from_numpy(np.ascontiguousarray(out)).cuda() if isinstance(out, np.ndarray) else out
        o = o.double()
        return float(torch.linalg.norm(o - ref) / torch.linalg.norm(ref))
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def dispatches(dev, op, bufs):
    """The OpPlan's dispatches on `bufs` {role: Buffer}, making its temps' buffers."""
    for t in op.temps:
        if t.role not in bufs or bufs[t.role].size < t.size:
            bufs[t.role] = dev.buffer(t.size)
    return [dev.dispatch(launch, [bufs[r] for r in roles]) for launch, roles in op.steps]


def time_vkgrad(dev, op, bufs, reps, rounds):
    """Median GPU time of one run of `op` (all its dispatches), in us."""
    ex = Executable(dev, dispatches(dev, op, bufs) * reps, timestamps=True, name="bench")
    ex.run()  # warm-up: first use of the pipeline
    per, steps = [], len(op.steps)
    for _ in range(rounds):
        ex.run()
        if ex.last_timings_us is None:      # no timestamps: wall time of the whole submission
            t0 = time.perf_counter()
            ex.run()
            per.append((time.perf_counter() - t0) * 1e6 / reps)
        else:
            us = [t for label, t in ex.last_timings_us if label not in ("upload", "download")]
            per += [sum(us[i:i + steps]) for i in range(0, len(us), steps)]
    ex.release()
    return statistics.median(per)


def time_torch(torch, a, b, ta, tb, reps):
    x = torch.from_numpy(a).cuda()
    y = torch.from_numpy(b).cuda()
    x = x.transpose(1, 2) if ta else x          # views: cuBLAS takes the transposes as flags
    y = y.transpose(1, 2) if tb else y
    squeeze = x.shape[0] == 1
    if squeeze:
        x, y = x[0], y[0]
    out = torch.matmul(x, y)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch.matmul(x, y, out=out)
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1000.0)
    return statistics.median(times), (out[None] if squeeze else out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true", help="time every candidate tile too")
    ap.add_argument("--quick", action="store_true", help="small shapes (for lavapipe)")
    ap.add_argument("--only", default="", help="comma-separated shape labels")
    ap.add_argument("--json", default="matmul.json", help="file name written under $OUT")
    ap.add_argument("--plans", default="", help="--sweep: only the plans matching these "
                    "comma-separated patterns (fnmatch: large/k*,N_128x64*)")
    ap.add_argument("--print-specs", action="store_true",
                    help="print label:spec,words for each candidate at 4096^3 and exit")
    args = ap.parse_args()
    if args.print_specs:
        from types import SimpleNamespace
        gpu = SimpleNamespace(type="discrete GPU", max_shared_memory=49152)
        for name, tile in [(v, None) for v in VARIANTS] + CANDIDATES:
            try:
                spec = plan_matmul(1, 4096, 4096, 4096, False, False, 0, 0, gpu,
                                   variant=None if tile is not None else name, tile=tile).spec
            except ValueError:
                continue
            if spec:
                print(f"{name}:" + ",".join(str(int(w)) for w in spec))
        return

    torch = cuda_torch()

    dev = get_device()
    print(f"vkgrad device: {dev.info.name} ({dev.info.type}); torch: "
          f"{torch.cuda.get_device_name() if torch is not None else 'not available'}", flush=True)
    shapes = QUICK if args.quick else SHAPES
    if args.only:
        shapes = [s for s in shapes if s[0] in args.only.split(",")]
    rng = np.random.default_rng(0)
    rows = []
    for label, batch, m, k, n, ta, tb in shapes:
        a, b = operands(rng, batch, m, k, n, ta, tb)
        sa, sb = a[0].size, b[0].size
        bufs = {"a": dev.buffer(a.size), "b": dev.buffer(b.size), "c": dev.buffer(batch * m * n)}
        Executable(dev, []).run(uploads=[(bufs["a"], a), (bufs["b"], b)])
        ref = reference64(a, b, ta, tb, torch)
        fl = flops(batch, m, k, n)
        big = fl > 2e10
        reps, rounds = (10, 3) if big else (50, 4)
        if args.quick:
            reps, rounds = 3, 2

        chosen = plan_matmul_op(batch, m, k, n, ta, tb, sa, sb, dev.target)
        configs = [("planner", {})]
        if args.sweep:
            configs += [c for c in sweep_configs(batch, m, k, n) if not args.plans or any(
                fnmatch.fnmatch(c[0], pat) for pat in args.plans.split(","))]
        row = {"shape": label, "batch": batch, "m": m, "k": k, "n": n, "transpose_a": ta,
               "transpose_b": tb, "planner_variant": chosen.launches[0].name, "vkgrad": {}}
        for name, options in configs:
            try:
                op = plan_matmul_op(batch, m, k, n, ta, tb, sa, sb, dev.target, **options)
                # Correctness first: poison C, run once, compare with the float64 reference.
                ex = Executable(dev, dispatches(dev, op, bufs))
                ex.run(uploads=[(bufs["c"], np.full(batch * m * n, np.nan, np.float32))],
                       downloads=[bufs["c"]])
                out = bufs["c"].read_staging().reshape(batch, m, n)
                err = rel_err(out, ref, torch)
                ex.release()
                us = time_vkgrad(dev, op, bufs, reps, rounds)
            except Exception as e:  # a candidate that fails to build is reported, not fatal
                print(f"  {label} {name}: FAILED {type(e).__name__}: {e}", flush=True)
                row["vkgrad"][name] = {"error": f"{type(e).__name__}: {e}"}
                continue
            launch = op.launches[0].name
            row["vkgrad"][name] = {"launch": launch, "us": us, "tflops": fl / us / 1e6,
                                   "rel_err": err}
            print(f"  {label:>14} {name:>22} ({launch}): {us:9.1f} us "
                  f"{fl / us / 1e6:6.2f} TFLOP/s  rel_err {err:.1e}", flush=True)
        if torch is not None:
            us, out = time_torch(torch, a, b, ta, tb, reps * rounds)
            row["torch"] = {"us": us, "tflops": fl / us / 1e6, "rel_err": rel_err(out, ref, torch)}
            print(f"  {label:>14} {'torch':>13}: {us:9.1f} us {fl / us / 1e6:6.2f} TFLOP/s  "
                  f"rel_err {row['torch']['rel_err']:.1e}", flush=True)
            del out
        rows.append(row)
        del bufs, ref
        if torch is not None:
            torch.cuda.empty_cache()

    print()
    print(f"{'shape':>14} {'b':>2} {'m':>5} {'k':>5} {'n':>5} T  {'planner':>22} "
          f"{'vkgrad':>8} {'best':>8} {'(plan)':>22} {'torch':>8} {'ratio':>6}  rel_err")
    for r in rows:
        ok = {k: v for k, v in r["vkgrad"].items() if "tflops" in v}
        pl = r["vkgrad"].get("planner", {})
        best_name = max(ok, key=lambda k: ok[k]["tflops"]) if ok else "-"
        best = ok[best_name]["tflops"] if ok else float("nan")
        tt = r.get("torch", {}).get("tflops", float("nan"))
        vt = pl.get("tflops", float("nan"))
        flags = ("T" if r["transpose_a"] else "N") + ("T" if r["transpose_b"] else "N")
        print(f"{r['shape']:>14} {r['batch']:>2} {r['m']:>5} {r['k']:>5} {r['n']:>5} {flags} "
              f"{r['planner_variant']:>22} {vt:8.2f} {best:8.2f} {best_name:>22} {tt:8.2f} "
              f"{vt / tt:6.2f}  {pl.get('rel_err', float('nan')):.1e}")
    out_dir = Path(os.environ.get("OUT", "."))
    result = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": dev.info.name,
              "torch_device": torch.cuda.get_device_name() if torch is not None else None,
              "unit": "TFLOP/s from the median; us per call", "rows": rows}
    (out_dir / args.json).write_text(json.dumps(result, indent=1))
    print(f"wrote {out_dir / args.json}")


if __name__ == "__main__":
    main()
