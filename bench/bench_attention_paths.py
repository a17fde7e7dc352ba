"""Attention as a user runs it: vg.nn.flash_attention's forward + backward as one jitted
program, on the path the planner takes (lowering/attention.py `scores_path`: written out as
matmul, softmax, matmul where the Target says so; else the flash kernels), on the flash kernels
alone, written out wherever it can be (unmasked attention), and torch SDPA fp32, in one run.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_attention_paths.py [--rounds 5] [--sweep]
Writes $OUT/attentionpaths_<date>.json. Here (lavapipe): --quick (small shapes, no torch).

vkgrad: GPU time of the whole program (vg.profile: Vulkan timestamps, the median of 5 runs)
of q, k, v, do -> (o, dq, dk, dv), i.e. `vg.vjp` of the attention; "flash" with the
attention_scores pass off (`disable_passes`), "written out" with the planner's size rules off
(lowering/attention.py's RULES set to 0; a causal mask with Lq > Lk stays flash). torch:
F.scaled_dot_product_attention, forward + torch.autograd.grad, CUDA events over 10 iterations
(TF32 off). Rounds interleave the four (planner, flash, written out, torch); medians and ranges.
--sweep adds B4 H8 unmasked L 256..2048 x D 32..128 and causal L1024/L2048 at D128: where
writing out starts to win. --causal runs the causal cases only (and L2048 D64/D128); --blocks
128,256 adds, for each causal case, the written-out path in blocks of that many query rows
(lowering/attention.py CAUSAL_QUERY_BLOCK; 0: one block); --set NAME=VALUE sets an integer
constant of lowering/attention.py for the whole run; --dtype f16|bf16 runs issue 25's cases
(HALF_CASES) in that dtype against torch SDPA in it (the flash path: f16 on the cooperative-
matrix flash kernels where they take it, lowering/attention_coop.py, else the f32 flash kernels
with 16-bit loads; written out: its products on the cooperative-matrix matmul where the Target
has it) and writes $OUT/attentionhalf_<date>_<dtype>.json.
Every vkgrad result is checked against torch's (or, with --quick, the interpreter's).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import vkgrad as vg  # noqa: E402
from vkgrad.lowering import attention as attention_planner  # noqa: E402
from vkgrad.runtime import get_device  # noqa: E402

from bench_attention import CASES, case_label, flops, torch_sdpa  # noqa: E402
from peers import cuda_torch  # noqa: E402

SWEEP = [(4, 8, L, D, False) for L in (256, 512, 1024, 2048) for D in (32, 64, 128)] + \
    [(4, 8, 2048, 128, True), (4, 8, 512, 128, True)]
QUICK = [(1, 2, 512, 64, False), (1, 2, 130, 32, True)]
CAUSAL = [(4, 8, 2048, 64, True), (4, 8, 2048, 128, True)]   # with --causal
TOL = 1e-4


def program(causal, scale, disable=()):
    def fb(q, k, v, do):
        o, vjp = vg.vjp(lambda q, k, v: vg.nn.flash_attention(q, k, v, causal=causal,
                                                               scale=scale), q, k, v)
        return (o,) + tuple(vjp(do))
    return vg.jit(fb, backend="vulkan", disable_passes=",".join(disable))


RULES = ("SCORES_MIN_HEAD_DIM", "SCORES_MIN_HEAD_DIM_TIMES_KEYS", "CAUSAL_SCORES_MIN_HEAD_DIM",
         "CAUSAL_SCORES_MIN_HEAD_DIM_TIMES_KEYS", "HALF_SCORES_MIN_HEAD_DIM_TIMES_KEYS",
         "HALF_CAUSAL_SCORES_MIN_HEAD_DIM_TIMES_KEYS", "COOP_FLASH_MAX_HEAD_DIM")
# --dtype f16|bf16: issue 25's cases (torch's f16 times there: L1024 D64 0.305 ms, L4096 D64
# 1.13, causal 0.73, L4096 D128 1.75, causal 1.12) and the LM small shape
HALF_CASES = [(4, 8, 1024, 64, False), (4, 8, 1024, 64, True), (4, 8, 4096, 64, False),
              (4, 8, 4096, 64, True), (4, 8, 1024, 128, False), (4, 8, 4096, 128, False),
              (4, 8, 4096, 128, True), (32, 8, 256, 32, True)]
HALF_TOL = {"f16": 2e-2, "bf16": 6e-2}      # relative to torch's result in the same dtype
NP_HALF = {"f16": np.float16, "bf16": vg.numpy.bfloat16}
TORCH_HALF = {"f16": "float16", "bf16": "bfloat16"}


class written_out_everywhere:
    """The planner's size rules off while a program compiles."""

    def __enter__(self):
        self.saved = {r: getattr(attention_planner, r) for r in RULES}
        for r in RULES:
            setattr(attention_planner, r, 0)

    def __exit__(self, *exc):
        for r, v in self.saved.items():
            setattr(attention_planner, r, v)


def kernels_of(prof):
    out = {}
    for r in prof.rows:
        out[r.kernel] = out.get(r.kernel, 0.0) + r.us
    return {k: round(v, 1) for k, v in out.items()}


def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "all": xs}


def rel_err(x, ref):
    x, ref = np.asarray(x, np.float64).reshape(-1), np.asarray(ref, np.float64).reshape(-1)
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-30))


def run_case(case, rounds, torch, blocks=(), dtype="f32"):
    B, H, L, D, causal = case
    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal((B, H, L, D)).astype(NP_HALF.get(dtype, np.float32))
                   for _ in range(4))
    tdtype = TORCH_HALF.get(dtype, "float32")
    scale = 1.0 / math.sqrt(D)
    args = (q, k, v, do)
    paths = {"planner": program(causal, scale), "flash": program(causal, scale,
                                                                 ("attention_scores",))}
    with written_out_everywhere():
        paths["written_out"] = program(causal, scale)
        paths["written_out"].lower(*args)              # compiled under the rules off
        saved = attention_planner.CAUSAL_QUERY_BLOCK
        for b in blocks if causal else ():             # causal in blocks of b query rows
            attention_planner.CAUSAL_QUERY_BLOCK = b
            paths[f"written_out_qb{b}"] = program(causal, scale)
            paths[f"written_out_qb{b}"].lower(*args)
        attention_planner.CAUSAL_QUERY_BLOCK = saved
    row = {"case": case_label(B, H, L, D, causal), "shape": [B, H, L, D], "causal": causal,
           "gflop": sum(flops(B, H, L, D, causal)) / 1e9}
    ref = None
    if torch is not None:
        _, _, tres = torch_sdpa(torch, q, k, v, do, B, H, L, D, causal, scale, tdtype)
        ref = [x.reshape(B, H, L, D) for x in tres]
    times = {name: [] for name in list(paths) + (["torch"] if torch is not None else [])}
    for name, fn in paths.items():
        names = [s.launch.name for s in fn.lower(*args).lowered.steps]
        row[name + "_written_out"] = not any(n.startswith("flash_att") for n in names)
        out = [np.asarray(x) for x in fn(*args)]
        if ref is None:
            ref = [np.asarray(x) for x in vg.jit(fn.fun, backend="numpy")(*args)]
        row[name + "_rel_err"] = max(rel_err(a, b) for a, b in zip(out, ref))
    for _ in range(rounds):
        for name, fn in paths.items():
            prof = vg.profile(fn, *args, runs=5)
            times[name].append(prof.total_us)
            row[name + "_kernels"] = kernels_of(prof)
        if torch is not None:
            both, fwd, _ = torch_sdpa(torch, q, k, v, do, B, H, L, D, causal, scale, tdtype)
            times["torch"].append(both * 1e3)
    row["us"] = {name: stats(xs) for name, xs in times.items()}
    row["ok"] = all(row[n + "_rel_err"] < HALF_TOL.get(dtype, TOL) for n in paths)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--causal", action="store_true", help="the causal cases only (and CAUSAL)")
    ap.add_argument("--blocks", default="", help="comma-separated CAUSAL_QUERY_BLOCK values: "
                    "causal cases also written out in blocks of each (written_out_qbN)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="set an integer constant of lowering/attention.py for the whole run "
                         "(CAUSAL_QUERY_BLOCK=512): the paths under another planner rule "
                         "(writes attentionpaths_<date>_NAME-VALUE.json)")
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16", "bf16"),
                    help="f16/bf16: issue 25's cases in that dtype against torch SDPA in it "
                         "(writes attentionhalf_<date>_<dtype>.json)")
    args = ap.parse_args()
    for item in args.set:
        name, value = item.split("=")
        if not isinstance(getattr(attention_planner, name, None), int):
            raise SystemExit(f"--set {item}: lowering/attention.py's {name} is not an integer")
        setattr(attention_planner, name, int(value))
    torch = None if args.quick else cuda_torch()
    cases = QUICK if args.quick else CASES + ([c for c in SWEEP if c not in CASES]
                                              if args.sweep else [])
    half = args.dtype != "f32"
    if half and not args.quick:
        cases = HALF_CASES
    if args.causal:
        cases = [c for c in cases if c[4]] + ([] if half else
                                              [c for c in CAUSAL if c not in cases])
    kind = "attentionhalf" if half else "attentionpaths"
    doc = {"kind": kind, "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
           "device": get_device().info.name, "dtype": args.dtype,
           "rounds": args.rounds, "set": args.set, "rows": []}
    for case in cases:
        row = run_case(case, args.rounds, torch,
                       [int(b) for b in args.blocks.split(",") if b], args.dtype)
        doc["rows"].append(row)
        us = row["us"]
        print(f"{row['case']:<24} " + "  ".join(f"{n} {x['median']:9.1f}" for n, x in us.items())
              + f"  planner written out: {row['planner_written_out']}  ok: {row['ok']}",
              flush=True)
    out = Path(os.environ.get("OUT", "."))
    name = "_".join([f"{kind}_{datetime.date.today().isoformat()}"]
                    + ([args.dtype] if half else [])
                    + [x.replace("=", "-") for x in args.set]) + ".json"
    out.joinpath(name).write_text(json.dumps(doc, indent=1))
    print("wrote", out / name)


if __name__ == "__main__":
    main()
