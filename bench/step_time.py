"""Where a language-model training step's wall time goes on the device: the host call, the wait
for the GPU, and the sum of the kernels' GPU times (vg.profile). For a step whose wall time is
far above its kernels' sum (bench_lm.py's 'GPU time per step').

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/step_time.py [--model transformer] [--preset small]
Here (lavapipe): python bench/step_time.py --preset tiny --steps 6

--batches: "same" (one batch every step), "host" (a new numpy batch every step) or "device"
(a new batch already on the device every step, as bench_lm.py does: every call gets new
argument buffers). The loss is read every step. Besides the times it prints, per call after
the first three, the sequences recorded, buffers allocated, pool misses and arguments copied
into the program's slots (vg.runtime_stats(); docs/jit.md, "The call path": zero, zero, zero
and two are what a call with a new batch should cost). Issue 20's number is the host call
with --batches device (at most 0.1 ms for the transformer small step); bench/profile_call.py
--lm transformer measures it with the queue drained before each call and splits it by phase.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import vkgrad as vg  # noqa: E402
import train_lm  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="transformer", choices=sorted(train_lm.PRESETS))
    ap.add_argument("--preset", default="small")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batches", default="same", choices=["same", "host", "device"])
    args = ap.parse_args()
    cfg = train_lm.make_config(args.model, args.preset)
    step, _ = train_lm.make_steps(cfg)
    rng = np.random.default_rng(0)
    n_batches = 1 if args.batches == "same" else 2 * args.steps + 3
    batches = [tuple(rng.integers(0, 256, (cfg["batch"], cfg["seq"])).astype(np.int32)
                     for _ in range(2)) for _ in range(n_batches)]
    if args.batches != "host":
        batches = vg.device_put(batches)
    x, y = batches[0]
    params = train_lm.init_params(cfg)
    st = [vg.device_put(params), vg.device_put(train_lm.optimizer(cfg).init(params)), 0]

    def one():
        x, y = batches[st[2] % n_batches]
        st[2] += 1
        st[0], st[1], loss, _ = step(st[0], st[1], x, y)
        return loss

    for _ in range(3):
        float(one())
    events = ("recordings", "allocations", "pool_misses", "copy_ins")
    before = {k: vg.runtime_stats()[k] for k in events}
    calls, waits = [], []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = one()
        t1 = time.perf_counter()
        float(loss)
        calls.append(t1 - t0)
        waits.append(time.perf_counter() - t1)
    after = vg.runtime_stats()
    per_call = {k: (after[k] - before[k]) / args.steps for k in events}
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = one()
    float(loss)
    loop = (time.perf_counter() - t0) / args.steps
    prof = vg.profile(step, st[0], st[1], x, y, runs=3)
    ms = lambda s: f"{1e3 * statistics.median(s):.2f} ms"   # noqa: E731
    print(f"{args.model} {args.preset}, {args.batches} batches: host call {ms(calls)}, "
          f"wait {ms(waits)}, async loop {1e3 * loop:.2f} ms/step; kernels' sum "
          f"{prof.total_us / 1e3:.2f} ms, profiled submission {prof.submission_us / 1e3:.2f} ms, "
          f"{len(prof.rows)} kernels")
    print("per call (after the first three): " +
          ", ".join(f"{k} {v:g}" for k, v in per_call.items()))
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / f"step_time-{args.model}-{args.batches}.json").write_text(
            json.dumps({"model": args.model, "preset": args.preset, "batches": args.batches,
                        "host_call_ms": 1e3 * statistics.median(calls),
                        "wait_ms": 1e3 * statistics.median(waits), "loop_ms": 1e3 * loop,
                        "per_call": per_call}, indent=1))


if __name__ == "__main__":
    main()
