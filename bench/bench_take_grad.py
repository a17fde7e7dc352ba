"""The embedding gradient (take_grad, vkgrad/kernels_glsl/take_grad.comp) on its own: GPU time per
stage from Vulkan timestamps (median of REPS runs), against torch's embedding backward
(index_add_, deterministic algorithms on) in the same run, interleaved.

    python3 bench/bench_take_grad.py [--out results.json]

Cases: the LM small's [256, 256] from 8,192 ids (uniform, and text-like: one id a sixth of them),
GPT-2 scale [50257, 768] from 16,384 ids (Zipf).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vkgrad.lowering.kernels import plan_take_grad  # noqa: E402
from vkgrad.runtime import Executable, get_device  # noqa: E402

REPS = 20


def cases(rng):
    uniform = rng.integers(0, 256, 8192)
    text = uniform.copy()
    text[rng.random(8192) < 1 / 6] = 32          # a space
    zipf = np.minimum(rng.zipf(1.2, 16384) - 1, 50256)
    return [("lm_256x256_uniform", 256, 256, uniform), ("lm_256x256_text", 256, 256, text),
            ("gpt2_50257x768_zipf", 50257, 768, zipf)]


def time_vkgrad(dev, N, B, idx, g):
    J = len(idx)
    plan = plan_take_grad(1, N, B, J, target=dev.target)
    bufs = {"g": dev.buffer(g.size), "idx": dev.buffer(J, np.int32), "dx": dev.buffer(N * B)}
    for t in plan.temps:
        bufs[t.role] = dev.buffer(t.size, t.dtype, kind="scratch")
    Executable(dev, []).run(uploads=[(bufs["g"], g), (bufs["idx"], idx.astype(np.int32))])
    dispatches = [dev.dispatch(launch, [bufs[r] for r in roles]) for launch, roles in plan.steps]
    ex = Executable(dev, dispatches, timestamps=True, name="take_grad")
    ex.run()
    per = {}
    for _ in range(REPS):
        ex.run(downloads=[bufs["dx"]])
        for label, us in ex.last_timings_us or []:
            per.setdefault(label, []).append(us)
    dx = bufs["dx"].read_staging().reshape(N, B)
    ex.release()
    stages = {k: statistics.median(v) for k, v in per.items() if k.startswith("take_grad")}
    return sum(stages.values()), stages, dx


def time_torch(N, B, idx, g):
    import torch
    torch.use_deterministic_algorithms(True)
    gi = torch.tensor(g.reshape(len(idx), B), device="cuda")
    ii = torch.tensor(idx, device="cuda", dtype=torch.long)
    out = torch.zeros(N, B, device="cuda")
    ts = []
    for _ in range(REPS + 2):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out.zero_()
        out.index_add_(0, ii, gi)
        end.record()
        torch.cuda.synchronize()
        ts.append(start.elapsed_time(end) * 1e3)
    return statistics.median(ts[2:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    dev = get_device()
    rows = []
    for name, N, B, idx in cases(rng):
        if N * B * 4 > dev.target.max_storage_buffer_range:
            print(f"{name}: dx is larger than {dev.info.name} can bind"); continue
        g = rng.standard_normal((len(idx), B)).astype(np.float32)
        want = np.zeros((N, B), np.float64)
        np.add.at(want, idx, g.astype(np.float64))
        vk, tt, stages = [], [], None
        for _ in range(args.rounds):
            total, stages, dx = time_vkgrad(dev, N, B, idx, g)
            vk.append(total)
            try:
                tt.append(time_torch(N, B, idx, g))
            except Exception as e:       # no torch/CUDA here
                tt.append(float("nan"))
                print("torch:", e)
        err = float(np.max(np.abs(dx - want)))
        row = dict(name=name, N=N, B=B, J=len(idx), vkgrad_us=statistics.median(vk),
                   vkgrad_range=[min(vk), max(vk)], torch_us=statistics.median(tt),
                   torch_range=[min(tt), max(tt)], stages_us=stages, max_abs_err=err,
                   largest_bucket=int(np.bincount(idx).max()))
        row["ratio_vs_torch"] = row["torch_us"] / row["vkgrad_us"]
        rows.append(row)
        print(f"{name}: vkgrad {row['vkgrad_us']:.1f} us (torch {row['torch_us']:.1f} us, "
              f"{row['ratio_vs_torch']:.2f}x), largest bucket {row['largest_bucket']}, "
              f"max abs err {err:.1e}; stages " +
              ", ".join(f"{k[10:]} {v:.1f}" for k, v in stages.items()), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(dict(date=time.strftime("%Y-%m-%d"),
                                                  device=dev.info.name, rows=rows), indent=1))


if __name__ == "__main__":
    main()
