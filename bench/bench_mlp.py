"""One MLP training step (784-1024-1024-10, batch 256, ReLU, cross-entropy, Adam, fp32):
vkgrad's jitted step against JAX's jitted step (CUDA) and torch eager (CUDA), in one run.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_mlp.py [--steps 300]
Prints per-step medians and the ratios, vkgrad's per-kernel profile, and writes $OUT/mlp.json.
--quick: a small model (runs on lavapipe, to check the script itself; no peers).

What is timed: the wall time of one training step call until its results are ready (vkgrad:
the call, which waits for its one submission; JAX: step + block_until_ready; torch: forward,
backward, optimizer.step + cuda.synchronize). Parameters stay on the device everywhere. Batches
cycle through 8 pre-made ones, in two modes, each framework alike:
  host    the batch is a numpy array each step (uploaded by the step, as from a data loader)
  device  the 8 batches were put on the device once (vg.device_put, jax.device_put, .cuda())
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
from examples import train_steps as ts  # noqa: E402

LR = 1e-3


init = ts.mlp_params                 # the same parameters as the fusion bench and the tests


def data(sizes, batch, n, seed=1):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((n, batch, sizes[0])).astype(np.float32)
    ys = rng.integers(0, sizes[-1], (n, batch)).astype(np.int32)
    return xs, ys


def vkgrad_step_fn(n_out):
    """(optimizer, step): the MLP step of examples/train_steps.py (ReLU, cross-entropy, Adam)."""
    return ts.mlp_step(LR)


def time_steps(run, n):
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        run(i)
        times.append((time.perf_counter() - t0) * 1e6)
    return times


def bench_vkgrad(sizes, batch, steps, xs, ys, mode):
    if mode == "device":
        xs, ys = [vg.device_put(x) for x in xs], [vg.device_put(y) for y in ys]
    opt, step = vkgrad_step_fn(sizes[-1])
    jstep = vg.jit(step, donate_argnums=(0, 1))
    params = init(sizes)
    state = {"p": params, "s": opt.init(params)}
    losses = []

    def run(i):
        state["p"], state["s"], loss = jstep(state["p"], state["s"], xs[i % len(xs)], ys[i % len(ys)])
        losses.append(loss)

    for i in range(10):
        run(i)
    times = time_steps(run, steps)
    prof = vg.profile(jstep, state["p"], state["s"], xs[0], ys[0], runs=20)
    stats = jstep.lower(state["p"], state["s"], xs[0], ys[0]).stats()
    return times, [float(l) for l in losses], prof, stats


def bench_jax(sizes, batch, steps, xs, ys, mode):
    import jax
    import jax.numpy as jnp

    def loss_fn(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jnp.maximum(h, 0.0)
        logp = jax.nn.log_softmax(h, axis=-1)
        return -jnp.mean(jnp.sum(jax.nn.one_hot(y, sizes[-1]) * logp, axis=-1))

    def step(params, m, v, t, x, y):   # Adam, as vg.optim.adam (optax.adam's update)
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        t = t + 1.0
        m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        c1, c2 = 1.0 / (1.0 - 0.9 ** t), 1.0 / (1.0 - 0.999 ** t)
        params = jax.tree_util.tree_map(
            lambda p, m, v: p - LR * (m * c1) / (jnp.sqrt(v * c2) + 1e-8), params, m, v)
        return params, m, v, t, loss

    with jax.default_matmul_precision("float32"):   # no TF32: fp32 like the others
        jstep = jax.jit(step, donate_argnums=(0, 1, 2, 3))
        params = jax.tree_util.tree_map(jnp.asarray, init(sizes))
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        st = {"p": params, "m": zeros, "v": jax.tree_util.tree_map(jnp.zeros_like, params),
              "t": jnp.zeros((), jnp.float32)}
        if mode == "device":
            dx, dy = [jax.device_put(x) for x in xs], [jax.device_put(y) for y in ys]
        else:
            dx, dy = list(xs), list(ys)
        losses = []

        def run(i):
            st["p"], st["m"], st["v"], st["t"], loss = jstep(st["p"], st["m"], st["v"], st["t"],
                                                             dx[i % len(xs)], dy[i % len(ys)])
            loss.block_until_ready()
            losses.append(loss)

        for i in range(10):
            run(i)
        times = time_steps(run, steps)
    return times, [float(l) for l in losses]


def bench_torch(sizes, batch, steps, xs, ys, mode):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    params = [(torch.tensor(w, device=dev, requires_grad=True),
               torch.tensor(b, device=dev, requires_grad=True)) for w, b in init(sizes)]
    flat = [t for pair in params for t in pair]
    opt = torch.optim.Adam(flat, lr=LR, eps=1e-8)
    if mode == "device":
        dx = [torch.tensor(x, device=dev) for x in xs]
        dy = [torch.tensor(y, device=dev, dtype=torch.long) for y in ys]
    else:
        dx, dy = list(xs), list(ys)
    losses = []

    def run(i):
        h, y = dx[i % len(xs)], dy[i % len(ys)]
        if mode == "host":
            h = torch.from_numpy(h).to(dev)
            y = torch.from_numpy(y).to(dev, dtype=torch.long)
        for j, (w, b) in enumerate(params):
            h = h @ w + b
            if j < len(params) - 1:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        losses.append(loss.detach())

    for i in range(10):
        run(i)
    times = time_steps(run, steps)
    return times, [float(l) for l in losses]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sizes, batch = ([32, 64, 64, 10], 16) if args.quick else ([784, 1024, 1024, 10], 256)
    xs, ys = data(sizes, batch, 8)
    from vkgrad.runtime import get_device
    device = get_device().info.name
    results = {"device": device, "date": time.strftime("%Y-%m-%d"), "sizes": sizes, "batch": batch}
    frameworks = [("vkgrad", bench_vkgrad)] + \
        ([] if args.quick else [("jax", bench_jax), ("torch_eager", bench_torch)])
    for mode in ("host", "device"):
        for name, fn in frameworks:
            key = f"{name}/{mode}"
            try:
                out = fn(sizes, batch, args.steps, xs, ys, mode)
            except Exception as e:   # a missing peer is reported, never hidden
                results[key] = {"error": f"{type(e).__name__}: {e}"}
                continue
            t, losses = out[0], out[1]
            results[key] = {"median_us": statistics.median(t), "p10_us": sorted(t)[len(t) // 10],
                            "first_loss": losses[0], "last_loss": losses[-1]}
            if name == "vkgrad":
                prof, stats = out[2], out[3]
                results[key].update(stats=stats, gpu_total_us=prof.total_us,
                                    profile=[r.__dict__ for r in prof.rows])
                if mode == "host":
                    print(prof)
                    print(f"vkgrad: {stats}")
    print(f"\nMLP step {sizes} batch {batch}, Adam, fp32, on {device} ({results['date']}):")
    for mode in ("host", "device"):
        v = results[f"vkgrad/{mode}"]["median_us"]
        for name, _ in frameworks:
            r = results[f"{name}/{mode}"]
            if "error" in r:
                print(f"  {name:12s} {mode:6s} error: {r['error']}")
                continue
            print(f"  {name:12s} {mode:6s} {r['median_us']:8.1f} us/step (p10 {r['p10_us']:7.1f})  "
                  f"loss {r['first_loss']:.4f} -> {r['last_loss']:.4f}  "
                  f"{name}/vkgrad time = {r['median_us'] / v:.2f}")
    if os.environ.get("OUT"):   # on the device machine: keep the numbers for BENCHMARKS.md
        (Path(os.environ["OUT"]) / "mlp.json").write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
