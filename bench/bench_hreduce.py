"""Horizontal fusion of reductions (fuse_horizontal_reductions, plan_horizontal_reduce): GPU
time from Vulkan timestamps (vg.profile, median of --runs) of

- the LM small transformer step (examples/train_lm.py, clipping at global norm 1.0) with the
  pass on, off, and on for members of at most 2**20 elements only (MAX_MEMBER_ELEMENTS: the
  bias gradients' column sums, 2M elements each, then keep their own kernels): dispatches,
  the step's kernel sum, and the reduction kernels' dispatches and time (every launch named
  reduce_*), and the horizontal launches' own;
- the global norm alone of the same 51 gradient leaves (random values), with the pass off and
  on at several HORIZONTAL_GROUP_ELEMENTS (the elements of one output tile a workgroup
  reduces before a member is split): which default to keep.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_hreduce.py [--runs 20]
--quick: the tiny preset and 3 runs (runs on lavapipe, to check the script). JSON to
$OUT/hreduce.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

import vkgrad as vg  # noqa: E402
from vkgrad.lowering import kernels  # noqa: E402
from vkgrad.runtime import get_device  # noqa: E402
from vkgrad.tracer.pytree import tree_leaves  # noqa: E402

import train_lm  # noqa: E402

PASS = "fuse_horizontal_reductions"
# the module of the pass
horizontal_reductions = importlib.import_module("vkgrad.lowering.fusion.horizontal_reductions")
ELEMENTS = (2048, 4096, 8192, 16384, 65536)


def summary(prof, dispatches) -> dict:
    red = [r for r in prof.rows if r.kernel.startswith("reduce_")]
    hor = [r for r in red if "horizontal" in r.kernel]
    return {"dispatches": dispatches, "gpu_us": prof.total_us,
            "reduce_dispatches": len(red), "reduce_us": sum(r.us for r in red),
            "horizontal_dispatches": len(hor), "horizontal_us": sum(r.us for r in hor),
            "horizontal": [(r.kernel, r.shapes[:60], r.us) for r in hor]}


def step_profile(preset, runs, disable) -> dict:
    cfg = train_lm.make_config("transformer", preset, steps=10)
    step = vg.jit(train_lm.make_steps(cfg)[0].fun, disable_passes=disable, backend="vulkan")
    params = train_lm.init_params(cfg)
    opt = train_lm.optimizer(cfg).init(params)
    x, y = train_lm.train_batch(train_lm.load_text()[0], cfg, 0)
    args = (vg.device_put(params), vg.device_put(opt), vg.device_put(x), vg.device_put(y))
    n = step.lower(*args).stats()["dispatches"]
    return summary(vg.profile(step, *args, runs=runs), n)


def norm_profile(leaves, runs, disable) -> dict:
    f = vg.jit(lambda *xs: vg.optim.global_norm(list(xs)), disable_passes=disable,
               backend="vulkan")
    n = f.lower(*leaves).stats()["dispatches"]
    out = summary(vg.profile(f, *leaves, runs=runs), n)
    ref = np.sqrt(sum(np.sum(np.asarray(x, np.float64) ** 2) for x in leaves))
    out["rel_err"] = abs(float(f(*leaves)) - ref) / ref
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    preset = "tiny" if args.quick else "small"
    runs = 3 if args.quick else args.runs
    t0 = time.perf_counter()
    res = {"device": get_device().info.name, "date": time.strftime("%Y-%m-%d"),
           "preset": preset, "runs": runs}
    for name, disable, cap in (("step_on", "", None), ("step_off", PASS, None),
                               ("step_on_small_members", "", 1 << 20)):
        horizontal_reductions.MAX_MEMBER_ELEMENTS = cap
        res[name] = step_profile(preset, runs, disable)
        horizontal_reductions.MAX_MEMBER_ELEMENTS = None
        r = res[name]
        print(f"LM {preset} step, {PASS} {'off' if disable else 'on'}"
              f"{f', members of at most {cap} elements' if cap else ''}: {r['dispatches']} "
              f"dispatches, kernels {r['gpu_us']:.0f} us; reductions {r['reduce_dispatches']} "
              f"dispatches {r['reduce_us']:.0f} us (horizontal {r['horizontal_dispatches']}: "
              f"{r['horizontal_us']:.0f} us)", flush=True)
        for k, shapes, us in r["horizontal"]:
            print(f"    {k:<28} {shapes:<60} {us:8.1f} us", flush=True)
    cfg = train_lm.make_config("transformer", preset, steps=10)
    rng = np.random.default_rng(0)
    leaves = [vg.device_put(rng.standard_normal(np.shape(p)).astype(np.float32) * 1e-2)
              for p in tree_leaves(train_lm.init_params(cfg))]
    res["norm_leaves"] = len(leaves)
    res["norm_off"] = norm_profile(leaves, runs, PASS)
    print(f"global norm of {len(leaves)} leaves, pass off: {res['norm_off']['dispatches']} "
          f"dispatches, {res['norm_off']['gpu_us']:.1f} us", flush=True)
    default = kernels.HORIZONTAL_GROUP_ELEMENTS
    res["norm_on"] = {}
    for e in ELEMENTS:
        kernels.HORIZONTAL_GROUP_ELEMENTS = e
        r = res["norm_on"][e] = norm_profile(leaves, runs, "")
        print(f"global norm, pass on, {e:6d} elements per workgroup: {r['dispatches']} "
              f"dispatches, {r['gpu_us']:.1f} us (rel. error {r['rel_err']:.1e})", flush=True)
    kernels.HORIZONTAL_GROUP_ELEMENTS = default
    res["wall_s"] = time.perf_counter() - t0
    print(f"total {res['wall_s']:.0f} s", flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, "hreduce.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
