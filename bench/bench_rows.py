"""Row kernels (fused[kind=row], lowering/fusion/rows.py) against the kernels they replace:
a layer norm forward, its value and gradient (x, weight, bias), and a softmax written in jnp,
with fuse_rows on and off (VKGRAD_DISABLE_PASSES' switch), and the row kernel at other
elements per thread (kernels.ROW_NV, which sets its workgroup size: n / NV threads).
GPU time per kernel from Vulkan timestamps (vg.profile, median of its runs), in interleaved
rounds; each row also says the dispatches and the largest difference from the interpreter.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_rows.py [--rounds 3]
JSON to $OUT/rows.json (or --out). --quick: small shapes, one round (lavapipe: a check of
the script).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import vkgrad as vg  # noqa: E402
import vkgrad.numpy as vnp  # noqa: E402
from vkgrad.lowering import kernels  # noqa: E402


def layer_norm(x, w, b):
    return vg.nn.layer_norm(x, w, b)


def ln_value_and_grad(x, w, b):
    return vg.value_and_grad(lambda x, w, b: vnp.sum(vg.nn.layer_norm(x, w, b) * x),
                             argnums=(0, 1, 2))(x, w, b)


def softmax_by_hand(x, w, b):
    e = vnp.exp(x - vnp.max(x, axis=-1, keepdims=True))
    return e / vnp.sum(e, axis=-1, keepdims=True)


FUNCTIONS = {"layer_norm": layer_norm, "layer_norm_value_and_grad": ln_value_and_grad,
             "softmax_jnp": softmax_by_hand}
# (name, disabled passes, ROW_NV); rows_nv8 is the default
VARIANTS = (("rows_off", "fuse_rows", 8), ("rows_nv8", "", 8), ("rows_nv4", "", 4),
            ("rows_nv16", "", 16))


def one(fn, args, disable, nv, runs):
    default = kernels.ROW_NV
    kernels.ROW_NV = nv
    try:
        j = vg.jit(fn, backend="vulkan", disable_passes=disable)
        prof = vg.profile(j, *args, runs=runs)
        got = vg.tree_util.tree_leaves(j(*args))
    finally:
        kernels.ROW_NV = default
    want = vg.tree_util.tree_leaves(vg.run_program(vg.make_ir(fn)(*args), *args))
    err = max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64))))
              for g, w in zip(got, want))
    return {"gpu_us": prof.total_us, "wall_us": prof.submission_us, "dispatches": len(prof.rows),
            "kernels": [(r.kernel, r.primitives, r.shapes, round(r.us, 2)) for r in prof.rows],
            "max_abs_err": err}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20, help="timed runs per vg.profile")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "rows.json"))
    args = ap.parse_args(argv)
    shapes = [(64, 48), (16, 256)] if args.quick else [(8192, 256), (8192, 1024), (4096, 4096)]
    rounds, runs = (1, 2) if args.quick else (args.rounds, args.runs)
    rng = np.random.default_rng(0)
    results = []
    for shape in shapes:
        n = shape[-1]
        data = (rng.standard_normal(shape).astype(np.float32),
                rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32))
        data = tuple(vg.device_put(a) for a in data)
        for name, fn in FUNCTIONS.items():
            times = {v: [] for v, _, _ in VARIANTS}
            last = {}
            for _ in range(rounds):
                for v, disable, nv in VARIANTS:
                    if n > kernels.ROW_MAX:
                        continue
                    last[v] = one(fn, data, disable, nv, runs)
                    times[v].append(last[v]["gpu_us"])
            row = {"case": name, "shape": list(shape)}
            for v, r in last.items():
                row[v] = dict(r, gpu_us=statistics.median(times[v]), gpu_us_rounds=times[v])
            results.append(row)
            print(f"{name} {shape}: " + ", ".join(
                f"{v} {row[v]['gpu_us']:.1f} us ({row[v]['dispatches']} dispatches, "
                f"err {row[v]['max_abs_err']:.1e})" for v in last), flush=True)
    with open(args.out, "w") as f:
        json.dump({"device": str(vg.devices()[0]), "results": results}, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
