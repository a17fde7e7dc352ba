"""Matmuls with fused epilogues and loads at the LM small step's shapes, against the same work
as separate kernels: does the Target's limit on hooked matmuls (matmul_hook_max_flops 2^30,
matmul_load_hook_max_flops 2^26 on a GPU, vkgrad/target.py) still pay with today's kernels?

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_matmul_hooks.py
Here (lavapipe): python bench/bench_matmul_hooks.py --quick

Each case is one jitted function compiled twice for the device: with its Target's limits (the
elementwise work in kernels of its own) and with the limits raised to 2^40 flops (the work in
the matmul's generated loads or stores, where the fusion passes put it). GPU time of the whole
program (vg.profile: Vulkan timestamps, median of its runs), interleaved rounds, median and
range; the dispatches of each plan; the two results compared. Writes $OUT/matmul_hooks.json.

Cases (x [8192, 256] tokens of the small LM, d_ff 1024):
    fc        gelu(x @ w1 + b1)                   a store epilogue with a tanh
    down      h @ w2 + b2 + r                     a store epilogue, two extra reads
    qkv       x @ wqkv + bqkv                     a store epilogue (a bias)
    gelu_bwd  (g @ w2^T) * gelu'(u)               the backward's epilogue, one extra read
    dw_load   gelu(u)^T @ g                       the weight gradient with a fused load (tanh)
    dw_relu   relu(u)^T @ g                       ... a cheap one (max)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vkgrad as vg  # noqa: E402
import vkgrad.numpy as vnp  # noqa: E402
from vkgrad import nn  # noqa: E402
from vkgrad.runtime import get_device  # noqa: E402

RAISED = 2 ** 40


def gelu_grad(u):
    return vg.grad(lambda t: vnp.sum(nn.gelu(t)))(u)


def cases(tokens: int, d: int, ff: int):
    rng = np.random.default_rng(0)
    f32 = lambda *s: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)  # noqa: E731
    x, h, u, g = f32(tokens, d), f32(tokens, ff), f32(tokens, ff), f32(tokens, d)
    w1, b1, w2, b2, r = f32(d, ff), f32(ff), f32(ff, d), f32(d), f32(tokens, d)
    wqkv, bqkv = f32(d, 3 * d), f32(3 * d)
    return {
        "fc": (lambda x, w, b: nn.gelu(x @ w + b), (x, w1, b1), 2 * tokens * d * ff),
        "down": (lambda h, w, b, r: h @ w + b + r, (h, w2, b2, r), 2 * tokens * ff * d),
        "qkv": (lambda x, w, b: x @ w + b, (x, wqkv, bqkv), 2 * tokens * d * 3 * d),
        "gelu_bwd": (lambda g, w, u: (g @ w.T) * gelu_grad(u), (g, w2, u), 2 * tokens * d * ff),
        "dw_load": (lambda u, g: nn.gelu(u).T @ g, (u, g), 2 * tokens * ff * d),
        "dw_relu": (lambda u, g: vnp.maximum(u, 0.0).T @ g, (u, g), 2 * tokens * ff * d),
    }


def with_limits(dev, flops, load_flops):
    dev.target = dataclasses.replace(dev.target, matmul_hook_max_flops=flops,
                                     matmul_load_hook_max_flops=load_flops)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small shapes (for lavapipe)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10, help="vg.profile runs per round")
    ap.add_argument("--only", default="", help="comma-separated case names")
    args = ap.parse_args()
    tokens, d, ff = (256, 64, 128) if args.quick else (8192, 256, 1024)
    dev = get_device()
    base = dev.target
    result = {"device": dev.info.name, "shapes": {"tokens": tokens, "d": d, "ff": ff},
              "limits": {"matmul_hook_max_flops": base.matmul_hook_max_flops,
                         "matmul_load_hook_max_flops": base.matmul_load_hook_max_flops},
              "rounds": args.rounds, "cases": {}}
    only = set(filter(None, args.only.split(",")))
    for name, (fn, xs, flops) in cases(tokens, d, ff).items():
        if only and name not in only:
            continue
        xs = tuple(vg.device_put(a) for a in xs)
        plans = {}
        for label, limits in (("separate", (base.matmul_hook_max_flops,
                                            base.matmul_load_hook_max_flops)),
                              ("hooked", (RAISED, RAISED))):
            with_limits(dev, *limits)
            jitted = vg.jit(lambda *a, fn=fn: fn(*a), backend="vulkan")
            out = np.asarray(jitted(*xs))
            prof = vg.profile(jitted, *xs, runs=2)
            plans[label] = {"jitted": jitted, "out": out, "limits": limits,
                            "kernels": [r.kernel for r in prof.rows], "us": []}
        for _ in range(args.rounds):
            for p in plans.values():
                with_limits(dev, *p["limits"])
                p["us"].append(vg.profile(p["jitted"], *xs, runs=args.runs).total_us)
        dev.target = base
        ref = plans["separate"]["out"]
        err = float(np.abs(plans["hooked"]["out"] - ref).max() / max(np.abs(ref).max(), 1e-30))
        row = {"flops": flops, "max_rel_diff": err}
        for label, p in plans.items():
            med = statistics.median(p["us"])
            row[label] = {"kernels": p["kernels"], "us": {"median": med, "min": min(p["us"]),
                                                          "max": max(p["us"])},
                          "tflops": flops / med / 1e6}
        row["separate_over_hooked"] = row["separate"]["us"]["median"] / row["hooked"]["us"]["median"]
        result["cases"][name] = row
        print(f"{name:9s} separate {row['separate']['us']['median']:8.1f} us "
              f"{row['separate']['kernels']}  hooked {row['hooked']['us']['median']:8.1f} us "
              f"{row['hooked']['kernels']}  separate/hooked {row['separate_over_hooked']:.2f}  "
              f"diff {err:.1e}", flush=True)
    out_dir = Path(os.environ.get("OUT", "."))
    (out_dir / "matmul_hooks.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {out_dir / 'matmul_hooks.json'}")


if __name__ == "__main__":
    main()
