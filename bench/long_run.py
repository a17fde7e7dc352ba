"""A long training run: does anything grow? The MLP step of bench/bench_mlp.py (784-1024-1024-10,
batch 256, ReLU, cross-entropy, Adam, fp32), jitted with params and optimizer state donated,
called asynchronously (the loss is read every --read-every steps) for --steps steps.

Records vg.runtime_stats() (device buffers and bytes, pooled buffers, programs, executables,
recorded sequences, descriptor sets, pipelines, host RSS) plus the number of Python objects the
garbage collector tracks: at step 0 after --warmup steps, every --every steps, and at the end.
Writes them as JSON to --out and prints a table; the last line says which counters changed
between the first record and the last.

On the NVIDIA device machine (the numbers go into docs/long_runs.md):
    source bench/gpu_env.sh && python3 bench/long_run.py --out $OUT/long_run.json
Here (lavapipe; 16-32-32-4, batch 8):
    VKGRAD_BACKEND=vulkan python bench/long_run.py --tiny --steps 300 --every 100 --out /tmp/lr.json
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vkgrad as vg  # noqa: E402
from bench_mlp import data, init, vkgrad_step_fn  # noqa: E402

# counters that must not change once the loop is warm (RSS is compared with a tolerance)
FLAT = ("buffers", "buffer_bytes", "staging_bytes", "pooled_buffers", "pooled_bytes",
        "programs", "executables", "sequences", "descriptor_sets", "pipelines", "jit_programs")
COLUMNS = (("step", "step", 1), ("buffers", "bufs", 1), ("buffer_bytes", "MB", 1e6),
           ("pooled_buffers", "pooled", 1), ("programs", "progs", 1), ("executables", "execs", 1),
           ("sequences", "seqs", 1), ("descriptor_sets", "dsets", 1), ("pipelines", "pipes", 1),
           ("rss_bytes", "RSS MB", 1e6), ("python_objects", "pyobjs", 1), ("seconds", "s", 1))


def record(step, t0, loss) -> dict:
    gc.collect()
    return {"step": step, "seconds": round(time.perf_counter() - t0, 3), "loss": loss,
            **vg.runtime_stats(), "python_objects": len(gc.get_objects())}


def run(sizes, batch, steps, warmup, every, read_every) -> list:
    opt, step_fn = vkgrad_step_fn(sizes[-1])
    step = vg.jit(step_fn, donate_argnums=(0, 1))
    xs, ys = data(sizes, batch, 8)
    xs, ys = [vg.device_put(x) for x in xs], [vg.device_put(y) for y in ys]
    params = init(sizes)
    state = opt.init(params)
    for i in range(warmup):
        params, state, loss = step(params, state, xs[i % 8], ys[i % 8])
    vg.block_until_ready(params)
    t0 = time.perf_counter()
    records = [record(0, t0, float(loss))]
    for i in range(1, steps + 1):
        params, state, loss = step(params, state, xs[i % 8], ys[i % 8])
        if i % read_every == 0:
            float(loss)
        if i % every == 0 or i == steps:
            vg.block_until_ready(params)
            records.append(record(i, t0, float(loss)))
    return records


def table(records) -> str:
    rows = [[h for _, h, _ in COLUMNS]]
    for r in records:
        rows.append([f"{r[k] / s:.{2 if k == 'seconds' else 3 if s != 1 else 0}f}"
                     for k, _, s in COLUMNS])
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows)


def changes(first, last) -> dict:
    """The counters that differ between two records: {name: (first, last)}."""
    return {k: (first[k], last[k]) for k in FLAT + ("python_objects",) if first[k] != last[k]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--read-every", type=int, default=100)
    ap.add_argument("--tiny", action="store_true", help="16-32-32-4, batch 8 (for lavapipe)")
    ap.add_argument("--out", required=True, help="where to write the JSON")
    a = ap.parse_args(argv)
    sizes, batch = ([16, 32, 32, 4], 8) if a.tiny else ([784, 1024, 1024, 10], 256)
    records = run(sizes, batch, a.steps, a.warmup, a.every, a.read_every)
    steps_s = records[-1]["seconds"] / max(1, a.steps)
    out = {"sizes": sizes, "batch": batch, "steps": a.steps, "warmup": a.warmup,
           "backend": vg.default_backend(), "device": [str(d.name) for d in vg.devices()],
           "ms_per_step": round(steps_s * 1e3, 4), "records": records,
           "changed": changes(records[0], records[-1])}
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(f"{'-'.join(map(str, sizes))}, batch {batch}, {a.steps} steps on {out['backend']} "
          f"({', '.join(out['device'])}): {out['ms_per_step']} ms/step")
    print(table(records))
    rss = records[-1]["rss_bytes"] - records[0]["rss_bytes"]
    print(f"changed from step 0 to step {a.steps}: {out['changed'] or 'nothing'}; "
          f"RSS {rss / 1e6:+.2f} MB")


if __name__ == "__main__":
    main()
