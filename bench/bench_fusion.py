"""What fusion (issue 9) did to the two training steps, passes on against the plan of loop
fusion alone (the plan before it, via the disable switch) and against no fusion at all:

  * MLP step 784-1024-1024-10, batch 256, cross-entropy, Adam: dispatches, GPU time
    (vg.profile, per kernel), wall time per step, peak bytes, saved bytes, equal results;
  * transformer block step (d_model 512, 8 heads, L 1024, batch 4, causal, plain softmax
    attention, examples/train_steps.py): the same;
  * compile time, trace to SPIR-V and pipelines, of both steps: cold (empty SPIR-V cache, no
    pipeline built yet) and warm (SPIR-V from the disk cache; the pipelines, cached per process,
    are built already), with the time in the trace and the passes apart.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_fusion.py
about 2 minutes; writes $OUT/fusion.json (bench/write_benchmarks.py makes BENCHMARKS.md of it).
--quick: small models (runs on lavapipe, to check the script itself).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import vkgrad as vg  # noqa: E402
from examples import train_steps as ts  # noqa: E402
from vkgrad.pipeline import Options, run_stages  # noqa: E402
from vkgrad.pipeline import LOOP_FUSION_ONLY, disabled_passes  # noqa: E402
from vkgrad.runtime import get_device, shaders  # noqa: E402
from vkgrad.tracer.pytree import tree_flatten  # noqa: E402

PLANS = {"fused": "", "loop_fusion_only": ",".join(LOOP_FUSION_ONLY),
         "nothing_fused": "fuse,remat,cse,simplify"}
START = time.perf_counter()


def elapsed() -> float:
    return time.perf_counter() - START


def setups(quick: bool) -> dict:
    if quick:
        mlp_sizes, mlp_batch, tf = [64, 96, 96, 10], 32, (32, 2, 64, 2)
    else:
        mlp_sizes, mlp_batch, tf = [784, 1024, 1024, 10], 256, (512, 8, 1024, 4)
    opt, step = ts.mlp_step()
    params, x, y = ts.mlp_data(mlp_sizes, mlp_batch)
    mlp = dict(step=step, opt=opt, params=params, x=x, y=y,
               config=dict(sizes=mlp_sizes, batch=mlp_batch))
    d, heads, length, batch = tf
    opt, step = ts.transformer_step(heads)
    params, x, y = ts.transformer_data(d, heads, length, batch)
    block = dict(step=step, opt=opt, params=params, x=x, y=y,
                 config=dict(d_model=d, heads=heads, L=length, batch=batch, causal=True,
                             attention="plain softmax"))
    return {"mlp": mlp, "transformer": block}


def plan_only(s, disable) -> dict:
    """Dispatches and memory of a plan, without compiling a shader."""
    program = vg.make_ir(s["step"])(s["params"], s["opt"].init(s["params"]), s["x"], s["y"])
    lw = run_stages(program, "plan", Options(target=get_device().target,
                                             disabled=disabled_passes(disable)))["plan"]
    return {"dispatches": len(lw.steps), "peak_bytes": lw.memory()["peak"],
            "saved_bytes": lw.saved_bytes()}


def compile_time(s) -> dict:
    """Seconds from the function to its recorded pipelines: trace, passes to the plan, then
    SPIR-V and pipelines (jit's first `lower`, which does all of it)."""
    args = (s["params"], s["opt"].init(s["params"]), s["x"], s["y"])
    t0 = time.perf_counter()
    program = vg.make_ir(s["step"])(*args)
    t1 = time.perf_counter()
    run_stages(program, "plan", Options(target=get_device().target))
    t2 = time.perf_counter()
    before = dict(shaders.stats)
    t3 = time.perf_counter()
    vg.jit(s["step"], donate_argnums=(0, 1)).lower(*args)
    t4 = time.perf_counter()
    return {"trace_s": t1 - t0, "passes_and_plan_s": t2 - t1, "total_s": t4 - t3,
            "spirv_compiled": shaders.stats["compiled"] - before["compiled"],
            "spirv_disk_hits": shaders.stats["disk_hits"] - before["disk_hits"]}


def run_plan(s, disable, steps, runs) -> dict:
    """Train `steps` steps (device-resident data, donated state), then profile."""
    jstep = vg.jit(s["step"], donate_argnums=(0, 1), disable_passes=disable)
    x, y = vg.device_put(s["x"]), vg.device_put(s["y"])
    params, state = s["params"], s["opt"].init(s["params"])
    losses = []
    for _ in range(3):
        params, state, loss = jstep(params, state, x, y)
        losses.append(float(loss))
    walls = []
    for _ in range(steps):
        t0 = time.perf_counter()
        params, state, loss = jstep(params, state, x, y)
        losses.append(float(loss))
        walls.append((time.perf_counter() - t0) * 1e6)
    stats = jstep.lower(params, state, x, y).stats()
    prof = vg.profile(jstep, params, state, x, y, runs=runs)
    return {"stats": stats, "gpu_total_us": prof.total_us, "profile": [r.__dict__ for r in prof.rows],
            "wall_median_us": statistics.median(walls), "losses": losses,
            "params": [np.asarray(p) for p in tree_flatten(params)[0]]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    device = get_device().info.name
    out = {"device": device, "date": time.strftime("%Y-%m-%d %H:%M"), "quick": args.quick}
    cases = setups(args.quick)

    # Compile times first, into an empty SPIR-V cache (cold), then again from disk (warm).
    cache = os.environ.get("VKGRAD_CACHE")
    with tempfile.TemporaryDirectory(prefix="vkgrad-cold-") as tmp:
        os.environ["VKGRAD_CACHE"] = tmp
        shaders._memory.clear()
        out["compile"] = {name: {"cold": compile_time(s)} for name, s in cases.items()}
        shaders._memory.clear()
        for name, s in cases.items():
            out["compile"][name]["warm"] = compile_time(s)
    if cache is None:
        os.environ.pop("VKGRAD_CACHE", None)
    else:
        os.environ["VKGRAD_CACHE"] = cache
    print(f"[{elapsed():.0f} s] compile: {json.dumps(out['compile'])}", flush=True)

    for name, s in cases.items():
        res = {"config": s["config"]}
        for plan, disable in PLANS.items():
            res[plan] = plan_only(s, disable)
        for plan in ("fused", "loop_fusion_only"):
            if elapsed() > 150:
                res[plan]["skipped"] = "time budget"
                continue
            runs = 5 if name == "transformer" else 20
            steps = max(5, args.steps // (4 if name == "transformer" else 1))
            r = run_plan(s, PLANS[plan], steps, runs)
            res[plan].update({k: v for k, v in r.items() if k != "params"})
            res[plan]["_params"] = r["params"]
            print(f"[{elapsed():.0f} s] {name} {plan}: {r['stats']['dispatches']} dispatches, "
                  f"GPU {r['gpu_total_us']:.1f} us, wall {r['wall_median_us']:.1f} us/step, "
                  f"peak {r['stats']['peak_bytes'] / 2**20:.1f} MB", flush=True)
        a, b = res["fused"].pop("_params", None), res["loop_fusion_only"].pop("_params", None)
        if a is not None and b is not None:
            res["max_param_diff"] = float(max(np.abs(p - q).max() for p, q in zip(a, b)))
            res["losses_equal"] = bool(np.allclose(res["fused"]["losses"],
                                                   res["loop_fusion_only"]["losses"],
                                                   rtol=1e-4, atol=1e-6))
        if "gpu_total_us" in res["fused"] and "gpu_total_us" in res["loop_fusion_only"]:
            res["gpu_time_ratio"] = res["fused"]["gpu_total_us"] / \
                res["loop_fusion_only"]["gpu_total_us"]
        out[name] = res

    for name in cases:
        r = out[name]
        line = (f"{name}: dispatches {r['loop_fusion_only']['dispatches']} -> "
                f"{r['fused']['dispatches']} (nothing fused: {r['nothing_fused']['dispatches']})")
        if "gpu_time_ratio" in r:
            line += (f"; GPU {r['loop_fusion_only']['gpu_total_us']:.1f} -> "
                     f"{r['fused']['gpu_total_us']:.1f} us ({r['gpu_time_ratio']:.2f}x)"
                     f"; losses equal: {r['losses_equal']}")
        print(line)
    print(f"done in {elapsed():.0f} s")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "fusion.json").write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
