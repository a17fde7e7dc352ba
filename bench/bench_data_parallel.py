"""Data-parallel scaling of examples/train_lm.py's transformer step over MPI ranks (issue 24):
tokens/s on N ranks against N x tokens/s of the plain jitted step (vg.jit, no collectives) on
one (weak scaling: each rank keeps the preset's batch), the time each step spends in its host
all-reduce, and torch DDP (NCCL) on a transformer of the same sizes as the anchor where
torch.distributed can run it (NCCL needs one GPU per rank).

    python bench/bench_data_parallel.py [--ranks 1,2] [--preset small,medium] [--steps 20]
        [--rounds 3] [--no-torch]
    python bench/bench_data_parallel.py --quick     # lavapipe: tiny preset, 2 steps, no torch

It starts `mpirun -n N` (the MPICH of vkgrad's distributed extra, or the first on PATH) on
itself for each N; rank 0 prints one JSON line, and the driver writes them all to
$OUT/data_parallel.json (or ./data_parallel.json) and prints the table. Each rank uses the
device its local rank picks (on one GPU, every rank shares it). The device machine has no
package index: carry the wheels in .gpu/wheels (`pip download --only-binary=:all:
--python-version 3.12 mpi4py mpich -d .gpu/wheels`); bench/gpu_env.sh installs them.

Per configuration: a warm-up step (compiles), then --rounds rounds of --steps steps, each step
reading its loss (the loop of examples/train_lm.py); tokens/s per round, median reported. On
one rank the plain jitted step runs in the same process, its rounds interleaved with the
data-parallel step's: its row ("vkgrad vg.jit") is the baseline of every vkgrad row's
efficiency (over a world of one the collectives are the identity, so the two steps compile to
one program and should match: `split` false, one submission a step). submissions_per_step:
the Vulkan submissions a step makes.
host_ms: the time a step waits for its host collectives (reading each gradient bucket back,
and the MPI_Allreduce where it did not overlap the backward's later buckets), from the
SegmentedRunner; allreduce_ms: MPI_Allreduce alone on the parameters' sizes (host arrays, no
device), what the all-reduce costs when nothing hides it. device_bytes: the device memory the
rank holds after the rounds (vg.runtime_stats()["buffer_bytes"]; the pool keeps freed buffers,
so it is the most the run held; on one rank the plain step's too), beside state_bytes, the
parameters' and optimizer state's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

import vkgrad as vg  # noqa: E402
from vkgrad.runtime import counters  # noqa: E402
from vkgrad.tracer.pytree import tree_leaves  # noqa: E402

import train_lm  # noqa: E402


# ----------------------------------------------------------------------------------- a rank

def vkgrad_rank(preset: str, args) -> dict | None:
    """This rank's run of the transformer step at `preset`, per-rank batch the preset's. On one
    rank the plain jitted step (vg.jit, no collective) runs too, its rounds interleaved with the
    data-parallel step's: the baseline the efficiency is measured against."""
    rank, size = vg.distributed.rank(), vg.distributed.size()
    per_rank = train_lm.PRESETS["transformer"][preset]["batch"]
    steps = 1 + args.rounds * args.steps
    cfg = train_lm.make_config("transformer", preset, batch=per_rank * size, steps=steps)
    train, _ = train_lm.load_text(args.max_bytes)
    batches = [[vg.device_put(a[rank * per_rank:(rank + 1) * per_rank])
                for a in train_lm.train_batch(train, cfg, i)] for i in range(steps)]
    runs = {"data_parallel": Run(cfg, batches, data_parallel=True)}
    if size == 1:
        runs["jit"] = Run(cfg, batches, data_parallel=False)
    for _ in range(args.rounds):
        for run in runs.values():
            run.round(args.steps)
    dp = runs["data_parallel"]
    vg.block_until_ready(dp.params)
    device_bytes = vg.runtime_stats()["buffer_bytes"]   # pooled, not freed: the run's most
    state_bytes = sum(np.asarray(x).nbytes for x in tree_leaves((dp.params, dp.opt_state)))
    leaves = [np.zeros(np.shape(p), np.float32) for p in tree_leaves(dp.params)]
    world = vg.distributed.init()
    t = time.perf_counter()
    for _ in range(5):
        world.all_reduce(leaves, "sum")
    allreduce_ms = (time.perf_counter() - t) / 5 * 1e3
    if rank:
        return None
    row = {"framework": "vkgrad", "preset": preset, "ranks": size,
           "device": train_lm.device_name(), "backend": vg.default_backend(),
           "parameters": int(sum(x.size for x in leaves)), "batch_per_rank": per_rank,
           "seq": cfg["seq"], **dp.summary(), "allreduce_ms": allreduce_ms,
           "device_bytes": device_bytes, "state_bytes": state_bytes}
    if "jit" in runs:
        row["jit"] = runs["jit"].summary()
    return row


class Run:
    """One step's training loop on this rank's batches: a warm-up step (compiles), then
    rounds of steps, each step reading its loss (the loop of examples/train_lm.py)."""

    def __init__(self, cfg, batches, data_parallel: bool):
        self.cfg, self.batches, self.i = cfg, batches, 1
        self.step, _ = train_lm.make_steps(cfg, data_parallel=data_parallel)
        self.params = vg.device_put(train_lm.init_params(cfg))
        self.opt_state = vg.device_put(train_lm.optimizer(cfg).init(self.params))
        t0 = time.perf_counter()
        self.params, self.opt_state, loss, _ = self.step(self.params, self.opt_state,
                                                         *batches[0])
        float(loss)
        self.compile_s = time.perf_counter() - t0
        self.lowered = self.step.lower(self.params, self.opt_state, *batches[0])
        self.rates, self.host_ms, self.submissions = [], [], []

    def round(self, steps: int) -> None:
        runner = self.lowered.runner
        host0 = getattr(runner, "host_seconds", 0.0)
        sub0 = counters["submissions"]
        t = time.perf_counter()
        for _ in range(steps):
            self.params, self.opt_state, loss, _ = self.step(self.params, self.opt_state,
                                                             *self.batches[self.i])
            self.loss = float(loss)
            self.i += 1
        dt = time.perf_counter() - t
        self.rates.append(self.cfg["batch"] * self.cfg["seq"] * steps / dt)
        self.host_ms.append((getattr(runner, "host_seconds", 0.0) - host0) / steps * 1e3)
        self.submissions.append((counters["submissions"] - sub0) / steps)

    def summary(self) -> dict:
        rate = statistics.median(self.rates)
        return {"tokens_per_s": rate, "rounds": self.rates,
                "step_ms": self.cfg["batch"] * self.cfg["seq"] / rate * 1e3,
                "host_ms": statistics.median(self.host_ms),
                "submissions_per_step": statistics.median(self.submissions),
                "split": type(self.lowered.runner).__name__ == "SegmentedRunner",
                "compile_s": self.compile_s, "final_loss": self.loss}


# ----------------------------------------------------------------------------------- torch DDP

def torch_rank(rank: int, size: int, preset: str, args, out) -> None:
    """The anchor: a pre-norm transformer LM of the preset's sizes (torch's own encoder layer,
    causal, tied embeddings, AdamW), DDP over NCCL, one GPU per rank, TF32 off."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=rank, world_size=size)
    torch.cuda.set_device(rank)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    p = train_lm.PRESETS["transformer"][preset]
    d, seq, batch = p["d_model"], p["seq"], p["batch"]

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(train_lm.VOCAB, d)
            self.pos = torch.nn.Parameter(torch.zeros(seq, d))
            layer = torch.nn.TransformerEncoderLayer(d, p["heads"], 4 * d, 0.0, "gelu",
                                                     batch_first=True, norm_first=True)
            self.blocks = torch.nn.TransformerEncoder(layer, p["layers"],
                                                      enable_nested_tensor=False)
            self.norm = torch.nn.LayerNorm(d)

        def forward(self, ids):
            mask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device=ids.device)
            x = self.blocks(self.embed(ids) + self.pos, mask=mask, is_causal=True)
            return self.norm(x) @ self.embed.weight.T

    model = DistributedDataParallel(LM().cuda(), device_ids=[rank])
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"], betas=(0.9, 0.95),
                            weight_decay=0.1)
    gen = torch.Generator(device="cuda").manual_seed(rank)
    ids = torch.randint(0, train_lm.VOCAB, (1 + args.rounds * args.steps, batch, seq + 1),
                        device="cuda", generator=gen)

    def step(i):
        logits = model(ids[i, :, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, train_lm.VOCAB),
                                                 ids[i, :, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return float(loss)

    step(0)
    rates, i = [], 1
    for _ in range(args.rounds):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(args.steps):
            step(i)
            i += 1
        rates.append(batch * size * seq * args.steps / (time.perf_counter() - t))
    if rank == 0:
        out.put({"framework": "torch DDP (NCCL)", "preset": preset, "ranks": size,
                 "parameters": sum(q.numel() for q in model.parameters()),
                 "batch_per_rank": batch, "seq": seq, "tokens_per_s": statistics.median(rates),
                 "rounds": rates})
    dist.destroy_process_group()


def torch_run(preset: str, size: int, args) -> dict:
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        return {"framework": "torch DDP (NCCL)", "preset": preset, "ranks": size,
                "skipped": f"no torch ({e})"}
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have < size or not torch.distributed.is_nccl_available():
        return {"framework": "torch DDP (NCCL)", "preset": preset, "ranks": size,
                "skipped": f"NCCL needs one GPU per rank: {have} GPU(s) for {size} ranks"}
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.start_processes(torch_rank, (size, preset, args, out), nprocs=size, start_method="spawn")
    return out.get()


# ----------------------------------------------------------------------------------- driver

def mpirun() -> str:
    here = Path(sys.executable).parent / "mpirun"
    found = str(here) if here.exists() else shutil.which("mpirun")
    if found is None:
        sys.exit("bench_data_parallel: no mpirun: install vkgrad's distributed extra "
                 "(make setup), or on the device machine carry .gpu/wheels (see the docstring)")
    return found


def launch(preset: str, size: int, args) -> dict:
    cmd = [mpirun(), "-n", str(size), sys.executable, __file__, "--rank-of", preset,
           "--steps", str(args.steps), "--rounds", str(args.rounds)]
    if args.max_bytes:
        cmd += ["--max-bytes", str(args.max_bytes)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
    if run.returncode or not lines:
        return {"framework": "vkgrad", "preset": preset, "ranks": size,
                "failed": (run.stderr or run.stdout)[-2000:]}
    return json.loads(lines[-1])


JIT = "vkgrad vg.jit"     # the plain jitted step on one rank: vkgrad's baseline


def split_rows(row) -> list:
    """A one-rank vkgrad row as two: the plain jitted step's, then the data-parallel step's."""
    jit = row.pop("jit", None)
    if jit is None:
        return [row]
    keep = ("preset", "device", "backend", "parameters", "batch_per_rank", "seq")
    return [{"framework": JIT, "ranks": 1, **{k: row[k] for k in keep}, **jit}, row]


def with_efficiency(rows) -> list:
    """Each measured row's scaling efficiency, tokens/s / (ranks x the baseline's): for vkgrad
    the plain jitted step on one rank (so the collectives' cost on one rank counts against
    the data-parallel step), for torch DDP its own one-rank run."""
    base = {}
    for r in rows:
        if "tokens_per_s" in r and r["ranks"] == 1:
            base.setdefault(("vkgrad" if r["framework"] == JIT else r["framework"],
                             r["preset"]), r["tokens_per_s"])
    for r in rows:
        one = base.get(("vkgrad" if r["framework"] == JIT else r["framework"], r["preset"]))
        if "tokens_per_s" in r and one:
            r["efficiency"] = r["tokens_per_s"] / (r["ranks"] * one)
    return rows


def table(rows) -> str:
    out = ["| framework | preset | ranks | tokens/s | efficiency | step ms | submissions | "
           "host ms | MPI allreduce ms |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "tokens_per_s" not in r:
            out.append(f"| {r['framework']} | {r['preset']} | {r['ranks']} | "
                       f"{r.get('skipped') or 'failed'} | | | | | |")
            continue
        eff = f"{r['efficiency']:.2f}" if "efficiency" in r else ""
        out.append(f"| {r['framework']} | {r['preset']} | {r['ranks']} | "
                   f"{r['tokens_per_s']:,.0f} | {eff} | {r.get('step_ms', 0):.1f} | "
                   f"{r.get('submissions_per_step', '')} | "
                   f"{r.get('host_ms', float('nan')):.2f} | "
                   f"{r.get('allreduce_ms', float('nan')):.2f} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--preset", default="small,medium")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-bytes", type=int, default=0, help="read only this much text")
    ap.add_argument("--timeout", type=int, default=540, help="seconds per mpirun")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny preset, 2 steps, 1 round")
    ap.add_argument("--rank-of", help=argparse.SUPPRESS)    # a rank of an mpirun job
    args = ap.parse_args()
    if args.rank_of:
        res = vkgrad_rank(args.rank_of, args)
        if res is not None:
            print(json.dumps(res), flush=True)
        return
    if args.quick:
        args.preset, args.steps, args.rounds, args.no_torch = "tiny", 2, 1, True
        args.max_bytes = args.max_bytes or 200_000
    rows = []
    for preset in args.preset.split(","):
        for n in map(int, args.ranks.split(",")):
            new = split_rows(launch(preset, n, args))
            if not args.no_torch:
                new.append(torch_run(preset, n, args))
            for r in new:
                print(json.dumps(r), flush=True)
            rows += new
    rows = with_efficiency(rows)
    print(table(rows))
    path = Path(os.environ.get("OUT", ".")) / "data_parallel.json"
    path.write_text(json.dumps(rows, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
