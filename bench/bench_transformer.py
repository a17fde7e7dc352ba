"""The transformer block training step (d_model 512, 8 heads, L 1024, batch 4, causal, fp32,
Adam): vkgrad's jitted step against JAX's jitted step, in interleaved rounds in one process.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_transformer.py [--rounds 5] [--steps 20]
--quick: a small block (runs on lavapipe, to check the script; no peers).

Both sides compute the same model (vkgrad.nn.attention_block: pre-norm, causal attention, GELU
MLP) and loss (mean square against a target), Adam in the step, parameters and optimizer state
donated / resident. vkgrad runs it twice: attention through the flash-attention kernels, and
"plain" (softmax(q k^T) v written with vnp, materialising the [B, H, L, L] scores). JAX writes
attention the plain way (XLA fuses it; `jax_default_matmul_precision="highest"`).

The host is noisy, so rounds alternate (vkgrad flash, vkgrad plain, JAX, vkgrad flash, ...):
each round is `--steps` steps with ONE sync at the end (the loop a user trains with), and also
the same with a sync after every step. Reported: per-step median and range over rounds, the
ratio of medians, vkgrad's GPU time per step (vg.profile) and dispatch count; JSON to $OUT.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vkgrad as vg  # noqa: E402
import vkgrad.nn as nn  # noqa: E402
import vkgrad.numpy as vnp  # noqa: E402
from vkgrad.runtime import get_device  # noqa: E402
from examples.train_steps import plain_attention_block  # noqa: E402

LR = 1e-4


def vkgrad_step(block, heads):
    opt = vg.optim.adam(LR)

    def loss_fn(params, x, y):
        return vnp.mean(vnp.square(block(params, x, heads) - y))

    def step(params, opt_state, x, y):
        loss, grads = vg.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = vg.optim.apply_updates(params, updates)
        return params, opt_state, loss

    return opt, vg.jit(step, donate_argnums=(0, 1))


def jax_step(heads):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_default_matmul_precision", "highest")

    from jax_nn import attention_block   # vkgrad.nn.attention_block in jax.numpy

    def block(params, x):
        return attention_block(params, x, heads)

    def loss_fn(params, x, y):
        return jnp.mean(jnp.square(block(params, x) - y))

    b1, b2, eps = 0.9, 0.999, 1e-8

    @jax.jit
    def step(params, opt_state, x, y):
        count, mu, nu = opt_state
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        count = count + 1.0
        mu = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
        nu = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
        c1, c2 = 1 / (1 - b1 ** count), 1 / (1 - b2 ** count)
        params = jax.tree_util.tree_map(
            lambda p, m, v: p - LR * (m * c1) / (jnp.sqrt(v * c2) + eps), params, mu, nu)
        return params, (count, mu, nu), loss

    return jax, step


def summarize(xs):
    return {"median_us": statistics.median(xs), "min_us": min(xs), "max_us": max(xs),
            "rounds": len(xs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    d, heads, length, batch = (32, 2, 64, 2) if args.quick else (512, 8, 1024, 4)
    rng = np.random.default_rng(0)
    params0 = nn.init_attention_block(rng, d)
    x = rng.standard_normal((batch, length, d)).astype(np.float32)
    y = rng.standard_normal((batch, length, d)).astype(np.float32)
    results = {"config": dict(d_model=d, heads=heads, L=length, batch=batch, steps=args.steps,
                              rounds=args.rounds), "device": get_device().info.name,
               "date": time.strftime("%Y-%m-%d")}

    sides = {}
    xd, yd = vg.device_put(x), vg.device_put(y)
    for name, block in (("vkgrad_flash", nn.attention_block),
                        ("vkgrad_plain", plain_attention_block)):
        opt, step = vkgrad_step(block, heads)
        state = {"p": vg.device_put(params0)}
        state["o"] = vg.device_put(opt.init(params0))
        t0 = time.perf_counter()
        state["p"], state["o"], loss = step(state["p"], state["o"], xd, yd)
        float(loss)
        compile_s = time.perf_counter() - t0
        lowered = step.lower(state["p"], state["o"], xd, yd)
        prof = vg.profile(step, state["p"], state["o"], xd, yd, runs=5)

        def run(n, sync_every, state=state, step=step):
            for _ in range(n):
                state["p"], state["o"], loss = step(state["p"], state["o"], xd, yd)
                if sync_every:
                    float(loss)
            return float(loss)

        sides[name] = run
        results[name] = {"first_call_s": compile_s, "dispatches": lowered.stats()["dispatches"],
                         "gpu_us": prof.total_us, "profile": str(prof)}
        print(f"{name}: first call {compile_s:.2f} s, {lowered.stats()['dispatches']} dispatches,"
              f" GPU {prof.total_us:.0f} us/step", flush=True)
        print(prof, flush=True)

    if not args.quick:
        jax, jstep = jax_step(heads)
        jp = jax.device_put(params0)
        zeros = jax.tree_util.tree_map(lambda a: jax.numpy.zeros_like(a), jp)
        jstate = {"p": jp, "o": (jax.numpy.zeros(()), zeros, zeros)}
        jx, jy = jax.device_put(x), jax.device_put(y)

        def jrun(n, sync_every):
            for _ in range(n):
                jstate["p"], jstate["o"], loss = jstep(jstate["p"], jstate["o"], jx, jy)
                if sync_every:
                    float(loss)
            return float(loss)

        jrun(2, True)
        sides["jax"] = jrun

    for mode in ("sync_at_end", "sync_every_step"):
        per = {k: [] for k in sides}
        for _ in range(args.rounds):
            for name, run in sides.items():
                t0 = time.perf_counter()
                run(args.steps, mode == "sync_every_step")
                per[name].append((time.perf_counter() - t0) / args.steps * 1e6)
        results[mode] = {k: summarize(v) for k, v in per.items()}
        for k, v in results[mode].items():
            print(f"{mode:16s} {k:13s} median {v['median_us']:9.0f} us/step "
                  f"(range {v['min_us']:.0f}-{v['max_us']:.0f})")
        if "jax" in per:
            for k in ("vkgrad_flash", "vkgrad_plain"):
                r = results[mode]["jax"]["median_us"] / results[mode][k]["median_us"]
                results[mode][f"jax_over_{k}"] = r
                print(f"{mode:16s} JAX/{k} = {r:.2f} (>1: vkgrad faster)")
    out = os.environ.get("OUT")
    if out:
        Path(out, "transformer.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
