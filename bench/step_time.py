"""Where a language-model training step's wall time goes on the device: the host call, the wait
for the GPU, and the sum of the kernels' GPU times (vg.profile). For a step whose wall time is
far above its kernels' sum (bench_lm.py's 'GPU time per step').

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/step_time.py [--model transformer] [--preset small]
"""

from __future__ import annotations

import argparse
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
    args = ap.parse_args()
    cfg = train_lm.make_config(args.model, args.preset)
    step, _ = train_lm.make_steps(cfg)
    rng = np.random.default_rng(0)
    x, y = (vg.device_put(rng.integers(0, 256, (cfg["batch"], cfg["seq"])).astype(np.int32))
            for _ in range(2))
    params = train_lm.init_params(cfg)
    st = [vg.device_put(params), vg.device_put(train_lm.optimizer(cfg).init(params))]

    def one():
        st[0], st[1], loss, _ = step(st[0], st[1], x, y)
        return loss

    for _ in range(3):
        float(one())
    calls, waits = [], []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = one()
        t1 = time.perf_counter()
        float(loss)
        calls.append(t1 - t0)
        waits.append(time.perf_counter() - t1)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = one()
    float(loss)
    loop = (time.perf_counter() - t0) / args.steps
    prof = vg.profile(step, st[0], st[1], x, y, runs=3)
    ms = lambda s: f"{1e3 * statistics.median(s):.2f} ms"   # noqa: E731
    print(f"{args.model} {args.preset}: host call {ms(calls)}, wait {ms(waits)}, "
          f"async loop {1e3 * loop:.2f} ms/step; kernels' sum {prof.total_us / 1e3:.2f} ms, "
          f"profiled submission {prof.submission_us / 1e3:.2f} ms, "
          f"{len(prof.rows)} kernels")


if __name__ == "__main__":
    main()
