"""Donation through the split programs (tests/test_distributed.py): an MLP trained 4 steps with
Adam, its parameters and optimizer state donated. argv[1]: the JSON file rank 0 writes (one
record per rank); argv[2]:
    single   vg.jit of the step (no collective: one program), in one process
    split    vg.distributed.data_parallel of it (split at the pmean), under mpirun
    kept     data_parallel without donate_argnums
argv[3] "buckets": every gradient its own bucket (the backward split into a part per bucket).
Each record: `bytes`, the device memory the process holds after the steps
(vg.runtime_stats()["buffer_bytes"]: buffers are pooled, not freed, so this is the most the
run held at once, and a second copy of the state would be there); the gradients' and the
state's bytes; the split parts' own scratch, and the bytes of the values one part makes and
a later part reads (activations, between the parts of a bucketed backward); and what reading
a donated argument raised."""

import json
import sys

import numpy as np

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.execution import segmented

D, STEPS, ROWS = 256, 4, 4       # ROWS: the batch of every process, whatever the mode
opt = vg.optim.adam(1e-2)


def loss_fn(p, x, y):
    h = vnp.tanh(vnp.tanh(x @ p["w1"]) @ p["w2"])
    return vnp.mean((h @ p["w3"] - y) ** 2)


def step(p, state, x, y, reduce):
    loss, g = vg.value_and_grad(loss_fn)(p, x, y)
    loss, g = reduce((loss, g))
    updates, state = opt.update(g, state, p)
    return vg.optim.apply_updates(p, updates), state, loss


def nbytes(tree) -> int:
    return sum(np.asarray(x).nbytes for x in vg.tree_util.tree_leaves(tree))


def main(out, mode):
    rank, size = vg.distributed.rank(), vg.distributed.size()
    rng = np.random.default_rng(0)
    params = vg.distributed.broadcast({k: (rng.standard_normal(s) / 16).astype(np.float32)
                                       for k, s in [("w1", (D, D)), ("w2", (D, D)),
                                                    ("w3", (D, 8))]})
    state = opt.init(params)            # host zeros, uploaded by the first step
    donate = () if mode == "kept" else (0, 1)
    if mode == "single":
        train = vg.jit(lambda p, s, x, y: step(p, s, x, y, lambda t: t), donate_argnums=donate)
    else:
        train = vg.distributed.data_parallel(
            lambda p, s, x, y: step(p, s, x, y, lambda t: vg.lax.pmean(t, "batch")),
            donate_argnums=donate)
    x = rng.standard_normal((size, ROWS, D)).astype(np.float32)[rank]
    y = rng.standard_normal((size, ROWS, 8)).astype(np.float32)[rank]
    for _ in range(STEPS):
        before = params
        params, state, loss = train(params, state, x, y)
    vg.block_until_ready(params)
    held = vg.runtime_stats()["buffer_bytes"]
    try:
        np.asarray(before["w1"])
        reused = "no error"
    except vg.DeletedArrayError as e:
        reused = str(e)
    runner = (train if mode == "single" else train.jitted).lower(params, state, x, y).runner
    parts = [s for s in getattr(runner, "steps", ()) if s[0] == "run"]
    made = {v for s in parts for v in s[3]}
    crossing = sum(v.type.size * 4 for s in parts for v in s[2] if v in made)   # all f32
    record = {"rank": rank, "bytes": held,
              "gradient_bytes": nbytes(params), "state_bytes": nbytes((params, state)),
              "parts": len(parts), "crossing_bytes": crossing,
              "scratch_bytes": sum(s[1].lowered.memory()["scratch"] for s in parts),
              "reused": reused, "loss": float(loss)}
    records = vg.distributed.init().allgather(record)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(records, f)


if __name__ == "__main__":
    if sys.argv[3:] == ["buckets"]:
        segmented.BUCKET_BYTES = 1
    main(*sys.argv[1:3])
