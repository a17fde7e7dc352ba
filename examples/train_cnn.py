"""Train a small ResNet on the 8x8 handwritten digits that scikit-learn ships inside its
package (sklearn.datasets.load_digits: 1,797 images, no download), on the default backend.

    python examples/train_cnn.py [--steps N] [--batch B] [--lr LR] [--seed S] [--out DIR]
        [--eval-every K] [--resume | --overwrite] [--allow-nonfinite]

The network is vg.nn.resnet (convolutions, batch norm, residual blocks, global average
pooling) at widths (16, 32), one block per stage. A fifth of the images (a fixed permutation
of the seed) is the test set, the rest training; step i's batch is drawn by numpy's Generator
seeded with (seed, i), so a resumed run sees the batches an uninterrupted one would.

The training step is ONE jitted program: forward, backward and AdamW (warm-up + cosine
learning rate from the step counter in the optimizer state); the batch norms' running
statistics are explicit state, going in and out of the step beside the parameters (all
donated). Evaluation runs the network on the running statistics.

Written to --out: log.jsonl (one object per step: step, loss, acc, lr, images_per_s, and
test_loss and test_acc every K steps), loss.png (loss and accuracy), and
checkpoint.safetensors (weights, batch statistics and optimizer state; the step and config in
its metadata) every K steps and at the end; --resume continues from it, as in
examples/train_lm.py (examples/training_run.py holds what the two share).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp

import training_run
from training_run import (CHECKPOINT, RunError, RunLog, check_fresh_start,  # noqa: F401
                          device_name, n_params, positive, positive_float)

WRITER = "examples/train_cnn.py"
CONFIG = dict(widths=(16, 32), blocks=(1, 1), steps=400, batch=64, lr=3e-3, warmup=20,
              weight_decay=1e-4, final_lr_frac=0.05, test_frac=0.2, seed=0)
EVAL_EVERY = 100


def make_config(**overrides) -> dict:
    """Everything that decides the run's trajectory (a resume must match it); overrides that
    are None keep the defaults. Tuples become lists, as they come back from the checkpoint."""
    cfg = {k: list(v) if isinstance(v, tuple) else v for k, v in CONFIG.items()}
    cfg.update({k: v for k, v in overrides.items() if v is not None})
    return cfg


def load_data(cfg: dict):
    """((train images, labels), (test images, labels)): images float32 [n, 1, 8, 8] in [0, 1]."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int32)
    order = np.random.default_rng((cfg["seed"], 1)).permutation(len(y))
    n_test = int(round(cfg["test_frac"] * len(y)))
    test, train = order[:n_test], order[n_test:]
    return (x[train], y[train]), (x[test], y[test])


def train_batch(data, cfg: dict, step: int):
    x, y = data
    idx = np.random.default_rng((cfg["seed"], 0, step)).integers(0, len(y), cfg["batch"])
    return x[idx], y[idx]


def init_model(cfg: dict):
    """{"weights": ..., "stats": ...}: the parameters and the batch norms' running statistics."""
    weights, stats = nn.init_resnet(np.random.default_rng(cfg["seed"]), 1, 10,
                                    tuple(cfg["widths"]), tuple(cfg["blocks"]))
    return {"weights": weights, "stats": stats}


def schedule(cfg: dict):
    return vg.optim.warmup_cosine_decay_schedule(
        0.0, cfg["lr"], cfg["warmup"], max(cfg["steps"], cfg["warmup"] + 1),
        cfg["lr"] * cfg["final_lr_frac"])


def optimizer(cfg: dict):
    return vg.optim.adamw(schedule(cfg), weight_decay=cfg["weight_decay"])


def make_steps(cfg: dict):
    """(train_step, evaluate), jitted: train_step(model, opt_state, x, y) -> (model, opt_state,
    loss, accuracy) with model and opt_state donated; evaluate(model, x, y) -> (loss, acc)."""
    opt = optimizer(cfg)

    def loss_fn(weights, stats, x, y):
        logits, stats = nn.resnet(weights, stats, x, training=True)
        return nn.cross_entropy(logits, y), (stats, logits)

    def train_step(model, opt_state, x, y):
        (loss, (stats, logits)), grads = vg.value_and_grad(loss_fn, has_aux=True)(
            model["weights"], model["stats"], x, y)
        updates, opt_state = opt.update(grads, opt_state, model["weights"])
        weights = vg.optim.apply_updates(model["weights"], updates)
        acc = vnp.mean(vnp.argmax(logits, axis=-1) == y)
        return {"weights": weights, "stats": stats}, opt_state, loss, acc

    def evaluate(model, x, y):
        logits, _ = nn.resnet(model["weights"], model["stats"], x, training=False)
        return nn.cross_entropy(logits, y), vnp.mean(vnp.argmax(logits, axis=-1) == y)

    return vg.jit(train_step, donate_argnums=(0, 1)), vg.jit(evaluate)


def plot(out: Path, records: list[dict], title: str) -> None:
    training_run.plot(out, records, title, [("loss (cross-entropy)", "loss", "test_loss"),
                                            ("accuracy", "acc", "test_acc")])


def train(cfg: dict, out, *, eval_every: int = EVAL_EVERY, resume: bool = False,
          overwrite: bool = False, allow_nonfinite: bool = False, stop_after: int | None = None,
          progress: bool = True, log=print) -> dict:
    """Train per `cfg` into `out`; returns {"model", "opt_state", "records", "backend",
    "fallback", "step_s"}. stop_after: stop (as if interrupted) after that many steps."""
    out = Path(out)
    if not resume and not overwrite:
        check_fresh_start(out)
    out.mkdir(parents=True, exist_ok=True)
    model = init_model(cfg)
    opt_state = optimizer(cfg).init(model["weights"])
    start = 0
    if resume:
        start, model, opt_state, was = training_run.load_checkpoint(
            out, cfg, model, opt_state, allow_nonfinite, writer=WRITER)
        log(f"resuming from {out / CHECKPOINT} at step {start}"
            + (f" (--steps {cfg['steps']} changes the run's {was})" if was != cfg["steps"]
               else ""))
    train_data, (test_x, test_y) = load_data(cfg)
    step_fn, evaluate = make_steps(cfg)
    lowered = step_fn.lower(model, opt_state, *train_batch(train_data, cfg, start))
    fallback = lowered.fallback_reason
    log(f"resnet {cfg['widths']}: {n_params(model['weights']):,} parameters; "
        f"{len(train_data[1])} training and {len(test_y)} test images; step on "
        f"{lowered.backend}" + (f" (fallback: {fallback})" if fallback else ""))
    title = f"ResNet on the digits ({lowered.backend})"
    lr_at, times = schedule(cfg), []
    with RunLog(out, start, cfg["steps"], "resnet digits", resume=resume, progress=progress,
                log=log) as run:
        for step in range(start, cfg["steps"]):
            x, y = train_batch(train_data, cfg, step)
            t = time.perf_counter()
            model, opt_state, loss, acc = step_fn(model, opt_state, x, y)
            loss, acc = float(loss), float(acc)
            dt = time.perf_counter() - t
            times.append(dt)
            done = step + 1
            rec = {"step": done, "loss": loss, "acc": acc, "lr": float(lr_at(np.float32(step))),
                   "images_per_s": cfg["batch"] / dt}
            if done % eval_every == 0 or done == cfg["steps"]:
                test_loss, test_acc = evaluate(model, test_x, test_y)
                rec["test_loss"], rec["test_acc"] = float(test_loss), float(test_acc)
                run.say(f"step {done:5d}  train loss {loss:.4f}  test loss "
                        f"{rec['test_loss']:.4f}  test accuracy {rec['test_acc']:.2%}")
            run.add(rec, f"loss {loss:.3f}, acc {acc:.0%}, {dt * 1e3:.0f} ms/step")
            if "test_acc" in rec:
                training_run.save_checkpoint(out, cfg, done, model, opt_state, writer=WRITER)
                plot(out, run.records, title)
            if stop_after is not None and done >= stop_after:
                break
    records = run.records
    return {"model": model, "opt_state": opt_state, "records": records,
            "backend": lowered.backend, "fallback": fallback,
            "step_s": float(np.median(times)) if times else None}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="Train a small ResNet on scikit-learn's 8x8 digits on the default backend "
                    "(VKGRAD_BACKEND=vulkan|numpy chooses).",
        epilog="Writes log.jsonl, loss.png and checkpoint.safetensors to --out. Defaults: "
               + ", ".join(f"{k} {v}" for k, v in CONFIG.items()))
    ap.add_argument("--steps", type=positive, help="training steps (the cosine ends there)")
    ap.add_argument("--batch", type=positive, help="images per step")
    ap.add_argument("--lr", type=positive_float, help="peak learning rate")
    ap.add_argument("--seed", type=int, help="seed of the init, the split and the batches")
    ap.add_argument("--out", default="runs/cnn-digits", help="output folder")
    ap.add_argument("--eval-every", type=positive, default=EVAL_EVERY,
                    help="test and checkpoint every K steps")
    again = ap.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="continue from --out's checkpoint (same options)")
    again.add_argument("--overwrite", action="store_true",
                       help="start over in an --out that already holds a run")
    ap.add_argument("--allow-nonfinite", action="store_true",
                    help="with --resume: continue from a checkpoint holding NaN or inf")
    args = ap.parse_args(argv)
    if args.allow_nonfinite and not args.resume:
        ap.error("--allow-nonfinite goes with --resume (it accepts a checkpoint's NaN or inf)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = make_config(steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed)
    out = Path(args.out)
    print(f"device: {device_name()}; data: sklearn.datasets.load_digits (8x8 digits)")
    try:
        t0 = time.perf_counter()
        res = train(cfg, out, eval_every=args.eval_every, resume=args.resume,
                    overwrite=args.overwrite, allow_nonfinite=args.allow_nonfinite)
    except (RunError, vg.CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename or out}: cannot write it: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted; {out / CHECKPOINT} holds the last checkpoint: continue with "
              "the same command and --resume", file=sys.stderr)
        return 130
    recs = res["records"]
    test = next((r for r in reversed(recs) if "test_acc" in r), {})
    speed = (f"{cfg['batch'] / res['step_s']:,.0f} images/s ({res['step_s'] * 1e3:.0f} "
             "ms/step, median)" if res["step_s"] else "no step taken in this run")
    print(f"{len(recs)} steps on {res['backend']}: test accuracy "
          f"{test.get('test_acc', float('nan')):.2%}, test loss "
          f"{test.get('test_loss', float('nan')):.4f}; {speed}; "
          f"total {time.perf_counter() - t0:.0f} s")
    print(f"wrote {out / 'log.jsonl'}, {out / 'loss.png'}, {out / CHECKPOINT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
