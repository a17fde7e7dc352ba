"""One MLP training step (784-1024-1024-10, batch 256, ReLU, cross-entropy, Adam, fp32) in a
loop: vkgrad against JAX (and torch eager, --peers), in INTERLEAVED rounds in one process.

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_mlp.py                  # loss read every 100
    source bench/gpu_env.sh && python3 bench/bench_mlp.py --read-every 1   # loss read every step
Here (lavapipe, CI-sized, vkgrad alone):
    python bench/bench_mlp.py --sizes 784,256,256,10 --batch 64 --peers none --rounds 5 --steps 10

Why rounds: the machine's host is noisy (JAX's own loop of this step measured 143 to 368 us
within one hour), so one run of each framework compares two moments, not two frameworks. Each
framework is set up and warmed up once; then rounds alternate (vkgrad, JAX, vkgrad, JAX, ...),
each round `--steps` steps of a loop that reads the loss every `--read-every` steps and waits for
the parameters at the end (both frameworks dispatch asynchronously: JAX returns futures, vkgrad
returns Arrays whose submission may still run). Reported per framework: the median per-step time
over the rounds, its range, and the ratio of the medians (peer / vkgrad: above 1, vkgrad is
faster). vkgrad's GPU time for the step (vg.profile, timestamps, median of 20) is printed beside:
a loop whose per-step time is close to it hides the host behind the GPU.

Batches cycle through 8 pre-made ones: `--batches device` (default) puts them on the device once
(vg.device_put, jax.device_put, .cuda()); `host` passes numpy arrays (uploaded every step).
JAX runs with jax_default_matmul_precision="highest" (fp32, no TF32), torch with TF32 off.
Writes $OUT/mlp_read<N>_<batches>.json when $OUT is set.
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
import vkgrad.numpy as vnp  # noqa: E402

LR = 1e-3


def init(sizes, seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params.append((rng.standard_normal((a, b)).astype(np.float32) * np.float32(np.sqrt(2 / a)),
                       np.zeros(b, np.float32)))
    return params


def data(sizes, batch, n, seed=1):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((n, batch, sizes[0])).astype(np.float32)
    ys = rng.integers(0, sizes[-1], (n, batch)).astype(np.int32)
    return xs, ys


def mlp_loss(xp, log_softmax, one_hot, n_out):
    """The step's loss, written once for any numpy-like module (vkgrad.numpy, jax.numpy)."""
    def loss_fn(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = xp.maximum(h, 0.0)
        logp = log_softmax(h, axis=-1)
        return -xp.mean(xp.sum(one_hot(y, n_out) * logp, axis=-1))
    return loss_fn


def vkgrad_step_fn(n_out):
    opt = vg.optim.adam(LR)
    loss_fn = mlp_loss(vnp, vnp.log_softmax, vnp.one_hot, n_out)

    def step(params, opt_state, x, y):
        loss, grads = vg.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = vg.optim.apply_updates(params, updates)
        return params, opt_state, loss

    return opt, step


class VkgradLoop:
    name = "vkgrad"

    def __init__(self, sizes, xs, ys, device_batches):
        if device_batches:
            xs, ys = [vg.device_put(x) for x in xs], [vg.device_put(y) for y in ys]
        self.xs, self.ys = xs, ys
        self.opt, step = vkgrad_step_fn(sizes[-1])
        self.step = vg.jit(step, donate_argnums=(0, 1))
        params = init(sizes)
        self.p, self.s, self.i = params, self.opt.init(params), 0

    def round(self, steps, read_every) -> float:
        loss = None
        for k in range(steps):
            i = self.i = self.i + 1
            self.p, self.s, loss = self.step(self.p, self.s, self.xs[i % 8], self.ys[i % 8])
            if (k + 1) % read_every == 0:
                self.loss = float(loss)
        vg.block_until_ready(self.p)
        self.loss = float(loss)
        return self.loss

    def extra(self) -> dict:
        prof = vg.profile(self.step, self.p, self.s, self.xs[0], self.ys[0], runs=20)
        stats = self.step.lower(self.p, self.s, self.xs[0], self.ys[0]).stats()
        return {"gpu_total_us": prof.total_us, "stats": stats,
                "profile": [r.__dict__ for r in prof.rows], "profile_text": str(prof)}


class JaxLoop:
    name = "jax"

    def __init__(self, sizes, xs, ys, device_batches):
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_default_matmul_precision", "highest")   # fp32, no TF32
        self.jax = jax

        loss_fn = mlp_loss(jnp, jax.nn.log_softmax, jax.nn.one_hot, sizes[-1])

        def step(params, m, v, t, x, y):   # Adam, as vg.optim.adam (optax.adam's update)
            loss, g = jax.value_and_grad(loss_fn)(params, x, y)
            t = t + 1.0
            m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
            v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
            c1, c2 = 1.0 / (1.0 - 0.9 ** t), 1.0 / (1.0 - 0.999 ** t)
            params = jax.tree_util.tree_map(
                lambda p, m, v: p - LR * (m * c1) / (jnp.sqrt(v * c2) + 1e-8), params, m, v)
            return params, m, v, t, loss

        self.step = jax.jit(step, donate_argnums=(0, 1, 2, 3))
        params = jax.tree_util.tree_map(jnp.asarray, init(sizes))
        zeros = lambda: jax.tree_util.tree_map(jnp.zeros_like, params)   # noqa: E731
        self.st = [params, zeros(), zeros(), jnp.zeros((), jnp.float32)]
        self.xs, self.ys = (([jax.device_put(x) for x in xs], [jax.device_put(y) for y in ys])
                            if device_batches else (list(xs), list(ys)))
        self.i = 0

    def round(self, steps, read_every) -> float:
        loss = None
        for k in range(steps):
            i = self.i = self.i + 1
            *self.st, loss = self.step(*self.st, self.xs[i % 8], self.ys[i % 8])
            if (k + 1) % read_every == 0:
                self.loss = float(loss)
        self.jax.block_until_ready(self.st)
        self.loss = float(loss)
        return self.loss

    def extra(self) -> dict:
        return {}


class TorchLoop:
    name = "torch_eager"

    def __init__(self, sizes, xs, ys, device_batches):
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        self.torch = torch
        self.params = [(torch.tensor(w, device="cuda", requires_grad=True),
                        torch.tensor(b, device="cuda", requires_grad=True)) for w, b in init(sizes)]
        self.opt = torch.optim.Adam([t for p in self.params for t in p], lr=LR, eps=1e-8)
        self.device_batches = device_batches
        self.xs = [torch.tensor(x, device="cuda") for x in xs] if device_batches else list(xs)
        self.ys = ([torch.tensor(y, device="cuda", dtype=torch.long) for y in ys]
                   if device_batches else list(ys))
        self.i = 0

    def round(self, steps, read_every) -> float:
        torch = self.torch
        for k in range(steps):
            i = self.i = self.i + 1
            h, y = self.xs[i % 8], self.ys[i % 8]
            if not self.device_batches:
                h = torch.from_numpy(h).to("cuda", non_blocking=True)
                y = torch.from_numpy(y).to("cuda", dtype=torch.long, non_blocking=True)
            for j, (w, b) in enumerate(self.params):
                h = h @ w + b
                if j < len(self.params) - 1:
                    h = torch.relu(h)
            loss = torch.nn.functional.cross_entropy(h, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            if (k + 1) % read_every == 0:
                self.loss = loss.item()
        torch.cuda.synchronize()
        self.loss = loss.item()
        return self.loss

    def extra(self) -> dict:
        return {}


PEERS = {"jax": JaxLoop, "torch": TorchLoop}


def summary(per_step_us):
    return {"median_us": statistics.median(per_step_us), "min_us": min(per_step_us),
            "max_us": max(per_step_us), "rounds_us": per_step_us}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="784,1024,1024,10")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=200, help="steps per round")
    ap.add_argument("--read-every", type=int, default=100, help="read the loss every N steps")
    ap.add_argument("--batches", choices=("device", "host"), default="device")
    ap.add_argument("--peers", default="jax", help="comma-separated: jax, torch; or none")
    ap.add_argument("--label", default="", help="kept in the JSON (e.g. what this run tests)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    xs, ys = data(sizes, args.batch, 8)
    from vkgrad.runtime import get_device
    device = get_device().info.name
    loops, errors = [VkgradLoop(sizes, xs, ys, args.batches == "device")], {}
    for name in [p for p in args.peers.split(",") if p and p != "none"]:
        try:
            loops.append(PEERS[name](sizes, xs, ys, args.batches == "device"))
        except Exception as e:   # a missing peer is reported, never hidden
            errors[name] = f"{type(e).__name__}: {e}"
    for loop in loops:           # compile and warm up, outside the rounds
        loop.round(min(20, args.steps), 1)
    times = {loop.name: [] for loop in loops}
    for _ in range(args.rounds):
        for loop in loops:
            t0 = time.perf_counter()
            loop.round(args.steps, args.read_every)
            times[loop.name].append((time.perf_counter() - t0) * 1e6 / args.steps)
    results = {"device": device, "date": time.strftime("%Y-%m-%d %H:%M"), "sizes": sizes,
               "batch": args.batch, "rounds": args.rounds, "steps": args.steps,
               "read_every": args.read_every, "batches": args.batches, "label": args.label,
               "errors": errors}
    for loop in loops:
        results[loop.name] = dict(summary(times[loop.name]), last_loss=loop.loss, **loop.extra())
    v = results["vkgrad"]
    print(v["profile_text"])
    print(f"vkgrad: {v['stats']}\n")
    print(f"MLP step {sizes} batch {args.batch}, Adam, fp32, on {device} ({results['date']}): "
          f"{args.rounds} interleaved rounds of {args.steps} steps, loss read every "
          f"{args.read_every}, {args.batches} batches")
    for loop in loops:
        r = results[loop.name]
        print(f"  {loop.name:12s} median {r['median_us']:8.1f} us/step (range {r['min_us']:.1f}"
              f"-{r['max_us']:.1f})  loss {r['last_loss']:.4f}  "
              f"{loop.name}/vkgrad = {r['median_us'] / v['median_us']:.2f}")
    print(f"  vkgrad GPU time per step {v['gpu_total_us']:.1f} us: per-step time / GPU time = "
          f"{v['median_us'] / v['gpu_total_us']:.2f}")
    for name, e in errors.items():
        print(f"  {name}: error: {e}")
    if os.environ.get("OUT"):   # on the device machine: keep the numbers for BENCHMARKS.md
        path = Path(os.environ["OUT"]) / f"mlp_read{args.read_every}_{args.batches}.json"
        path.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
