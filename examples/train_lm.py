"""Train a byte-level language model on real text on the default Vulkan device: a pre-norm
transformer (causal flash attention), a Mamba LM (selective scan) or a character GRU LM (each
layer a vg.lax.scan over the sequence).

    python examples/train_lm.py --model transformer|mamba|gru --preset tiny|small|medium
        [--steps N] [--batch B] [--seq L] [--lr LR] [--out DIR] [--resume | --overwrite]
        [--allow-nonfinite] [--sample N] [--seed S] [--eval-every K] [--temperature T]
        [--data-parallel]
    make demo        # the transformer at the tiny preset
    mpirun -n 2 python examples/train_lm.py --data-parallel     # two processes, one GPU each

Data: the Python standard library's own source files, which every machine with Python has
(sysconfig's "stdlib" folder, site-packages left out), read in sorted order; every tenth file is
validation, the rest training. Bytes are the tokens (vocabulary 256): no tokenizer. The batch of
step i is random windows drawn by numpy's Generator seeded with (seed, i), so a resumed run sees
exactly the batches an uninterrupted one would.

The training step is ONE jitted program: forward, backward, clipping by global norm, AdamW
whose warm-up + cosine learning rate is computed inside the step from the step counter in the
optimizer state (vg.optim.warmup_cosine_decay_schedule): one submission per step, parameters
and optimizer state donated, so they stay on the device and the step never recompiles.

Written to --out: log.jsonl (one object per step: step, loss, lr, tokens_per_s, grad_norm,
val_loss every K steps), loss.png, and checkpoint.safetensors (params and optimizer state; the
step and the config in its metadata) every K steps and at the end, atomically (vg.save).
--resume continues from it; a checkpoint of another model or config is refused, naming the
difference, and so is one whose parameters or optimizer state hold NaN or inf (the run had
diverged) unless --allow-nonfinite. --steps may differ on --resume: the checkpoint's config holds
the schedule's length, and the run says how the learning rate's cosine changes (a checkpoint
past the new --steps is refused). When the first step says the run would take over an hour, it
warns with the estimate (the preset is too big for the backend). A folder that already holds a
run (a checkpoint or a log) is never started over silently: without --resume it takes
--overwrite. A file that cannot be read or written (corrupt, a full disk, a read-only folder) is
one line on stderr and exit status 2.

--data-parallel (under an MPI launcher; docs/distributed.md): every rank draws the same global
batch of --batch sequences and trains on its 1/N of it; the step averages the gradients over
the ranks (vg.lax.pmean inside vg.distributed.data_parallel), so the run follows the one-process
run of the same --batch, and its checkpoint resumes on any number of ranks. Rank 0 alone
writes the log, the checkpoints, the plot and the progress; every rank reads a checkpoint to
resume (one machine, or a shared folder). A run error on one rank ends every rank.
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp

import training_run
from training_run import (CHECKPOINT, ResumeError, RunError, RunLog,  # noqa: F401
                          check_fresh_start, device_name, n_params, positive, positive_float)

# tqdm and matplotlib (the `examples` extra) are imported where they are used: bench/bench_lm.py
# imports this module for the presets, data and step on a machine that has neither.

VOCAB = 256
WRITER = "examples/train_lm.py"

# Sizes and schedules per model and preset. small and medium are for a real GPU
# (bench/bench_lm.py runs small on the H200). tiny is what a 2-core machine without a GPU can
# train in minutes: lavapipe ran the tiny transformer's matmuls at 0.2-0.4 GFLOP/s (a loaded
# machine; numpy's BLAS: ~50), and a step at batch 8 x 64 bytes is ~0.35 GFLOP.
PRESETS = {
    "transformer": {
        "tiny": dict(d_model=64, layers=2, heads=4, seq=64, batch=8, steps=200, lr=3e-3,
                     warmup=20, eval_every=50),
        "small": dict(d_model=256, layers=4, heads=8, seq=256, batch=32, steps=2000, lr=1e-3,
                      warmup=100, eval_every=250),
        "medium": dict(d_model=512, layers=8, heads=8, seq=512, batch=32, steps=5000, lr=6e-4,
                       warmup=200, eval_every=500),
    },
    # a character GRU LM: each layer one vg.lax.scan over the sequence (vg.nn.gru_lm)
    "gru": {
        "tiny": dict(d_model=64, layers=2, seq=64, batch=8, steps=200, lr=3e-3, warmup=20,
                     eval_every=50),
        "small": dict(d_model=256, layers=2, seq=256, batch=32, steps=2000, lr=2e-3,
                      warmup=100, eval_every=250),
        "medium": dict(d_model=512, layers=3, seq=512, batch=32, steps=5000, lr=1e-3,
                       warmup=200, eval_every=500),
    },
    "mamba": {
        "tiny": dict(d_model=64, layers=2, d_state=16, seq=64, batch=8, steps=200, lr=3e-3,
                     warmup=20, eval_every=50),
        "small": dict(d_model=256, layers=4, d_state=16, seq=256, batch=32, steps=2000, lr=1e-3,
                      warmup=100, eval_every=250),
        "medium": dict(d_model=512, layers=8, d_state=16, seq=512, batch=32, steps=5000,
                       lr=6e-4, warmup=200, eval_every=500),
    },
}
# The same for every preset: AdamW (b2 0.95, as GPT-style LMs train), decay 0.1, clip 1.0, the
# cosine ends at a tenth of the peak; validation on a fixed set of batches.
# precision: the compute dtype (f32, f16 or bf16; parameters, the optimizer and the loss stay
# f32: vg.mp); f16 trains with a dynamic loss scale starting at LOSS_SCALE.
COMMON = dict(weight_decay=0.1, clip=1.0, final_lr_frac=0.1, b1=0.9, b2=0.95, val_batches=4,
              seed=0, tied=True, precision="f32")
LOSS_SCALE = 2.0 ** 15
PRECISIONS = ("f32", "f16", "bf16")


def make_config(model: str, preset: str, **overrides) -> dict:
    """The run's config: everything that decides its trajectory (so a resume must match it).
    Overrides that are None are left at the preset's value."""
    cfg = dict(model=model, preset=preset, vocab=VOCAB, **COMMON, **PRESETS[model][preset])
    cfg.update({k: v for k, v in overrides.items() if v is not None})
    cfg.pop("eval_every")   # when to validate and save changes nothing the model learns
    return cfg


# ----------------------------------------------------------------------------------- data

def stdlib_files() -> list[Path]:
    """The standard library's .py files in sorted order (site-packages left out)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in root.rglob("*.py")
             if not {"site-packages", "dist-packages", "__pycache__"} & set(p.parts)]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def load_text(max_bytes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) bytes as uint8 arrays: every tenth file is validation. max_bytes:
    stop reading once both have that many (the tests' quick start)."""
    parts: dict = {"train": [], "val": []}
    size = {"train": 0, "val": 0}
    for i, path in enumerate(stdlib_files()):
        part = "val" if i % 10 == 9 else "train"
        parts[part].append(path.read_bytes())
        size[part] += len(parts[part][-1])
        if max_bytes and min(size.values()) >= max_bytes:
            break
    train, val = (np.frombuffer(b"".join(parts[k]), np.uint8) for k in ("train", "val"))
    return (train[:max_bytes], val[:max_bytes]) if max_bytes else (train, val)


def get_batch(data: np.ndarray, batch: int, seq: int, seed) -> tuple[np.ndarray, np.ndarray]:
    """`batch` random windows of seq + 1 bytes: inputs and the next byte at each position."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(data) - seq - 1, batch)
    w = data[starts[:, None] + np.arange(seq + 1)].astype(np.int32)
    return w[:, :-1], w[:, 1:]


def train_batch(data, cfg, step):
    return get_batch(data, cfg["batch"], cfg["seq"], (cfg["seed"], 0, step))


def val_batches(data, cfg):
    return [get_batch(data, cfg["batch"], cfg["seq"], (cfg["seed"], 1, i))
            for i in range(cfg["val_batches"])]


# ----------------------------------------------------------------------------------- model and step

def init_params(cfg: dict):
    rng = np.random.default_rng(cfg["seed"])
    if cfg["model"] == "transformer":
        return nn.init_transformer_lm(rng, cfg["vocab"], cfg["d_model"], cfg["layers"],
                                      cfg["seq"], tied=cfg["tied"])
    if cfg["model"] == "gru":
        return nn.init_gru_lm(rng, cfg["vocab"], cfg["d_model"], cfg["layers"],
                              tied=cfg["tied"])
    return nn.init_mamba_lm(rng, cfg["vocab"], cfg["d_model"], cfg["layers"],
                            d_state=cfg["d_state"], tied=cfg["tied"])


def logits_fn(cfg: dict):
    """params, ids [batch, L] -> logits [batch, L, vocab] (f32), computed in cfg's precision
    (policy(cfg))."""
    mp = policy(cfg)
    if cfg["model"] == "transformer":
        return lambda params, ids: nn.transformer_lm(params, ids, cfg["heads"], policy=mp)
    lm = nn.gru_lm if cfg["model"] == "gru" else nn.mamba_lm
    return lambda params, ids: lm(params, ids, policy=mp)


def schedule(cfg: dict):
    # (a run no longer than its warm-up decays over one step: optax's cosine needs one)
    return vg.optim.warmup_cosine_decay_schedule(
        0.0, cfg["lr"], cfg["warmup"], max(cfg["steps"], cfg["warmup"] + 1),
        cfg["lr"] * cfg["final_lr_frac"])


def optimizer(cfg: dict):
    """AdamW on the f32 (master) parameters; for f16 compute, wrapped in a dynamic loss scale
    that skips a step whose gradients overflow (vg.mp.loss_scaled)."""
    opt = vg.optim.chain(vg.optim.clip_by_global_norm(cfg["clip"]),
                         vg.optim.adamw(schedule(cfg), b1=cfg["b1"], b2=cfg["b2"],
                                        weight_decay=cfg["weight_decay"]))
    if cfg["precision"] == "f16":
        return vg.mp.loss_scaled(opt, vg.mp.DynamicLossScale(np.float32(LOSS_SCALE)))
    return opt


def policy(cfg: dict):
    return vg.mp.get_policy(f"params=f32,compute={cfg['precision']},output=f32")


def make_steps(cfg: dict, data_parallel: bool = False):
    """(train_step, loss) jitted: train_step(params, opt_state, x, y) -> (params, opt_state,
    loss, grad_norm) with params and opt_state donated; loss(params, x, y) for validation.
    data_parallel: x, y are this rank's share; the gradients and the loss are averaged over
    the ranks' axis "batch"."""
    forward, opt = logits_fn(cfg), optimizer(cfg)
    mean = (lambda t: vg.lax.pmean(t, "batch")) if data_parallel else (lambda t: t)

    def loss_fn(params, x, y):
        return nn.cross_entropy(forward(params, x), y)

    def train_step(params, opt_state, x, y):
        scale = vg.mp.loss_scale_of(opt_state)
        loss, grads = mean(vg.value_and_grad(lambda p: scale.scale(loss_fn(p, x, y)))(params))
        loss = scale.unscale(loss)     # opt.update unscales the gradients (and may skip)
        grad_norm = vg.optim.global_norm(scale.unscale(grads))
        updates, opt_state = opt.update(grads, opt_state, params)
        params = vg.optim.apply_updates(params, updates)
        return params, opt_state, loss, grad_norm

    jit = vg.distributed.data_parallel if data_parallel else vg.jit
    return jit(train_step, donate_argnums=(0, 1)), vg.jit(loss_fn)


def make_sampler(cfg: dict):
    """A jitted step: (params, ids [n, L], pos [n], inverse temperature) -> the next-byte
    probabilities [n, vocab] after position pos of each row. The window has the training
    length L, so it compiles once; a context shorter than L sits at the left, and causality
    makes whatever follows pos irrelevant."""
    forward = logits_fn(cfg)

    def next_probs(params, ids, pos, inv_temp):
        n, length = ids.shape
        logits = forward(params, ids).reshape(n * length, cfg["vocab"])
        last = vnp.take(logits, pos + vnp.arange(n) * length, axis=0)
        return vnp.softmax(last * inv_temp, axis=-1)

    return vg.jit(next_probs)


def sample(cfg, params, prompts: list[bytes], n_bytes: int, temperature: float, seed: int,
           sampler=None) -> list[bytes]:
    """Continue each prompt by n_bytes sampled bytes. The draw happens on the host from the
    downloaded probabilities with a seeded numpy Generator (vkgrad has no random numbers on the
    device yet); the forward pass is the jitted `make_sampler` step."""
    sampler = sampler or make_sampler(cfg)
    rng = np.random.default_rng((seed, 2))
    length = cfg["seq"]
    texts = [bytearray(p) for p in prompts]
    inv_temp = np.float32(1.0 / temperature)
    for _ in range(n_bytes):
        ids = np.zeros((len(texts), length), np.int32)
        pos = np.zeros(len(texts), np.int32)
        for r, t in enumerate(texts):
            window = t[-length:]
            ids[r, :len(window)] = np.frombuffer(bytes(window), np.uint8)
            pos[r] = len(window) - 1
        probs = np.asarray(sampler(params, ids, pos, inv_temp), np.float64)
        for r, p in enumerate(probs):
            texts[r].append(int(rng.choice(cfg["vocab"], p=p / p.sum())))
    return [bytes(t) for t in texts]


def schedule_change(cfg: dict, was_steps: int, step: int) -> str:
    """What resuming at `step` with cfg's --steps does to a schedule made for `was_steps`."""
    old = schedule(dict(cfg, steps=was_steps))(np.float32(step))
    new = schedule(cfg)(np.float32(step))
    return (f"--steps {cfg['steps']} {'extends' if cfg['steps'] > was_steps else 'shortens'} "
            f"the run of {was_steps} steps: the learning rate's cosine now decays to step "
            f"{cfg['steps']} instead of {was_steps}, so at step {step} it is {float(new):.3g} "
            f"(the checkpoint's schedule: {float(old):.3g})")


# A run whose first step says it would take longer than this (seconds) is warned about: the
# small preset on lavapipe took 53 s/step, 29 hours for its 2000 steps, without a word.
SLOW_RUN_S = 3600.0


def slow_run_warning(cfg: dict, step_s: float, remaining: int, backend: str) -> str | None:
    """A warning with the time estimate when the run would take over SLOW_RUN_S, else None."""
    total = step_s * remaining
    if total <= SLOW_RUN_S:
        return None
    return (f"warning: at {step_s:.2f} s/step on {backend}, the {remaining} remaining steps "
            f"take about {total / 3600:.1f} h: the {cfg['preset']} preset is too big for this "
            "backend (the tiny preset is sized for a CPU; small and medium for a GPU), or "
            "pass fewer --steps")


# ----------------------------------------------------------------------------------- plot

def plot(out: Path, records: list[dict], title: str) -> None:
    training_run.plot(out, records, title, [("loss (nats per byte)", "loss", "val_loss")])


# ----------------------------------------------------------------------------------- training

class _Quiet:
    """RunLog's part a rank other than 0 plays under --data-parallel: it writes nothing."""
    records: list = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def say(self, text):
        pass

    def add(self, rec, postfix):
        pass


def train(cfg: dict, out, *, eval_every: int, resume: bool = False, overwrite: bool = False,
          allow_nonfinite: bool = False, data=None, stop_after: int | None = None,
          progress: bool = True, log=print, data_parallel: bool = False) -> dict:
    """Train per `cfg` into `out`; returns {"params", "opt_state", "records", "backend",
    "fallback", "compile_s", "step_s"}. A folder holding a run needs resume (continue it) or
    overwrite (start over). stop_after: stop (as if interrupted) once that many steps are done,
    after the checkpoint of that step if one is due. data_parallel: this rank's share of each
    batch (the module docstring)."""
    out = Path(out)
    rank, ranks = (vg.distributed.rank(), vg.distributed.size()) if data_parallel else (0, 1)
    if cfg["batch"] % ranks:
        raise RunError(f"--batch {cfg['batch']} does not split across {ranks} ranks")
    share = cfg["batch"] // ranks
    main = rank == 0
    if main and not resume and not overwrite:
        check_fresh_start(out)
    if main:
        out.mkdir(parents=True, exist_ok=True)
    params = init_params(cfg)
    opt_state = optimizer(cfg).init(params)
    start = 0
    log = log if main else (lambda text: None)
    if resume:
        start, params, opt_state, was = training_run.load_checkpoint(
            out, cfg, params, opt_state, allow_nonfinite, writer=WRITER)
        log(f"resuming from {out / CHECKPOINT} at step {start}")
        if was != cfg["steps"]:
            log(schedule_change(cfg, was, start))
    elif main and (out / CHECKPOINT).exists():
        log(f"note: starting over in {out} (--overwrite: its checkpoint and log are replaced)")
    train_data, val_data = data if data is not None else load_text()
    step_fn, loss_fn = make_steps(cfg, data_parallel)
    vals = val_batches(val_data, cfg)
    lr_at = schedule(cfg)

    def batch_of(step):    # this rank's rows of the step's global batch
        return [a[rank * share:(rank + 1) * share] for a in train_batch(train_data, cfg, step)]

    x, y = batch_of(start)
    t0 = time.perf_counter()
    compiled = step_fn.lower(params, opt_state, x, y)   # compile before the clock starts
    compile_s = time.perf_counter() - t0
    fallback = compiled.fallback_reason
    log(f"{cfg['model']} {cfg['preset']}: {n_params(params):,} parameters; step compiled in "
        f"{compile_s:.1f} s for {compiled.backend}"
        + (f" (interpreter fallback: {fallback})" if fallback else ""))

    tokens = cfg["batch"] * cfg["seq"]
    where = device_name() if not fallback else "the numpy interpreter (fallback)"
    title = f"{cfg['model']} {cfg['preset']} on {where}"
    times = []
    run_log = RunLog(out, start, cfg["steps"], f"{cfg['model']} {cfg['preset']}",
                     resume=resume, progress=progress, log=log) if main else _Quiet()
    with run_log as run:
        for step in range(start, cfg["steps"]):
            x, y = batch_of(step)
            t = time.perf_counter()
            params, opt_state, loss, grad_norm = step_fn(params, opt_state, x, y)
            loss = float(loss)   # copied to the host inside the step's own submission
            dt = time.perf_counter() - t
            times.append(dt)
            done = step + 1
            warning = slow_run_warning(cfg, dt, cfg["steps"] - step, where) \
                if len(times) == 1 else None
            if warning:
                run.say(warning)
            rec = {"step": done, "loss": loss, "lr": float(lr_at(np.float32(step))),
                   "tokens_per_s": tokens / dt, "grad_norm": float(grad_norm)}
            if main and (done % eval_every == 0 or done == cfg["steps"]):
                rec["val_loss"] = float(np.mean([float(loss_fn(params, vx, vy))
                                                 for vx, vy in vals]))
                run.say(f"step {done:5d}  train loss {loss:.4f}  val loss "
                        f"{rec['val_loss']:.4f}")
            run.add(rec, f"loss {loss:.3f}, {tokens / dt:,.0f} tok/s, {dt * 1e3:.0f} ms/step")
            if "val_loss" in rec:
                training_run.save_checkpoint(out, cfg, done, params, opt_state, writer=WRITER)
                plot(out, run.records, title)
            if stop_after is not None and done >= stop_after:
                break
    records = run.records
    return {"params": params, "opt_state": opt_state, "records": records,
            "backend": compiled.backend, "fallback": fallback, "compile_s": compile_s,
            "step_s": float(np.median(times)) if times else None}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="Train a byte-level transformer or Mamba LM on the Python standard "
                    "library's source, on the default Vulkan device (VKGRAD_DEVICE picks one).",
        epilog="Writes log.jsonl, loss.png and checkpoint.safetensors to --out. Options left "
               "out take the preset's values: " + "; ".join(
                   f"{m} {p}: " + ", ".join(f"{k} {v}" for k, v in c.items())
                   for m in PRESETS for p, c in PRESETS[m].items() if p == "tiny"))
    ap.add_argument("--model", choices=sorted(PRESETS), default="transformer")
    ap.add_argument("--preset", choices=["tiny", "small", "medium"], default="tiny")
    ap.add_argument("--steps", type=positive, help="training steps (the cosine ends there; "
                    "with --resume, more steps than the checkpoint's run extend it)")
    ap.add_argument("--batch", type=positive, help="sequences per step")
    ap.add_argument("--seq", type=positive, help="bytes per sequence (context length)")
    ap.add_argument("--lr", type=positive_float, help="peak learning rate")
    ap.add_argument("--seed", type=int, help="seed of the init, the batches and the sample")
    ap.add_argument("--precision", choices=PRECISIONS,
                    help="compute dtype (default f32; parameters and optimizer stay f32, f16 "
                         "uses a dynamic loss scale)")
    ap.add_argument("--out", default=None, help="output folder (default runs/<model>-<preset>)")
    again = ap.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="continue from --out's checkpoint (same options as the run that "
                            "wrote it)")
    again.add_argument("--overwrite", action="store_true",
                       help="start over in an --out that already holds a run, replacing its "
                            "checkpoint and log")
    ap.add_argument("--allow-nonfinite", action="store_true",
                    help="with --resume: continue from a checkpoint holding NaN or inf")
    ap.add_argument("--eval-every", type=positive, help="validate and checkpoint every K steps")
    ap.add_argument("--sample", type=int, default=120, metavar="N",
                    help="bytes to sample after each of three prompts at the end (0: none; "
                         "default 120)")
    ap.add_argument("--temperature", type=float, default=0.8, help="sampling temperature")
    ap.add_argument("--data-parallel", action="store_true",
                    help="under mpirun -n N: each rank trains on 1/N of every --batch, "
                         "gradients averaged over the ranks; rank 0 writes the outputs")
    args = ap.parse_args(argv)
    if args.allow_nonfinite and not args.resume:
        ap.error("--allow-nonfinite goes with --resume (it accepts a checkpoint's NaN or inf)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = make_config(args.model, args.preset, steps=args.steps, batch=args.batch,
                      seq=args.seq, lr=args.lr, seed=args.seed, precision=args.precision)
    eval_every = args.eval_every or PRESETS[args.model][args.preset]["eval_every"]
    out = Path(args.out or f"runs/{args.model}-{args.preset}")
    ranks = vg.distributed.size() if args.data_parallel else 1   # before the device opens
    dev = device_name()
    quiet = args.data_parallel and vg.distributed.rank() != 0   # rank 0 alone reports
    if not quiet:
        print(f"device: {dev}; data: {sysconfig.get_paths()['stdlib']} (*.py, bytes)"
              + (f"; {ranks} data-parallel ranks" if args.data_parallel else ""))
    try:
        t0 = time.perf_counter()
        res = train(cfg, out, eval_every=eval_every, resume=args.resume,
                    overwrite=args.overwrite, allow_nonfinite=args.allow_nonfinite,
                    data_parallel=args.data_parallel)
    except (RunError, vg.CheckpointError) as e:
        if ranks > 1:   # uncaught, it ends every rank (vg.distributed aborts the job)
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:   # the log or the plot: a full disk, a read-only folder
        if ranks > 1:
            raise
        print(f"error: {e.filename or out}: cannot write it: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted; {out / CHECKPOINT} holds the last checkpoint: continue with "
              "the same command and --resume", file=sys.stderr)
        return 130
    wall = time.perf_counter() - t0
    if quiet:
        return 0
    recs = res["records"]
    if args.sample:
        prompts = [b"def ", b"import ", b"class "]
        t = time.perf_counter()
        texts = sample(cfg, res["params"], prompts, args.sample, args.temperature, cfg["seed"])
        print(f"\nsampled {args.sample} bytes after each prompt at temperature "
              f"{args.temperature} ({time.perf_counter() - t:.1f} s):")
        for text in texts:
            print("-" * 72)
            print(text.decode("utf-8", errors="replace"))
        print("-" * 72)
    last = recs[-1] if recs else {}
    val = next((r["val_loss"] for r in reversed(recs) if "val_loss" in r), float("nan"))
    where = res["backend"] + (f", interpreter fallback: {res['fallback']}"
                              if res["fallback"] else "")
    step_s = res["step_s"]
    # a resumed run that was already finished takes no step: no speed to report
    speed = (f"{cfg['batch'] * cfg['seq'] / step_s:,.0f} tokens/s ({step_s * 1e3:.0f} ms/step, "
             "median)" if step_s else "no step taken in this run")
    print(f"{cfg['model']} {cfg['preset']} on {dev} ({where}): {last.get('step', 0)} steps, "
          f"train loss {last.get('loss', float('nan')):.3f}, val loss {val:.3f}, "
          f"{speed}, compile {res['compile_s']:.1f} s, total {wall:.0f} s")
    print(f"wrote {out / 'log.jsonl'}, {out / 'loss.png'}, {out / CHECKPOINT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
