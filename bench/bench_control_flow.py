"""Loops: the GRU LM training step against JAX's (lax.scan), and the compile time of long scans
against JAX's, on the NVIDIA device machine.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_control_flow.py [--rounds 5] [--steps 20]
--quick: the tiny GRU preset and short scans (runs on lavapipe, to check the script).

1. The GRU LM of examples/train_lm.py (`--model gru`, the small preset: d 256, 2 layers,
   L 256, batch 32): bench_lm.py's comparison (the same model, parameters, optimizer and batches
   on both sides, JAX's written with jax.numpy and lax.scan; interleaved rounds of `--steps`
   steps, median tokens/s, both loop styles, the validation losses after the same steps).
2. Compile time against the trip count: the value and gradient of an RNN (h = tanh(h W + x),
   d 256, batch 32) over 1,000 and 10,000 steps. vkgrad (on Vulkan): a fresh jit's first call
   (trace, passes, plan, pipelines, recording the loop, one run) minus the median of 3 later
   calls (one run each), and the plan's dispatch count (the same for both lengths: the loop
   body is lowered once). JAX: the same for jax.jit(value_and_grad) of lax.scan. Interleaved,
   `--compile-rounds` each, medians; the first length's first round also compiles the shaders
   (XLA compiles every time).
JSON to $OUT/control_flow.json.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "examples"))

import vkgrad as vg  # noqa: E402
import vkgrad.numpy as vnp  # noqa: E402
from vkgrad.runtime import get_device  # noqa: E402

import bench_lm  # noqa: E402
import train_lm  # noqa: E402


def rnn_inputs(n, d, batch, seed=0):
    rng = np.random.default_rng(seed)
    return (np.zeros((batch, d), np.float32),
            (rng.standard_normal((n, batch, d)) * 0.1).astype(np.float32),
            (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32))


def vk_loss(h, xs, w):
    return vg.lax.scan(lambda h, x: (vnp.tanh(h @ w + x), h.sum()), h, xs)[1].sum()


def jax_loss_fn():
    import jax
    import jax.numpy as jnp
    return lambda h, xs, w: jax.lax.scan(lambda h, x: (jnp.tanh(h @ w + x), h.sum()), h,
                                         xs)[1].sum()


def time_first_and_again(make, args, ready, again=3):
    """(first call s, median of `again` later calls s, the compiled thing) of a fresh jitted
    function: the first call's excess over a later one is its compile."""
    f = make()
    t0 = time.perf_counter()
    ready(f(*args))
    first = time.perf_counter() - t0
    later = []
    for _ in range(again):
        t0 = time.perf_counter()
        ready(f(*args))
        later.append(time.perf_counter() - t0)
    return first, statistics.median(later), f


def bench_compile(lengths, d, batch, rounds):
    res = {"d": d, "batch": batch}
    try:
        import jax
        jax.config.update("jax_default_matmul_precision", "highest")
        jloss = jax_loss_fn()
    except ImportError as e:
        print(f"  no JAX here ({e}): vkgrad only", flush=True)
        jax = None
    for n in lengths:
        args = rnn_inputs(n, d, batch)
        per = {"vkgrad": [], "jax": [], "vkgrad_run": [], "jax_run": []}
        dispatches = None
        for _ in range(rounds):
            first, again, f = time_first_and_again(
                lambda: vg.jit(vg.value_and_grad(vk_loss, argnums=(0, 2)), backend="vulkan"),
                args, lambda r: np.asarray(r[0]))
            per["vkgrad"].append(first - again)
            per["vkgrad_run"].append(again)
            lowered = f.lower(*args)
            dispatches = lowered.stats().get("dispatches")
            if jax is not None:
                jargs = [jax.device_put(a) for a in args]
                first, again, _ = time_first_and_again(
                    lambda: jax.jit(jax.value_and_grad(jloss, argnums=(0, 2))), jargs,
                    lambda r: r[0].block_until_ready())
                per["jax"].append(first - again)
                per["jax_run"].append(again)
        res[str(n)] = {k: {"median_s": statistics.median(v), "all_s": v}
                       for k, v in per.items() if v}
        res[str(n)]["vkgrad_dispatches_planned"] = dispatches
        res[str(n)]["vkgrad_backend"] = lowered.backend
        print(f"  {n} steps: compile vkgrad {res[str(n)]['vkgrad']['median_s']:.2f} s (a call "
              f"{res[str(n)]['vkgrad_run']['median_s'] * 1e3:.1f} ms)"
              + (f", JAX {res[str(n)]['jax']['median_s']:.2f} s (a call "
                 f"{res[str(n)]['jax_run']['median_s'] * 1e3:.1f} ms)" if per["jax"] else "")
              + f"; vkgrad plans {dispatches} dispatches ({lowered.backend})", flush=True)
    return res


def main():
    ap = bench_lm.round_options(__doc__.split("\n\n")[0])
    ap.add_argument("--compile-rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="tiny preset, short scans")
    args = ap.parse_args()
    preset, lengths, d, batch = "small", (1000, 10000), 256, 32
    if args.quick:
        preset, args.rounds, args.steps, args.warmup = "tiny", 2, 3, 2
        lengths, d, batch, args.compile_rounds = (100, 1000), 16, 4, 1
    t0 = time.perf_counter()
    results = {"device": get_device().info.name, "date": time.strftime("%Y-%m-%d"),
               "preset": preset}
    print("GRU LM training step, vkgrad against JAX (lax.scan):", flush=True)
    results["gru_lm"] = bench_lm.bench_model("gru", preset, args, train_lm.load_text())
    print("compile time of the value and gradient of an RNN scan, by trip count:", flush=True)
    results["scan_compile"] = bench_compile(lengths, d, batch, args.compile_rounds)
    bench_lm.finish(results, t0, "control_flow.json")


if __name__ == "__main__":
    main()
