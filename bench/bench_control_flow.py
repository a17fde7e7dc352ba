"""Loops: the GRU LM training step against JAX's (lax.scan), and the compile time of long scans
against JAX's, on the NVIDIA device machine.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_control_flow.py [--rounds 5] [--steps 20]
--quick: the tiny GRU preset and short scans (runs on lavapipe, to check the script).

1. The GRU LM of examples/train_lm.py (`--model gru`, the small preset: d 256, 2 layers,
   L 256, batch 32): bench_lm.py's comparison (the same model, parameters, optimizer and batches
   on both sides, JAX's written with jax.numpy and lax.scan; interleaved rounds of `--steps`
   steps, median tokens/s, both loop styles, the validation losses after the same steps).
2. Compile time against the trip count: the value and gradient of a scan over 10, 1,000 and
   10,000 steps, of two bodies: an RNN (h = tanh(h W + x), d 256, batch 32) and a GRU layer
   (vg.nn.gru, d 256, batch 32, JAX's bench/jax_nn.py gru). vkgrad (on Vulkan), with its loop
   bodies recorded once into a secondary command buffer executed per step ("secondary", what
   vkgrad does) and, to compare, recorded per step inline by kp's C++ ("inline"; kp patch
   0012): a fresh jit's first call (trace, passes, plan, recording the loop, the submission)
   less a later call, both until the call returned (the device's run left out; also reported
   with the runs, `_first_less_later`), the later calls' time with their runs, the ops recorded
   and the plan's dispatch count (the same for every length: the body is lowered once). JAX:
   the same for jax.jit(value_and_grad) of lax.scan. Interleaved, `--compile-rounds` each,
   medians; vkgrad's kernels are compiled before each length's rounds (XLA compiles every
   time). Both sides get their arguments on the device (vg.device_put, jax.device_put), and
   each round's vkgrad program is dropped before the next, so its scratch buffers (the stacked
   residuals: GBs at 10,000 steps) are in the device's pool for the next compile as XLA's
   allocator holds JAX's memory; "vkgrad_first_call_parts" is one more first call with the
   last program alive, timed in parts (stages, buffers by kind, recording, submission).
   "copiesK" records the loop bodies K times per secondary (vulkan.LOOP_COPIES).
   JSON keys: "vkgrad" (secondary), "vkgrad_inline", "vkgrad_copies64", "jax", each with
   `_run`, `_first_less_later`; `_recorded_ops`; "vkgrad_loop_recorded" (each loop body's
   kernels and barriers).
   --compile-only skips part 1; --bodies, --lengths, --loops, --no-jax, --d, --batch choose
   the rows.
3. A while loop in a scan body (50 steps, each a while of 1-8 iterations of a 64-wide tanh
   layer, batch 8): ms a call on Vulkan (bounded: 16 masked iterations a step) and on the
   interpreter.
4. --profile (alone): each loop kernel's GPU time a step (vg.profile), 1,000 steps of each body.
5. --profile-compile (alone): cProfile of the first calls at the shortest and the longest
   length: the functions whose own time grows most with the trip count.
JSON to $OUT/control_flow.json ($OUT/scan_compile.json with --compile-only,
$OUT/loop_profile.json with --profile).
"""

from __future__ import annotations

import collections
import gc
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


def gru_inputs(n, d, batch, seed=0):
    rng = np.random.default_rng(seed)
    return (vg.nn.init_gru_cell(rng, d, d),
            (rng.standard_normal((batch, n, d)) * 0.1).astype(np.float32))


def vk_gru_loss(p, x):
    return vg.nn.gru(p, x)[1].sum()


def jax_gru_loss_fn():
    import jax_nn
    return lambda p, x: jax_nn.gru(p, x).sum()


# body -> (inputs(n, d, batch), vkgrad loss, JAX loss maker, argnums of the gradient)
BODIES = {"rnn": (rnn_inputs, vk_loss, jax_loss_fn, (0, 2)),
          "gru": (gru_inputs, vk_gru_loss, jax_gru_loss_fn, 0)}


def on_device(args):
    """The arguments as Arrays on the Vulkan device the jitted calls run on."""
    return vg.device_put(args, get_device().info.index)


def time_first_and_again(make, args, ready, again=3):
    """A fresh jitted function's first call and `again` later ones: {first, first_host,
    later, later_host} (s; `_host`: until the call returned, before waiting for its result,
    the median for the later calls) and the compiled thing. The first call's excess over a
    later one is its compile; the host times leave the device's run out of it."""
    f = make()
    t0 = time.perf_counter()
    r = f(*args)
    t1 = time.perf_counter()
    ready(r)
    first, first_host = time.perf_counter() - t0, t1 - t0
    later, later_host = [], []
    for _ in range(again):
        t0 = time.perf_counter()
        r = f(*args)
        t1 = time.perf_counter()
        ready(r)
        later.append(time.perf_counter() - t0)
        later_host.append(t1 - t0)
    return {"first": first, "first_host": first_host, "later": statistics.median(later),
            "later_host": statistics.median(later_host)}, f


def inline_loops():
    """Record each loop's body trip-count times inline (kp's record_loop(secondary=False)),
    instead of once into a secondary command buffer executed trip-count times: for comparing
    the two (kp patch 0012)."""
    import kp
    once = kp.Sequence.record_loop
    kp.Sequence.record_loop = lambda self, ops, count, secondary=True, barriers=(): once(
        self, ops, count, False, list(barriers))
    return lambda: setattr(kp.Sequence, "record_loop", once)


# the compile stages Compiled.times has (the rest of its keys are counts)
STAGES = ("trace", "grad", "optimized", "fused", "plan", "shaders", "pipelines", "buffers")


def first_call_parts(make, args, ready):
    """Where a fresh jit's first call spends its host time (one more first call, timed apart
    from the measured rounds, whose wrappers would slow): the compile stages (Compiled.times:
    trace, passes, plan, shaders, pipelines, the runner's own buffers), the buffers allocated
    during the call by kind (count, bytes, s), recording (the sequence, and within it the
    loops' record_loop: kp patch 0012), the submission (eval_async); s, from
    time.perf_counter around each."""
    import kp
    from vkgrad.runtime import inflight, vulkan
    parts = collections.defaultdict(float)

    def timed(owner, name, key):
        orig = getattr(owner, name)

        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return orig(*a, **k)
            finally:
                parts[key(*a, **k) if callable(key) else key] += time.perf_counter() - t0
        setattr(owner, name, wrapper)
        return lambda: setattr(owner, name, orig)

    def buffer_kind(self, device, size, dtype, kind="device"):
        parts[f"buffers_{kind}_n"] += 1
        parts[f"buffers_{kind}_bytes"] += max(vulkan._words(int(size), vulkan.device_dtype(
            dtype)), 1) * 4
        return f"buffers_{kind}_s"
    undo = [timed(vulkan.Buffer, "__init__", buffer_kind),
            timed(vulkan.Executable, "_record", "record_s"),
            timed(kp.Sequence, "record_loop", "record_loop_s"),
            timed(inflight.InFlight, "submit", "submit_s")]
    try:
        f = make()
        t0 = time.perf_counter()
        r = f(*args)
        parts["first_host_s"] = time.perf_counter() - t0
        ready(r)
    finally:
        for u in reversed(undo):
            u()
    compiled = f.lower(*args)
    parts.update({f"stage_{k}_s": v for k, v in compiled.times.items() if k in STAGES})
    return dict(parts)


def loop_mode(mode):
    """Set up a way of recording loops: "secondary" (vkgrad's default), "inline"
    (inline_loops), "copiesK" (the body K times in its secondary: vulkan.LOOP_COPIES);
    returns the function that restores the default."""
    from vkgrad.runtime import vulkan
    if mode == "inline":
        return inline_loops()
    if mode.startswith("copies"):
        default = vulkan.LOOP_COPIES
        vulkan.LOOP_COPIES = int(mode[len("copies"):])
        return lambda: setattr(vulkan, "LOOP_COPIES", default)
    return lambda: None


def bench_compile(body, lengths, d, batch, rounds, loops=("secondary",), with_jax=True):
    """Compile (first call less a later one: until the calls returned, and with their runs) and
    call time of the value and gradient of `body` over each length, vkgrad with each way of
    recording its loop (`loops`), JAX's jit of the same; interleaved, `rounds` each, medians."""
    make_inputs, vk_fn, jax_fn, argnums = BODIES[body]
    res = {"body": body, "d": d, "batch": batch}
    jax = None
    if with_jax:
        try:
            import jax
            jax.config.update("jax_default_matmul_precision", "highest")
            jloss = jax_fn()
        except ImportError as e:
            print(f"  no JAX here ({e}): vkgrad only", flush=True)
            jax = None
    for n in lengths:
        # on the device before the calls, as JAX's (jax.device_put below): the calls time
        # the program, not uploading its arguments
        host = make_inputs(n, d, batch)
        args = on_device(host)
        per = collections.defaultdict(list)
        # the kernels compiled first (the SPIR-V and pipeline caches; the ones outside the loop
        # depend on the length): what is left of a first call is the trace, the passes, the
        # plan and the recording
        np.asarray(vg.jit(vg.value_and_grad(vk_fn, argnums=argnums), backend="vulkan")(
            *args)[0])
        for _ in range(rounds):
            for mode in loops:
                # the previous program gone, its buffers back in the pool (runners.py: a
                # program's scratch buffers are pooled), as XLA's allocator holds JAX's
                f = lowered = None
                gc.collect()
                restore = loop_mode(mode)
                try:
                    ops = vg.runtime_stats()["recorded_ops"]
                    t, f = time_first_and_again(
                        lambda: vg.jit(vg.value_and_grad(vk_fn, argnums=argnums),
                                       backend="vulkan"),
                        args, lambda r: np.asarray(r[0]))
                    ops = vg.runtime_stats()["recorded_ops"] - ops
                finally:
                    restore()
                key = "vkgrad" if mode == "secondary" else f"vkgrad_{mode}"
                per[key].append(t["first_host"] - t["later_host"])
                per[f"{key}_first_less_later"].append(t["first"] - t["later"])
                per[f"{key}_run"].append(t["later"])
                per[f"{key}_recorded_ops"].append(ops)
            lowered = f.lower(*args)
            if jax is not None:
                jargs = jax.tree_util.tree_map(jax.device_put, host)
                t, _ = time_first_and_again(
                    lambda: jax.jit(jax.value_and_grad(jloss, argnums=argnums)), jargs,
                    lambda r: r[0].block_until_ready())
                per["jax"].append(t["first_host"] - t["later_host"])
                per["jax_first_less_later"].append(t["first"] - t["later"])
                per["jax_run"].append(t["later"])
        row = res[str(n)] = {k: {"median_s": statistics.median(v), "all_s": v}
                             for k, v in per.items() if not k.endswith("recorded_ops")}
        row.update({k: v[-1] for k, v in per.items() if k.endswith("recorded_ops")})
        row["vkgrad_first_call_parts"] = first_call_parts(
            lambda: vg.jit(vg.value_and_grad(vk_fn, argnums=argnums), backend="vulkan"),
            args, lambda r: np.asarray(r[0]))
        row["vkgrad_dispatches_planned"] = lowered.stats().get("dispatches")
        lw = lowered.lowered      # each loop body's dispatches (lowering/loops.py)
        row["vkgrad_loop_bodies"] = [[s.launch.name for s in lw.steps[a:b]]
                                     for a, b, _ in lw.loops] if lw is not None else None
        row["vkgrad_backend"] = lowered.backend
        ex = getattr(lowered.runner, "last_run", None)   # each loop body's kernels and barriers
        row["vkgrad_loop_recorded"] = ex.loop_bodies() if ex is not None else None
        keys = {mode: "vkgrad" if mode == "secondary" else f"vkgrad_{mode}" for mode in loops}
        words = [f"{mode} compile {row[k]['median_s']:.3f} s (a call "
                 f"{row[f'{k}_run']['median_s'] * 1e3:.1f} ms, "
                 f"{row[f'{k}_recorded_ops']} ops recorded)" for mode, k in keys.items()]
        if per["jax"]:
            words.append(f"JAX {row['jax']['median_s']:.3f} s (a call "
                         f"{row['jax_run']['median_s'] * 1e3:.1f} ms)")
        print(f"  {body} {n} steps: vkgrad " + ", ".join(words)
              + f"; vkgrad plans {row['vkgrad_dispatches_planned']} dispatches "
                f"({lowered.backend}), loop bodies of "
                f"{[len(b) for b in row['vkgrad_loop_bodies'] or ()]}", flush=True)
        parts = row["vkgrad_first_call_parts"]
        print("    a first call's parts (ms; buffers: count/MB): " + ", ".join(
            f"{k[:-2]} {v * 1e3:.1f}" if k.endswith("_s") else
            f"{k[:-6]} {v / 1e6:.1f} MB" if k.endswith("_bytes") else f"{k} {v:.0f}"
            for k, v in parts.items()), flush=True)
    return res


def profile_loop(body, n, d, batch, runs=3):
    """Where a step's time goes: vg.profile (GPU timestamps) of the value and gradient of
    `body` over n steps, each loop body's kernels with their median GPU us per step (timestamps
    record the loop inline, the same dispatches and barriers as the secondary)."""
    make_inputs, vk_fn, _, argnums = BODIES[body]
    f = vg.jit(vg.value_and_grad(vk_fn, argnums=argnums), backend="vulkan")
    args = make_inputs(n, d, batch)
    lw = f.lower(*args).lowered
    prof = vg.profile(f, *args, runs=runs)
    res = {"body": body, "steps": n, "d": d, "batch": batch, "total_us": prof.total_us,
           "loops": []}
    for a, b, count in lw.loops:
        kernels = [(r.kernel, r.primitives, r.us / count) for r in prof.rows[a:b]]
        res["loops"].append({"count": count, "us_per_step": sum(k[2] for k in kernels),
                             "kernels": [{"kernel": k, "primitives": p, "us_per_step": us}
                                         for k, p, us in kernels]})
        print(f"  {body}, a loop of {count} steps: {sum(k[2] for k in kernels):.1f} us a step: "
              + ", ".join(f"{k} {us:.1f}" for k, _, us in kernels), flush=True)
    return res


def profile_compile(body, lengths, d, batch, rounds=3, top=15):
    """What a first call spends more time on at the longer trip count: cProfile of a fresh
    jit's first call (until it returns) of the value and gradient of `body` at each length,
    interleaved rounds; the functions whose own time (median over the rounds) grows most from
    the first length to the last, in ms, with the first-call-less-later times. Every program
    stays alive to the end, so each first call allocates its buffers (none from the pool)."""
    import cProfile
    import pstats
    make_inputs, vk_fn, _, argnums = BODIES[body]
    own = {n: collections.defaultdict(list) for n in lengths}
    first = {n: [] for n in lengths}
    inputs = {n: on_device(make_inputs(n, d, batch)) for n in lengths}
    for n in lengths:      # the kernels compiled first, as bench_compile does
        np.asarray(vg.jit(vg.value_and_grad(vk_fn, argnums=argnums), backend="vulkan")(
            *inputs[n])[0])
    alive = []   # every program kept, so each first call allocates its buffers afresh
    for _ in range(rounds):
        for n in lengths:
            f = vg.jit(vg.value_and_grad(vk_fn, argnums=argnums), backend="vulkan")
            alive.append(f)
            prof = cProfile.Profile()
            t0 = time.perf_counter()
            prof.enable()
            r = f(*inputs[n])
            prof.disable()
            t1 = time.perf_counter()
            np.asarray(r[0])
            t2 = time.perf_counter()
            r = f(*inputs[n])
            first[n].append((t1 - t0) - (time.perf_counter() - t2))   # until they returned
            np.asarray(r[0])
            for (file, line, name), (_, _, tt, _, _) in pstats.Stats(prof).stats.items():
                own[n][f"{Path(file).name}:{line}({name})"].append(tt)
    lo, hi = lengths[0], lengths[-1]
    med = lambda n, k: statistics.median(own[n][k]) if own[n].get(k) else 0.0
    grows = sorted(((med(hi, k) - med(lo, k)) * 1e3, k) for k in set(own[lo]) | set(own[hi]))
    res = {"body": body, "lengths": list(lengths),
           "first_less_later_s": {str(n): statistics.median(v) for n, v in first.items()},
           "grows_ms": [{"function": k, "ms": ms} for ms, k in reversed(grows[-top:])]}
    print(f"  {body}: first call less a later one " + ", ".join(
        f"{n} steps {v * 1e3:.0f} ms" for n, v in res["first_less_later_s"].items())
        + f"; own time growing most from {lo} to {hi} steps: " + ", ".join(
        f"{g['function']} +{g['ms']:.1f} ms" for g in res["grows_ms"][:6]), flush=True)
    return res


def bench_nested_while(steps, d, batch, rounds):
    """A while loop in a scan body (vkgrad/execution/segmented.py, bounded): `steps` steps,
    each a while of 1-8 iterations of x = tanh(x @ w) + 0.5 (x f32[batch, d]), run on Vulkan
    (16 masked iterations a step, one submission) and on the interpreter; interleaved rounds of
    5 calls, median ms a call."""
    from vkgrad import lax
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)

    def step(x, n):
        i, y = lax.while_loop(lambda c: c[0] < n,
                              lambda c: (c[0] + 1, vnp.tanh(c[1] @ w) + 0.5), (0, x))
        return y * 0.5, i
    fun = lambda x, ns: lax.scan(step, x, ns)
    args = (rng.standard_normal((batch, d)).astype(np.float32),
            rng.integers(1, 9, steps).astype(np.int32))
    fs = {b: vg.jit(fun, backend=b) for b in ("vulkan", "numpy")}
    for f in fs.values():
        np.asarray(f(*args)[0])
    per = collections.defaultdict(list)
    for _ in range(rounds):
        for b, f in fs.items():
            for _ in range(5):
                t0 = time.perf_counter()
                np.asarray(f(*args)[0])
                per[b].append(time.perf_counter() - t0)
    res = {"steps": steps, "d": d, "batch": batch,
           "fallback": fs["vulkan"].lower(*args).fallback_reason,
           **{f"{b}_ms": statistics.median(v) * 1e3 for b, v in per.items()}}
    print(f"  {steps} steps: Vulkan {res['vulkan_ms']:.2f} ms a call, interpreter "
          f"{res['numpy_ms']:.2f} ms", flush=True)
    return res


def main():
    ap = bench_lm.round_options(__doc__.split("\n\n")[0])
    ap.add_argument("--compile-rounds", type=int, default=3)
    ap.add_argument("--compile-only", action="store_true", help="only the compile rows")
    ap.add_argument("--bodies", default="rnn,gru", help="loop bodies of the compile rows")
    ap.add_argument("--lengths", help="trip counts of the compile rows (10,1000,10000; "
                    "--quick: 10,100,1000)")
    ap.add_argument("--loops", default="secondary,inline,copies64",
                    help="ways vkgrad records a loop's body, compared in the compile rows "
                    "(secondary, inline, copiesK)")
    ap.add_argument("--no-jax", action="store_true", help="vkgrad only in the compile rows")
    ap.add_argument("--d", type=int, help="width of the compile rows' bodies (256; --quick: 16)")
    ap.add_argument("--batch", type=int, help="batch of the compile rows (32; --quick: 4)")
    ap.add_argument("--quick", action="store_true", help="tiny preset, short scans")
    ap.add_argument("--profile-compile", action="store_true",
                    help="only cProfile of the first calls at the shortest and longest length")
    ap.add_argument("--profile", action="store_true",
                    help="only the GPU time of each loop kernel per step (vg.profile), "
                    "1,000 steps of each body")
    args = ap.parse_args()
    preset, lengths, d, batch = "small", (10, 1000, 10000), 256, 32
    if args.quick:
        preset, args.rounds, args.steps, args.warmup = "tiny", 2, 3, 2
        lengths, d, batch, args.compile_rounds = (10, 100, 1000), 16, 4, 1
    if args.lengths:
        lengths = tuple(map(int, args.lengths.split(",")))
    d, batch = args.d or d, args.batch or batch
    t0 = time.perf_counter()
    results = {"device": get_device().info.name, "date": time.strftime("%Y-%m-%d"),
               "preset": preset}
    if args.profile_compile:
        for body in args.bodies.split(","):
            print(f"what grows with the trip count in a first call ({body}):", flush=True)
            results[f"compile_profile_{body}"] = profile_compile(
                body, (lengths[0], lengths[-1]), d, batch, args.compile_rounds)
        bench_lm.finish(results, t0, "compile_profile.json")
        return
    if args.profile:
        for body in args.bodies.split(","):
            print(f"GPU time a step ({body}, value and gradient, vg.profile):", flush=True)
            results[f"loop_profile_{body}"] = profile_loop(body, 100 if args.quick else 1000,
                                                           d, batch)
        bench_lm.finish(results, t0, "loop_profile.json")
        return
    if not args.compile_only:
        print("GRU LM training step, vkgrad against JAX (lax.scan):", flush=True)
        results["gru_lm"] = bench_lm.bench_model("gru", preset, args, train_lm.load_text())
    loops = tuple(args.loops.split(","))
    for body in args.bodies.split(","):
        print(f"compile time of the value and gradient of a scan ({body}), by trip count:",
              flush=True)
        results[f"scan_compile_{body}" if body != "rnn" else "scan_compile"] = bench_compile(
            body, lengths, d, batch, args.compile_rounds, loops, with_jax=not args.no_jax)
    print("a while loop in a scan body, on Vulkan (bounded) and on the interpreter:", flush=True)
    results["nested_while"] = bench_nested_while(50, 64, 8, args.compile_rounds)
    # write_benchmarks.py reads control_flow*.json, which has the GRU LM
    bench_lm.finish(results, t0, "scan_compile.json" if args.compile_only else
                    "control_flow.json")


if __name__ == "__main__":
    main()
