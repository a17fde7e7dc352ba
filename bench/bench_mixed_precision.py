"""The LM trained in f32, f16 (dynamic loss scale) and bf16 compute from the same init on the
same batches: the loss at equal steps, tokens/s, the f16 loss scale and skipped steps. The
issue's check: f16 and bf16 end within 2% of f32 (tests/test_mixed_precision.py runs a
60-step version on the interpreter).

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_mixed_precision.py --preset small
Here (lavapipe is slow: the interpreter by default): python bench/bench_mixed_precision.py
Writes one JSON object per precision to stdout, and --out FILE.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import vkgrad as vg  # noqa: E402
import train_lm  # noqa: E402


def run(precision: str, args, data) -> dict:
    cfg = train_lm.make_config(args.model, args.preset, steps=args.steps, precision=precision)
    step = vg.jit(train_lm.make_steps(cfg)[0].fun, backend=args.backend, donate_argnums=(0, 1))
    params = train_lm.init_params(cfg)
    state = train_lm.optimizer(cfg).init(params)
    losses, skipped, t0 = [], 0, None
    for i in range(cfg["steps"]):
        if i == 3:                      # after compiling and warming up
            vg.block_until_ready(params)
            t0 = time.perf_counter()
        x, y = train_lm.train_batch(data, cfg, i)
        before = _scale(state)        # (read now: the state is donated to the step)
        params, state, loss, _ = step(params, state, x, y)
        losses.append(float(np.asarray(loss)))
        skipped += _scale(state) < before
    seconds = time.perf_counter() - t0
    tokens = (cfg["steps"] - 3) * cfg["batch"] * cfg["seq"]
    return {"precision": precision, "model": args.model, "preset": args.preset,
            "steps": cfg["steps"], "backend": args.backend,
            "final_loss_mean10": float(np.mean(losses[-10:])), "losses": losses[::10],
            "tokens_per_s": tokens / seconds, "skipped_steps": skipped,
            "loss_scale": _scale(state)}


def _scale(state) -> float:
    return float(np.asarray(vg.mp.loss_scale_of(state).loss_scale))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="transformer", choices=sorted(train_lm.PRESETS))
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--backend", default="numpy", help="numpy or vulkan")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    data = train_lm.load_text()[0]
    results = [run(p, args, data) for p in train_lm.PRECISIONS]
    base = results[0]["final_loss_mean10"]
    for r in results:
        r["vs_f32"] = r["final_loss_mean10"] / base - 1
        print(json.dumps(r))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
