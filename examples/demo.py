"""vkgrad's main job: train an MLP classifier on the default Vulkan device.

The whole training step (forward, backward, Adam) is one jitted program: one submission per
step, parameters and optimizer state donated, so they never leave the device. Data: points
from three interleaved spirals, labelled by spiral.

    make demo-mlp                # or: .venv/bin/python examples/demo.py [--steps N]
"""

import argparse
import time

import numpy as np

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.runtime import counters, get_device


def spirals(n_per_class, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        t = np.linspace(c * 2 * np.pi / classes, c * 2 * np.pi / classes + 4.0, n_per_class)
        t = t + rng.normal(0, 0.15, n_per_class)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int32)


def init(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [{"w": (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32),
             "b": np.zeros(b, np.float32)} for a, b in zip(sizes[:-1], sizes[1:])]


def logits_fn(params, x):
    for layer in params[:-1]:
        x = vnp.tanh(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, x, y):
    logp = vnp.log_softmax(logits_fn(params, x), axis=-1)
    return -vnp.mean(vnp.sum(vnp.one_hot(y, 3) * logp, axis=-1))


opt = vg.optim.adam(0.01)


@vg.jit
def accuracy(params, x, y):
    return vnp.mean((vnp.argmax(logits_fn(params, x), axis=-1) == y).astype(np.float32))


def train_step(params, opt_state, x, y):
    loss, grads = vg.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = opt.update(grads, opt_state, params)
    params = vg.optim.apply_updates(params, updates)
    return params, opt_state, loss


def main():
    ap = argparse.ArgumentParser(description="Train an MLP on three spirals with one jitted "
                                 "step (forward, backward, Adam).")
    ap.add_argument("--steps", type=int, default=300, help="training steps (>= 1)")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    x, y = spirals(256)
    params = init([2, 64, 64, 3])
    opt_state = opt.init(params)
    step = vg.jit(train_step, donate_argnums=(0, 1))
    batch = 128
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    backend = step.lower(params, opt_state, x[:batch], y[:batch]).backend   # trace + compile
    t_compile = time.perf_counter() - t0
    where = (f"Vulkan on {get_device().info.name} ({get_device().info.type})"
             if backend == "vulkan" else "the numpy interpreter")
    print(f"backend: {where}")
    losses, every = [], max(1, args.steps // 10)
    t_first = t_rest = 0.0
    for i in range(args.steps):
        idx = rng.integers(0, len(x), batch)
        sub = counters["submissions"]
        t0 = time.perf_counter()
        params, opt_state, loss = step(params, opt_state, x[idx], y[idx])
        losses.append(float(loss))
        dt = time.perf_counter() - t0
        if i == 0:
            t_first = dt            # first run: buffers, uploads, recording the submission
        else:
            t_rest += dt
        if backend == "vulkan":      # the whole step: one submission
            assert counters["submissions"] == sub + 1, "a training step took several submissions"
        if i % every == 0 or i == args.steps - 1:
            print(f"step {i:4d}  loss {losses[-1]:.4f}")
    acc = float(accuracy(params, x, y))
    kernels = step.lower(params, opt_state, x[:batch], y[:batch]).stats().get("dispatches")
    later = "step 1" if args.steps == 2 else f"steps 1-{args.steps - 1}"
    speed = (f"{t_rest / (args.steps - 1) * 1e3:.2f} ms/step over {later}"
             if args.steps > 1 else "no steady-state steps to time")
    print(f"{args.steps} steps: compile {t_compile * 1e3:.0f} ms, first step {t_first * 1e3:.0f} ms, "
          f"then {speed}"
          + (f" (one submission, {kernels} kernels each)" if kernels else "")
          + f"; train accuracy {acc:.3f}")
    k = min(10, len(losses))
    first, last = np.mean(losses[:k]), np.mean(losses[-k:])
    print(f"mean loss of the first {k} steps {first:.4f}, of the last {k} {last:.4f}", end="")
    if args.steps < 50:
        print(" (too few steps to judge whether it learns: try --steps 300)")
        return
    print(f": {'falling' if last < 0.5 * first else 'NOT falling'}")
    raise SystemExit(0 if last < 0.5 * first else 1)


if __name__ == "__main__":
    main()
