"""The host side of one jitted call: how long vkgrad's Python takes per training step, and where.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/profile_call.py
Here (lavapipe), a smaller model:  python bench/profile_call.py --sizes 784,256,256,10 --batch 64

The step is bench_mlp.py's (784-1024-1024-10, batch 256, ReLU, cross-entropy, Adam, fp32),
jitted with the parameters and optimizer state donated, batches on the device (--host-batches:
numpy batches, uploaded by each call).

What is measured:
  host us/call   the wall time of the call alone, with the queue drained before each call (so
                 the call never waits for an earlier one): the key, the flattening, the binding,
                 the copies into staging memory, the submission. Median, p10, p90.
  profile        cProfile of the same calls (only while inside the call), top functions by
                 own time and by cumulative time; with --pyinstrument, pyinstrument's tree too
                 (if it is installed).
  loop us/step   an asynchronous loop (loss read at the end), for scale.
Writes $OUT/profile_call.json when $OUT is set.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import vkgrad as vg  # noqa: E402

from bench_mlp import data, init, vkgrad_step_fn  # noqa: E402


def setup(sizes, batch, host_batches):
    xs, ys = data(sizes, batch, 8)
    if not host_batches:
        xs, ys = [vg.device_put(x) for x in xs], [vg.device_put(y) for y in ys]
    opt, step = vkgrad_step_fn(sizes[-1])
    jstep = vg.jit(step, donate_argnums=(0, 1))
    params = init(sizes)
    state = {"p": params, "s": opt.init(params), "i": 0}

    def call():
        i = state["i"]
        state["p"], state["s"], state["loss"] = jstep(state["p"], state["s"], xs[i % 8], ys[i % 8])
        state["i"] = i + 1

    def drain():
        vg.block_until_ready((state["p"], state["loss"]))

    return call, drain


def host_times(call, drain, n, profiler=None):
    times = []
    for _ in range(n):
        drain()
        if profiler is not None:
            profiler.enable()
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        if profiler is not None:
            profiler.disable()
        times.append((t1 - t0) * 1e6)
    drain()
    return times


def pct(xs, q):
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="784,1024,1024,10")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--host-batches", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--pyinstrument", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    call, drain = setup(sizes, args.batch, args.host_batches)
    for _ in range(20):          # compile, record every copy, settle the pool
        call()
    drain()

    times = host_times(call, drain, args.calls)
    prof = cProfile.Profile()
    host_times(call, drain, args.calls, prof)
    out = io.StringIO()
    st = pstats.Stats(prof, stream=out)
    st.sort_stats("tottime").print_stats(args.top)
    st.sort_stats("cumulative").print_stats(args.top)

    t0 = time.perf_counter()
    for _ in range(args.calls):
        call()
    drain()
    loop_us = (time.perf_counter() - t0) * 1e6 / args.calls

    from vkgrad.runtime import get_device
    device = get_device().info.name
    print(f"MLP step {sizes} batch {args.batch} on {device}, "
          f"{'host' if args.host_batches else 'device'} batches, {args.calls} calls")
    print(f"host us/call (queue drained before each): median {statistics.median(times):.1f} "
          f"(p10 {pct(times, 0.1):.1f}, p90 {pct(times, 0.9):.1f})")
    print(f"asynchronous loop, loss read at the end: {loop_us:.1f} us/step")
    print(out.getvalue())
    if args.pyinstrument:
        try:
            import pyinstrument
        except ImportError:
            print("pyinstrument is not installed here (pip install pyinstrument)")
        else:
            p = pyinstrument.Profiler(interval=0.0001)
            p.start()
            for _ in range(args.calls):
                call()
                drain()
            p.stop()
            print(p.output_text(unicode=False, color=False, show_all=False))
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "profile_call.json").write_text(json.dumps({
            "device": device, "sizes": sizes, "batch": args.batch,
            "host_batches": args.host_batches, "date": time.strftime("%Y-%m-%d %H:%M"),
            "host_us": {"median": statistics.median(times), "p10": pct(times, 0.1),
                        "p90": pct(times, 0.9)},
            "loop_us_per_step": loop_us, "profile": out.getvalue()}, indent=1))


if __name__ == "__main__":
    main()
