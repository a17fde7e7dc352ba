"""The embedding gradient (take_grad) on its own: GPU time per launch from Vulkan timestamps
(median of REPS runs) of the plan plan_take_grad chooses and of both plans forced (the
one-launch small-table plan, take_grad_rows.comp, and the sort plan, take_grad.comp), against
torch's embedding backward (index_add_, deterministic algorithms on), interleaved rounds.

    python3 bench/bench_take_grad.py [--out results.json] [--rounds 5] [--quick]

Cases: the LM small's [256, 256] from 8,192 ids (uniform, and text-like: one id a sixth of
them), a tiny table (4 rows: J split over workgroups), a mid-sized one ([4096, 256]) and GPT-2
scale [50257, 768] from 16,384 ids (Zipf), where the choice goes to the sort plan. For the LM's
cases the rows plan is also timed at other layouts (`layouts_us`: rows x slices x splits), to
check its planner's choice. Each row: `vkgrad_us` and `stages_us` of the chosen plan,
`plan` (which), `plans_us` (both forced), `max_abs_err` of each against float64.
`--quick`: small shapes, two rounds, no torch (a check of the script on lavapipe).
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

from vkgrad.lowering.kernels import plan_take_grad, plan_take_grad_rows  # noqa: E402
from vkgrad.runtime import Executable, get_device  # noqa: E402

REPS = 20


def cases(rng, quick=False):
    if quick:
        return [("quick_64x8", 64, 8, rng.integers(0, 64, 3000)),
                ("quick_3x5_text", 3, 5, np.where(rng.random(3000) < 0.5, 1,
                                                   rng.integers(0, 3, 3000)))]
    uniform = rng.integers(0, 256, 8192)
    text = uniform.copy()
    text[rng.random(8192) < 1 / 6] = 32          # a space
    zipf = np.minimum(rng.zipf(1.2, 16384) - 1, 50256)
    return [("lm_256x256_uniform", 256, 256, uniform), ("lm_256x256_text", 256, 256, text),
            ("tiny_4x256", 4, 256, rng.integers(0, 4, 8192)),
            ("mid_4096x256", 4096, 256, rng.integers(0, 4096, 8192)),
            ("gpt2_50257x768_zipf", 50257, 768, zipf)]


# rows plan layouts timed beside the planner's choice on the LM's cases: (rows, slices, splits)
LAYOUTS = ((1, 16, 1), (1, 8, 1), (1, 4, 1), (2, 8, 1), (1, 16, 2), (1, 16, 4))


def time_plan(dev, plan, N, B, idx, g):
    """(GPU us summed over the plan's launches, {launch: us}, dx) for `plan` on g, idx."""
    J = len(idx)
    bufs = {"g": dev.buffer(g.size), "idx": dev.buffer(J, np.int32), "dx": dev.buffer(N * B)}
    for t in plan.temps:
        bufs[t.role] = dev.buffer(t.size, t.dtype, kind="scratch")
    Executable(dev, []).run(uploads=[(bufs["g"], g), (bufs["idx"], idx.astype(np.int32))])
    dispatches = [dev.dispatch(launch, [bufs[r] for r in roles]) for launch, roles in plan.steps]
    ex = Executable(dev, dispatches, timestamps=True, name="take_grad")
    ex.run()
    names = {launch.name for launch in plan.launches}
    per = {}
    for _ in range(REPS):
        ex.run(downloads=[bufs["dx"]])
        for label, us in ex.last_timings_us or []:
            if label in names:
                per.setdefault(label, []).append(us)
    dx = bufs["dx"].read_staging().reshape(N, B)
    ex.release()
    stages = {k: statistics.median(v) for k, v in per.items()}
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


def chosen_method(dev, N, B, J) -> str:
    names = [launch.name for launch in plan_take_grad(1, N, B, J, target=dev.target).launches]
    return "rows" if names[0] == "take_grad_rows" else "sort"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds = 2 if args.quick else args.rounds
    rng = np.random.default_rng(0)
    dev = get_device()
    rows = []
    for name, N, B, idx in cases(rng, args.quick):
        if N * B * 4 > dev.target.max_storage_buffer_range:
            print(f"{name}: dx is larger than {dev.info.name} can bind"); continue
        J = len(idx)
        g = rng.standard_normal((J, B)).astype(np.float32)
        want = np.zeros((N, B), np.float64)
        np.add.at(want, idx, g.astype(np.float64))
        plans = {m: plan_take_grad(1, N, B, J, target=dev.target, method=m)
                 for m in ("rows", "sort")}
        if name.startswith("lm_"):
            plans.update({f"rows_{r}x{s}x{k}": plan_take_grad_rows(
                1, N, B, J, target=dev.target, rows=r, slices=s, splits=k)
                for r, s, k in LAYOUTS})
        us = {m: [] for m in plans}
        stages, errs, tt = {}, {}, []
        for _ in range(rounds):
            for m, plan in plans.items():
                total, stages[m], dx = time_plan(dev, plan, N, B, idx, g)
                us[m].append(total)
                errs[m] = float(np.max(np.abs(dx - want)))
            if args.quick:
                tt.append(float("nan"))
                continue
            try:
                tt.append(time_torch(N, B, idx, g))
            except Exception as e:       # no torch/CUDA here
                tt.append(float("nan"))
                print("torch:", e)
        med = {m: statistics.median(v) for m, v in us.items()}
        method = chosen_method(dev, N, B, J)
        row = dict(name=name, N=N, B=B, J=J, plan=method, vkgrad_us=med[method],
                   vkgrad_range=[min(us[method]), max(us[method])],
                   torch_us=statistics.median(tt), torch_range=[min(tt), max(tt)],
                   stages_us=stages[method], max_abs_err=errs[method],
                   plans_us={m: med[m] for m in ("rows", "sort")},
                   layouts_us={m: v for m, v in med.items() if m.startswith("rows_")},
                   errs=errs, largest_bucket=int(np.bincount(idx).max()))
        row["ratio_vs_torch"] = row["torch_us"] / row["vkgrad_us"]
        rows.append(row)
        print(f"{name}: vkgrad {row['vkgrad_us']:.1f} us ({method}; rows {med['rows']:.1f}, "
              f"sort {med['sort']:.1f}; torch {row['torch_us']:.1f} us, "
              f"{row['ratio_vs_torch']:.2f}x), largest bucket {row['largest_bucket']}, "
              f"max abs err {max(errs.values()):.1e}; stages " +
              ", ".join(f"{k} {v:.1f}" for k, v in stages[method].items()), flush=True)
        if row["layouts_us"]:
            print("   rows layouts (rows x slices x splits): " +
                  ", ".join(f"{k[5:]} {v:.1f}" for k, v in row["layouts_us"].items()), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(dict(date=time.strftime("%Y-%m-%d"),
                                                  device=dev.info.name, rows=rows), indent=1))


if __name__ == "__main__":
    main()
