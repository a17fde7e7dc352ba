"""A while loop on Vulkan: iterations per second against the chunk size (execution/segmented.py).

A top-level while loop runs as a host loop over one compiled chunk: CHUNK masked iterations and
the predicate after them in one submission, the host reading the predicate back after each.
CHUNK = 1 is one round trip an iteration; a larger chunk makes fewer submissions and runs up to
CHUNK - 1 masked iterations after the end. This measures a small body (x = tanh(x @ w) + 0.5 on
an [8, 64] carry, and a counter) run 10, 100 and 1000 times, for each chunk size: a fresh jit
each (its first call compiles; not timed), then the median of `--rounds` calls.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_while.py [--rounds 7]
--quick: fewer rounds (runs on lavapipe). Run from a checkout without CHUNK (before chunks), it
measures that runner once, as "host" (two submissions an iteration). JSON to $OUT/while.json.
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
sys.path.insert(0, str(ROOT))

import vkgrad as vg  # noqa: E402
import vkgrad.numpy as vnp  # noqa: E402
from vkgrad.execution import segmented  # noqa: E402
from vkgrad.runtime import get_device  # noqa: E402

CHUNKS = (1, 4, 16, 64)
ITERATIONS = (10, 100, 1000)


def loop(n, x, w):
    return vg.lax.while_loop(lambda c: c[0] < n,
                             lambda c: (c[0] + 1, vnp.tanh(c[1] @ w) + 0.5), (0, x))


def measure(n: int, rounds: int, x, w) -> dict:
    f = vg.jit(loop, backend="vulkan")
    got = f(np.int32(n), x, w)                       # compiles
    assert int(got[0]) == n, (int(got[0]), n)
    times, subs = [], []
    for _ in range(rounds):
        s0 = vg.runtime_stats()["submissions"]
        t0 = time.perf_counter()
        vg.block_until_ready(f(np.int32(n), x, w))
        times.append(time.perf_counter() - t0)
        subs.append(vg.runtime_stats()["submissions"] - s0)
    med = statistics.median(times)
    return {"median_s": med, "all_s": times, "iterations_per_s": n / med,
            "submissions": statistics.median(subs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    args = ap.parse_args()
    rounds = 3 if args.quick else args.rounds
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 64)) * 0.1).astype(np.float32)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    t0 = time.perf_counter()
    results = {"device": get_device().info.name, "date": time.strftime("%Y-%m-%d"),
               "body": "x = tanh(x @ w) + 0.5, x f32[8,64]; i += 1", "runs": {}}
    chunks = CHUNKS if hasattr(segmented, "CHUNK") else ("host",)
    for k in chunks:
        if k != "host":
            segmented.CHUNK = k
        for n in ITERATIONS:
            r = measure(n, rounds, x, w)
            results["runs"][f"{k}/{n}"] = {"chunk": k, "iterations": n, **r}
            print(f"chunk {k:>4}  {n:5d} iterations: {r['median_s'] * 1e3:9.2f} ms a call, "
                  f"{r['iterations_per_s']:9.0f} iterations/s, {r['submissions']:.0f} "
                  "submissions", flush=True)
    results["wall_s"] = time.perf_counter() - t0
    out = os.environ.get("OUT")
    if out:
        Path(out, "while.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
