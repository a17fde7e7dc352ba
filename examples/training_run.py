"""What the training examples (train_lm.py, train_cnn.py) share about a run's folder: the
checkpoint (params and optimizer state, the step and the config in its metadata, written
atomically by vg.save), resuming from it (refused for another config or for NaN/inf values),
the log (log.jsonl, one object per step) and progress bar (RunLog), the plots, and the
command-line checks. tqdm and matplotlib (the `examples` extra) are imported where they are used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

import vkgrad as vg
from vkgrad.runtime import get_device
from vkgrad.tracer.pytree import tree_leaves

CHECKPOINT = "checkpoint.safetensors"


class RunError(Exception):
    """The run cannot start in this folder (the message says why and what to pass instead)."""


class ResumeError(RunError):
    """--resume cannot continue from this directory's checkpoint (the message says why)."""


def save_checkpoint(out: Path, cfg: dict, step: int, params, opt_state, *, writer: str) -> None:
    vg.save(out / CHECKPOINT, {"params": params, "opt_state": opt_state},
            metadata={"step": str(step), "config": json.dumps(cfg, sort_keys=True),
                      "writer": f"vkgrad {writer}"})


def load_checkpoint(out: Path, cfg: dict, params, opt_state, allow_nonfinite: bool = False, *,
                    writer: str):
    """(step, params, opt_state, the schedule's length) from out's checkpoint, which must be of
    this config (but for "steps": a run may be extended) and hold only finite values (unless
    allow_nonfinite)."""
    path = out / CHECKPOINT
    if not path.exists():
        raise ResumeError(f"--resume: {path} does not exist (run without --resume to start)")
    meta = vg.load_metadata(path)        # a corrupt file: vg.CheckpointError, naming it
    try:
        saved, step = json.loads(meta["config"]), int(meta["step"])
    except (KeyError, ValueError):
        raise ResumeError(f"--resume: {path} is not a checkpoint of {writer} "
                          "(its metadata has no config and step)") from None
    if "precision" in cfg:
        saved.setdefault("precision", "f32")   # checkpoints from before --precision were f32
    diff = [f"{k}: {saved.get(k, '(none)')} in the checkpoint, {cfg.get(k, '(none)')} now"
            for k in sorted((set(saved) | set(cfg)) - {"steps"}) if saved.get(k) != cfg.get(k)]
    if "steps" in cfg and step > cfg["steps"]:
        diff.append(f"steps: the checkpoint is at step {step}, past --steps {cfg['steps']}")
    if diff:
        raise ResumeError(f"--resume: {path} is from another run, refusing it:\n  "
                          + "\n  ".join(diff)
                          + "\nresume with the same options, or train into another --out")
    state = vg.load(path, like={"params": params, "opt_state": opt_state})
    if not allow_nonfinite:
        bad = [f"{name} ({n:,} of {size:,} values)" for name, n, size in nonfinite(state)]
        if bad:
            raise ResumeError(
                f"--resume: {path} holds NaN or inf in " + ", ".join(bad[:4])
                + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
                + ": the run had diverged by that step. Resume from an earlier checkpoint, or "
                "pass --allow-nonfinite to continue from it anyway")
    return step, state["params"], state["opt_state"], saved.get("steps", cfg.get("steps"))


def nonfinite(tree, prefix: str = "") -> list:
    """(name, count, size) of each float leaf of `tree` holding NaN or inf, named by its key
    path as in the checkpoint ("params.blocks.0.w")."""
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, tuple) and hasattr(tree, "_fields"):
        items = zip(tree._fields, tree)
    elif isinstance(tree, (list, tuple)):
        items = enumerate(tree)
    else:
        a = np.asarray(tree)
        n = int(np.size(a) - np.count_nonzero(np.isfinite(a))) \
            if np.issubdtype(a.dtype, np.floating) else 0
        return [(prefix, n, int(np.size(a)))] if n else []
    return [bad for k, v in items for bad in nonfinite(v, f"{prefix}.{k}" if prefix else str(k))]


def check_fresh_start(out: Path) -> None:
    """A run without --resume or --overwrite must not replace a run already in `out`."""
    held = [name for name in (CHECKPOINT, "log.jsonl") if (out / name).exists()]
    if held:
        raise RunError(f"{out} already holds a run ({' and '.join(held)}): pass --resume to "
                       "continue it, or --overwrite to start over and replace it")


def read_log(out: Path, upto: int) -> list[dict]:
    """log.jsonl's records of steps <= upto (those after the checkpoint are redone)."""
    path = out / "log.jsonl"
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            break    # a line torn by the interruption
        if r.get("step", upto + 1) <= upto:
            records.append(r)
    return records


def plot(out: Path, records: list[dict], title: str, panels) -> None:
    """loss.png: one panel per (y label, train key, validation key) of `panels`: the train
    series at every step that has it, the validation series where the records have it."""
    import matplotlib
    matplotlib.use("Agg")   # headless: no display needed
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4), dpi=110,
                             squeeze=False)
    for ax, (ylabel, train_key, val_key) in zip(axes[0], panels):
        train = [(r["step"], r[train_key]) for r in records if train_key in r]
        if train:
            ax.plot(*zip(*train), lw=0.8, alpha=0.8, label="train")
        val = [(r["step"], r[val_key]) for r in records if val_key in r]
        if val:
            label = val_key.split("_")[0]        # val_loss: validation; test_acc: test
            ax.plot(*zip(*val), "o-", lw=1.5, label={"val": "validation"}.get(label, label))
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    tmp = out / "loss.png.tmp"
    fig.savefig(tmp, format="png")
    plt.close(fig)
    os.replace(tmp, out / "loss.png")


def device_name() -> str:
    try:
        return get_device().info.name
    except vg.VkgradError as e:
        return f"no Vulkan device ({e})"


def n_params(params) -> int:
    return sum(int(np.size(p)) for p in tree_leaves(params))


def positive(text: str) -> int:
    """An option that counts something: a whole number of at least 1 (--batch 0 trained 200
    steps of NaN and wrote a checkpoint of them)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} must be at least 1")
    return n


def positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not x > 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive finite number")
    return x


class RunLog:
    """A run's log.jsonl and progress bar, as a context manager. On entry the log keeps the
    records of steps up to `start` (a resume; they are redone after that), `records` holds
    them; `add(rec, postfix)` appends a step's record (written and flushed at once, so an
    interruption loses nothing before it) and moves the bar; `say` prints above the bar."""

    def __init__(self, out: Path, start: int, total: int, desc: str, *, resume: bool,
                 progress: bool, log=print):
        self.out, self.start, self.total, self.desc = out, start, total, desc
        self.resume, self.progress, self.log = resume, progress, log
        self.records, self.bar, self.file = [], None, None

    def __enter__(self):
        self.records = read_log(self.out, self.start) if self.resume else []
        with open(self.out / "log.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in self.records)
        self.file = open(self.out / "log.jsonl", "a")
        if self.progress:
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, initial=self.start, unit="step",
                            dynamic_ncols=True, desc=self.desc, file=sys.stdout)
        return self

    def say(self, text: str) -> None:
        (self.bar.write if self.bar is not None else self.log)(text)

    def add(self, rec: dict, postfix: str) -> None:
        self.records.append(rec)
        self.file.write(json.dumps(rec) + "\n")
        self.file.flush()
        if self.bar is not None:
            self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.update(1)

    def __exit__(self, *exc):
        self.file.close()
        if self.bar is not None:
            self.bar.close()
        return False
