"""The language models of examples/train_lm.py at the `small` preset (transformer, Mamba, and
the GRU that bench/bench_control_flow.py runs; fp32): vkgrad's jitted training step against the
same model, optimizer and batches in JAX, in one process, in interleaved rounds.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_lm.py [--rounds 5] [--steps 20]
        [--models transformer,mamba]
--quick: the tiny preset, 2 short rounds (runs on lavapipe, to check the script; JAX if there).
--preset tiny|small|medium (default small); --precision f32|f16|bf16 (default f32): the compute
dtype of both sides, as train_lm's `--precision` (vg.mp's "params=f32,compute=<it>,output=f32":
parameters, optimizer and loss in f32, the model computed in <it>; JAX casts its parameters to
<it> in the same places and its logits back to f32; f16 without loss scaling on both sides).

Both sides train the same model from the same initial parameters on the same batches (the
stdlib bytes of examples/train_lm.py, step i's batch from seed (0, 0, i), all uploaded before
the clock starts): vkgrad runs train_lm's own step (vg.nn.transformer_lm / mamba_lm; AdamW
b2 0.95, decay 0.1, warm-up + cosine computed in the step, clipping at global norm 1.0); JAX
runs the same math written with jax.numpy (attention as softmax(q k^T) v, which XLA fuses;
the selective scan with lax.associative_scan; `jax_default_matmul_precision="highest"`).

Timing: after a warm-up, rounds alternate (vkgrad, JAX, vkgrad, JAX, ...), each `--steps`
steps, in both loop styles, each side timed the same way: "every" reads the loss to the host
after every step (what most training loops do: each step then waits for its own result), "end"
keeps the losses as device values and reads them at the end of the round (both frameworks
dispatch asynchronously, so the round waits only on its last step). Tokens/s per round,
reported as median and range per style. Both sides take exactly the same number of steps on the same batches, so their
validation losses at the end (4 fixed batches of the held-out files) should agree: that shows
both learn equally. vkgrad's dispatch count and a per-kernel GPU profile are recorded too.
JSON to $OUT/lm.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

import vkgrad as vg  # noqa: E402
from vkgrad.runtime import get_device  # noqa: E402
from vkgrad.tracer.pytree import tree_leaves  # noqa: E402

import train_lm  # noqa: E402


# ----------------------------------------------------------------------------------- JAX side

def jax_side(cfg):
    """(jax, init_state(params) -> state, step(state..., x, y), loss(params, x, y)) for cfg:
    the same model and optimizer as train_lm.make_steps, written with jax.numpy."""
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_default_matmul_precision", "highest")
    from jax_nn import attention_block, gru, layer_norm, mamba_block, rms_norm
    tree_map = jax.tree_util.tree_map

    compute = {"f32": jnp.float32, "f16": jnp.float16, "bf16": jnp.bfloat16}[cfg["precision"]]

    def logits(p, ids):
        p = tree_map(lambda a: a.astype(compute), p)    # the policy's cast_to_compute
        return _logits(p, ids).astype(jnp.float32)     # ... and cast_to_output

    def _logits(p, ids):
        x = p["embed"][ids]
        if cfg["model"] == "transformer":
            x = x + p["pos"][:ids.shape[1]]
            for blk in p["blocks"]:
                x = attention_block(blk, x, cfg["heads"])
            x = layer_norm(x, p["norm_f"]["w"], p["norm_f"]["b"])
        elif cfg["model"] == "gru":
            for blk in p["blocks"]:
                x = x + gru(blk["gru"], rms_norm(x, blk["norm"]["w"]))
            x = rms_norm(x, p["norm_f"]["w"])
        else:
            for blk in p["blocks"]:
                x = mamba_block(blk, x)
            x = rms_norm(x, p["norm_f"]["w"])
        return x @ p["head"]["w"] if "head" in p else x @ p["embed"].T

    def loss_fn(p, x, y):
        logp = jax.nn.log_softmax(logits(p, x), axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, y[..., None], axis=-1))

    peak, warm, total = cfg["lr"], cfg["warmup"], cfg["steps"]
    final = peak * cfg["final_lr_frac"]
    b1, b2, eps, wd, clip = cfg["b1"], cfg["b2"], 1e-8, cfg["weight_decay"], cfg["clip"]

    def schedule(count):
        t = jnp.clip((count - warm) / max(1, total - warm), 0.0, 1.0)
        decay = final + (peak - final) * 0.5 * (1.0 + jnp.cos(math.pi * t))
        return jnp.where(count < warm, peak * count / max(1, warm), decay)   # optax's

    def step(params, opt_state, x, y):
        count, mu, nu = opt_state
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree_util.tree_leaves(grads)))
        scale = jnp.where(norm < clip, 1.0, clip / norm)
        grads = tree_map(lambda g: g * scale, grads)
        rate = schedule(count)
        count = count + 1.0
        mu = tree_map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
        nu = tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
        c1, c2 = 1 / (1 - b1 ** count), 1 / (1 - b2 ** count)
        params = tree_map(lambda p, m, v: p - rate * ((m * c1) / (jnp.sqrt(v * c2) + eps)
                                                      + wd * p), params, mu, nu)
        return params, (count, mu, nu), loss

    def init_state(params):
        zeros = tree_map(jnp.zeros_like, params)
        return (jnp.zeros((), jnp.float32), zeros, tree_map(jnp.zeros_like, params))

    return jax, init_state, jax.jit(step, donate_argnums=(0, 1)), jax.jit(loss_fn)


# ----------------------------------------------------------------------------------- rounds

STYLES = ("every", "end")   # the loss read after every step / at the end of a round

def summarize(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "rounds": len(xs)}


def bench_model(model, preset, args, data):
    total = args.warmup + args.rounds * args.steps * len(STYLES)
    cfg = train_lm.make_config(model, preset, steps=total,
                               precision=getattr(args, "precision", "f32"))
    tokens = cfg["batch"] * cfg["seq"]
    train, val = data
    host_batches = [train_lm.train_batch(train, cfg, i) for i in range(total)]
    vals = train_lm.val_batches(val, cfg)
    params0 = train_lm.init_params(cfg)
    res = {"config": cfg, "tokens_per_step": tokens,
           "parameters": sum(int(np.size(p)) for p in tree_leaves(params0))}
    sides = {}

    # vkgrad: train_lm's own step; batches and state on the device before the clock starts
    step, loss_fn = train_lm.make_steps(cfg)
    opt0 = train_lm.optimizer(cfg).init(params0)
    vk_batches = [(vg.device_put(x), vg.device_put(y)) for x, y in host_batches]
    st = {"p": vg.device_put(params0), "o": vg.device_put(opt0), "i": 0, "losses": []}
    compiled = step.lower(st["p"], st["o"], *vk_batches[0])
    stats = compiled.stats()
    res["vkgrad"] = {"backend": compiled.backend, "fallback": compiled.fallback_reason,
                     "dispatches": stats.get("dispatches"), "kernels": stats.get("kernels"),
                     "initial_loss": float(loss_fn(st["p"], *vk_batches[0]))}
    print(f"{model}: {res['parameters']:,} parameters, {tokens} tokens/step; vkgrad "
          f"{compiled.backend}, {stats.get('dispatches')} dispatches"
          + (f", FALLBACK: {compiled.fallback_reason}" if compiled.fallback_reason else ""),
          flush=True)

    def vk_run(n, style="every", st=st):
        pending = []
        for _ in range(n):
            x, y = vk_batches[st["i"]]
            st["p"], st["o"], loss, _ = step(st["p"], st["o"], x, y)
            if style == "every":
                st["losses"].append(float(loss))   # waits for this step's submission
            else:
                pending.append(loss)
            st["i"] += 1
        st["losses"] += [float(v) for v in pending]   # waits for the round's last step

    if compiled.fallback_reason and not args.quick:
        print("  vkgrad falls back to the numpy interpreter: not timed", flush=True)
    else:
        sides["vkgrad"] = vk_run

    # JAX
    try:
        jax, init_state, jstep, jloss = jax_side(cfg)
    except ImportError as e:
        print(f"  no JAX here ({e}): vkgrad only", flush=True)
        jax = None
    if jax is not None:
        jb = [(jax.device_put(x), jax.device_put(y)) for x, y in host_batches]
        jp = jax.device_put(params0)
        js = {"p": jp, "o": init_state(jp), "i": 0, "losses": []}
        res["jax"] = {"device": str(jax.devices()[0]),
                      "initial_loss": float(jloss(js["p"], *jb[0]))}

        def jax_run(n, style="every", js=js):
            pending = []
            for _ in range(n):
                x, y = jb[js["i"]]
                js["p"], js["o"], loss = jstep(js["p"], js["o"], x, y)
                if style == "every":
                    js["losses"].append(float(loss))   # waits for this step
                else:
                    pending.append(loss)
                js["i"] += 1
            js["losses"] += [float(v) for v in pending]   # waits for the round's last step

        sides["jax"] = jax_run
        print(f"  initial loss: vkgrad {res['vkgrad']['initial_loss']:.6f}, JAX "
              f"{res['jax']['initial_loss']:.6f} (same model, same parameters)", flush=True)

    # warm-up (the first call compiles), then interleaved rounds
    for name, run in sides.items():
        t0 = time.perf_counter()
        run(1)
        first = time.perf_counter() - t0
        run(args.warmup - 1, "end")
        res[name]["first_call_s"] = first
        print(f"  {name}: first step (compile) {first:.1f} s", flush=True)
    per = {(k, style): [] for style in STYLES for k in sides}
    for r in range(args.rounds):
        for style in STYLES:
            for name, run in sides.items():
                t0 = time.perf_counter()
                run(args.steps, style)
                dt = time.perf_counter() - t0
                per[name, style].append(args.steps * tokens / dt)
        print(f"  round {r + 1}: " + ", ".join(f"{k} ({s}) {v[-1]:,.0f} tok/s"
                                              for (k, s), v in per.items()), flush=True)
    for (name, style), xs in per.items():
        suffix = "" if style == "every" else f"_{style}"
        res[name]["tokens_per_s" + suffix] = summarize(xs)
        res[name]["step_ms_median" + suffix] = tokens / summarize(xs)["median"] * 1e3

    # the same steps on the same batches: validation losses should agree
    if "vkgrad" in sides:
        res["vkgrad"]["steps"] = st["i"]
        res["vkgrad"]["train_loss_curve"] = st["losses"]
        res["vkgrad"]["val_loss"] = float(np.mean([float(loss_fn(st["p"], x, y))
                                                   for x, y in vals]))
    if "vkgrad" in sides and not compiled.fallback_reason:
        # donation is off while profiling: the state stays valid
        prof = vg.profile(step, st["p"], st["o"], *vk_batches[-1], runs=3)
        res["vkgrad"]["gpu_us_per_step"] = prof.total_us
        res["vkgrad"]["profile"] = str(prof)
        print("  vkgrad GPU time per step: %.0f us; top kernels:" % prof.total_us)
        for row in sorted(prof.rows, key=lambda row: -row.us)[:12]:
            print(f"    {row.kernel:<18} {row.primitives[:40]:<40} {row.shapes[:26]:<26} "
                  f"{row.us:9.0f} us {row.percent:5.1f}%")
        by_kernel = {}                  # launch name -> [dispatches, GPU us]
        for row in prof.rows:
            n_us = by_kernel.setdefault(row.kernel, [0, 0.0])
            n_us[0] += 1
            n_us[1] += row.us
        res["vkgrad"]["gpu_us_by_kernel"] = by_kernel
        print("  reductions: " + ", ".join(f"{k} {n}x {us:.0f} us" for k, (n, us) in
                                           sorted(by_kernel.items()) if k.startswith("reduce_")))
    if "jax" in sides:
        res["jax"]["steps"] = js["i"]
        res["jax"]["train_loss_curve"] = js["losses"]
        res["jax"]["val_loss"] = float(np.mean([float(jloss(js["p"], jax.device_put(x),
                                                            jax.device_put(y)))
                                                for x, y in vals]))
    if "vkgrad" in sides and "jax" in sides:
        for suffix in ("", "_end"):
            res["vkgrad_over_jax_tokens_per_s" + suffix] = (
                res["vkgrad"]["tokens_per_s" + suffix]["median"]
                / res["jax"]["tokens_per_s" + suffix]["median"])
    for name in sides:
        for suffix, style in (("", "loss read every step"), ("_end", "loss read at the end")):
            tp = res[name]["tokens_per_s" + suffix]
            print(f"  {name:6s} {style}: {tp['median']:>12,.0f} tok/s (range {tp['min']:,.0f}-"
                  f"{tp['max']:,.0f}), {res[name]['step_ms_median' + suffix]:.2f} ms/step",
                  flush=True)
        print(f"  {name:6s} after {res[name]['steps']} steps train "
              f"{res[name]['train_loss_curve'][-1]:.4f}, val {res[name]['val_loss']:.4f}",
              flush=True)
    if "vkgrad_over_jax_tokens_per_s" in res:
        print(f"  vkgrad/JAX tokens/s = {res['vkgrad_over_jax_tokens_per_s']:.2f} (loss every "
              f"step), {res['vkgrad_over_jax_tokens_per_s_end']:.2f} (at the end); >1: vkgrad "
              "faster", flush=True)
    return res


def round_options(description: str) -> argparse.ArgumentParser:
    """The options of bench_model's interleaved rounds."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20, help="steps per round")
    ap.add_argument("--warmup", type=int, default=5, help="steps before the first round")
    return ap


def main():
    ap = round_options(__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="transformer,mamba")
    ap.add_argument("--quick", action="store_true", help="tiny preset, 2 rounds of 3 steps")
    ap.add_argument("--preset", choices=("tiny", "small", "medium"), default="small")
    ap.add_argument("--precision", choices=("f32", "f16", "bf16"), default="f32")
    args = ap.parse_args()
    preset = args.preset
    if args.quick:
        preset, args.rounds, args.steps, args.warmup = "tiny", 2, 3, 2
    t0 = time.perf_counter()
    data = train_lm.load_text()
    results = {"device": get_device().info.name, "date": time.strftime("%Y-%m-%d"),
               "preset": preset, "precision": args.precision, "rounds": args.rounds,
               "steps_per_round": args.steps,
               "warmup_steps": args.warmup, "data_bytes": [len(d) for d in data]}
    for model in args.models.split(","):
        results[model] = bench_model(model, preset, args, data)
    name = "lm" + ("" if args.preset == "small" else f"_{args.preset}") + \
        ("" if args.precision == "f32" else f"_{args.precision}")
    finish(results, t0, f"{name}.json")


def finish(results: dict, t0: float, filename: str) -> None:
    """The wall time into `results`, printed, and the JSON to $OUT/filename when $OUT is set."""
    results["wall_s"] = time.perf_counter() - t0
    print(f"total {results['wall_s']:.0f} s", flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, filename).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
