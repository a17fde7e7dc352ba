"""vkgrad's fp32 matmul against torch.matmul (cuBLAS, TF32 off), measured in the same run.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_matmul.py [--sweep] [--quick]
Prints a table and writes $OUT/matmul.json (or ./matmul.json without $OUT).

vkgrad: one Executable holding REPS identical dispatches, replayed a few times in one submission
each, timed by GPU timestamps (Executable(timestamps=True)); the per-dispatch median is reported.
torch: CUDA events around each call, median. TFLOP/s = 2*batch*m*k*n / median time.
Each measured shape is also checked against a float64 reference (torch on CUDA, or numpy).
--sweep also times every candidate tile (VARIANTS plus the CANDIDATES below) on every shape.
--quick: small shapes only (runs on lavapipe, to check the script itself).
--print-specs: each tile's specialization constants at 4096^3, as `name:w0,w1,...`, for a tool
that asks the driver for per-pipeline statistics (registers), see bench/NOTES_matmul.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from vkgrad.lowering.matmul import VARIANTS, Tile, plan_matmul  # noqa: E402
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
]

# Tiles timed by --sweep besides VARIANTS (the runner-ups of bench/NOTES_matmul.md).
CANDIDATES = [
    ("L_16x8_branchy", Tile(128, 128, 8, 16, 8)),
    ("L_8x8_256thr", Tile(128, 128, 8, 8, 8)),
    ("L_8x8_256thr_ap", Tile(128, 128, 8, 8, 8, always_prefetch=True)),
    ("L_64x128_16x8", Tile(64, 128, 8, 16, 8)),
    ("M_64x128", Tile(64, 128, 16, 8, 8)),
    ("S_32x64k16ks2", Tile(32, 64, 16, 4, 4, ks=2)),
    ("S_32x64_4x8ks4_ap", Tile(32, 64, 8, 4, 8, ks=4, always_prefetch=True)),
    ("S_32x32k16ks4p2", Tile(32, 32, 16, 4, 4, ks=4, phases=2)),
]


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


def time_vkgrad(dev, launch, bufs, reps, rounds):
    ex = Executable(dev, [dev.dispatch(launch, bufs)] * reps, timestamps=True, name="bench")
    ex.run()  # warm-up: first use of the pipeline
    per = []
    for _ in range(rounds):
        ex.run()
        if ex.last_timings_us is None:      # no timestamps: wall time of the whole submission
            t0 = time.perf_counter()
            ex.run()
            per.append((time.perf_counter() - t0) * 1e6 / reps)
        else:
            per += [us for label, us in ex.last_timings_us if label.startswith("matmul")]
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
        bufs = (dev.buffer(a.size), dev.buffer(b.size), dev.buffer(batch * m * n))
        Executable(dev, []).run(uploads=[(bufs[0], a), (bufs[1], b)])
        ref = reference64(a, b, ta, tb, torch)
        fl = flops(batch, m, k, n)
        big = fl > 2e10
        reps, rounds = (10, 3) if big else (50, 4)
        if args.quick:
            reps, rounds = 3, 2

        chosen = plan_matmul(batch, m, k, n, ta, tb, sa, sb, dev.target)
        configs = [("planner", None)]
        if args.sweep:
            configs += [(name, None) for name in VARIANTS if name != "wide64"] + CANDIDATES
        row = {"shape": label, "batch": batch, "m": m, "k": k, "n": n, "transpose_a": ta,
               "transpose_b": tb, "planner_variant": chosen.name, "vkgrad": {}}
        for name, tile in configs:
            try:
                if name == "planner":
                    launch = chosen
                elif tile is None:
                    launch = plan_matmul(batch, m, k, n, ta, tb, sa, sb, dev.target, variant=name)
                else:
                    launch = plan_matmul(batch, m, k, n, ta, tb, sa, sb, dev.target, tile=tile)
                # Correctness first: poison C, run once, compare with the float64 reference.
                ex = Executable(dev, [dev.dispatch(launch, bufs)])
                ex.run(uploads=[(bufs[2], np.full(batch * m * n, np.nan, np.float32))],
                       downloads=[bufs[2]])
                out = bufs[2].read_staging().reshape(batch, m, n)
                err = rel_err(out, ref, torch)
                ex.release()
                us = time_vkgrad(dev, launch, bufs, reps, rounds)
            except Exception as e:  # a candidate that fails to build is reported, not fatal
                print(f"  {label} {name}: FAILED {type(e).__name__}: {e}", flush=True)
                row["vkgrad"][name] = {"error": f"{type(e).__name__}: {e}"}
                continue
            row["vkgrad"][name] = {"launch": launch.name, "us": us, "tflops": fl / us / 1e6,
                                   "rel_err": err}
            print(f"  {label:>14} {name:>13} ({launch.name}): {us:9.1f} us "
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
    print(f"{'shape':>14} {'b':>2} {'m':>5} {'k':>5} {'n':>5} T  {'variant':>13} "
          f"{'vkgrad':>8} {'best':>8} {'(tile)':>13} {'torch':>8} {'ratio':>6}  rel_err")
    for r in rows:
        ok = {k: v for k, v in r["vkgrad"].items() if "tflops" in v}
        pl = r["vkgrad"].get("planner", {})
        best_name = max(ok, key=lambda k: ok[k]["tflops"]) if ok else "-"
        best = ok[best_name]["tflops"] if ok else float("nan")
        tt = r.get("torch", {}).get("tflops", float("nan"))
        vt = pl.get("tflops", float("nan"))
        flags = ("T" if r["transpose_a"] else "N") + ("T" if r["transpose_b"] else "N")
        print(f"{r['shape']:>14} {r['batch']:>2} {r['m']:>5} {r['k']:>5} {r['n']:>5} {flags} "
              f"{r['planner_variant']:>13} {vt:8.2f} {best:8.2f} {best_name:>13} {tt:8.2f} "
              f"{vt / tt:6.2f}  {pl.get('rel_err', float('nan')):.1e}")
    out_dir = Path(os.environ.get("OUT", "."))
    result = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": dev.info.name,
              "torch_device": torch.cuda.get_device_name() if torch is not None else None,
              "unit": "TFLOP/s from the median; us per call", "rows": rows}
    (out_dir / "matmul.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {out_dir / 'matmul.json'}")


if __name__ == "__main__":
    main()
