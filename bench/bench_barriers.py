"""Barriers only where a hazard is (vkgrad/runtime/hazards.py, kp patch 0013) against a barrier
before every dispatch, on the same jitted training steps, interleaved in one process: every
barrier (VKGRAD_BARRIERS=all) and the default (the dispatches reordered into levels of
independent ones, a barrier per level).

    python3 bench/bench_barriers.py [--models transformer,mamba] [--preset small]
                                    [--rounds 5] [--steps 20]

Each model's step is compiled twice, VKGRAD_BARRIERS set while its program is recorded. Rounds
alternate A B A B ...;
each round runs `steps` steps with the loss read at the end (the GPU's time per step) and then
`steps` with the loss read every step. Prints ms/step medians and ranges, and the ops recorded
without a barrier; JSON to $OUT/barriers.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from bench_lm import finish  # noqa: E402
from profile_call import lm_setup  # noqa: E402
from vkgrad.runtime import vulkan  # noqa: E402


def compiled(model, preset, mode: str):
    """lm_setup's call and drain, the step's program recorded (first call) with VKGRAD_BARRIERS
    = mode; and the ops it recorded without a barrier."""
    os.environ["VKGRAD_BARRIERS"] = mode
    try:
        _, call, drain, _ = lm_setup(model, preset, False)
        before = vulkan.counters["barriers_left_out"]
        call()
        drain()
        return call, drain, vulkan.counters["barriers_left_out"] - before
    finally:
        os.environ.pop("VKGRAD_BARRIERS", None)


def timed(call, drain, steps, every):
    drain()
    t0 = time.perf_counter()
    for _ in range(steps):
        call()
        if every:
            drain()
    drain()
    return (time.perf_counter() - t0) / steps * 1e3


def summary(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "rounds": len(xs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="transformer,mamba")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    t0 = time.perf_counter()
    results = {"device": vulkan.get_device().info.name, "preset": args.preset, "models": {}}
    for model in args.models.split(","):
        sides = {"every barrier": compiled(model, args.preset, "all"),
                 "levels": compiled(model, args.preset, "")}
        times = {(s, e): [] for s in sides for e in ("end", "every")}
        for _ in range(args.rounds):
            for side, (call, drain, _) in sides.items():
                for _ in range(3):
                    call()           # warm
                times[side, "end"].append(timed(call, drain, args.steps, False))
                times[side, "every"].append(timed(call, drain, args.steps, True))
        r = results["models"][model] = {
            "barriers_left_out": {s: v[2] for s, v in sides.items()},
            "ms_per_step": {f"{s}, loss read at the {e}" if e == "end" else
                            f"{s}, loss read every step": summary(v)
                            for (s, e), v in times.items()}}
        for name, s in r["ms_per_step"].items():
            print(f"{model} {args.preset}: {name}: {s['median']:.3f} ms/step "
                  f"({s['min']:.3f}-{s['max']:.3f})", flush=True)
        print(f"{model}: ops recorded without a barrier: {r['barriers_left_out']}", flush=True)
    finish(results, t0, "barriers.json")


if __name__ == "__main__":
    main()
