"""A tiny MLP trained data-parallel (tests/test_distributed.py starts it under mpirun -n 2, and
alone on the whole batch): rank r takes rows r::size of each global batch. The parameters are
donated (the optimizer's part writes them in place), and the activation is a static argument
(a function: its repr differs between processes only in its address). Writes the final
parameters of every rank (gathered to rank 0) to the .npz named by argv[1]; argv[2] "buckets":
every gradient its own bucket (its all-reduce beside the rest of the backward)."""

import sys

import numpy as np

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.execution import segmented

STEPS, BATCH = 3, 8


def loss_fn(params, x, y, act):
    h = act(x @ params["w1"] + params["b1"])
    return vnp.mean((h @ params["w2"] - y) ** 2)


def step(params, x, y, act):
    loss, g = vg.value_and_grad(loss_fn)(params, x, y, act)
    g = vg.lax.pmean(g, "batch")
    return {k: params[k] - 0.1 * g[k] for k in params}, vg.lax.pmean(loss, "batch")


def main(out):
    rank, size = vg.distributed.rank(), vg.distributed.size()
    rng = np.random.default_rng(rank)      # each rank draws its own: broadcast makes them one
    params = {"w1": rng.standard_normal((3, 5)).astype(np.float32),
              "b1": rng.standard_normal(5).astype(np.float32),
              "w2": rng.standard_normal((5, 2)).astype(np.float32)}
    params = vg.distributed.broadcast(params)
    data = np.random.default_rng(7)
    train = vg.distributed.data_parallel(step, axis_name="batch", donate_argnums=0,
                                         static_argnames="act")
    for _ in range(STEPS):
        x = data.standard_normal((BATCH, 3)).astype(np.float32)
        y = data.standard_normal((BATCH, 2)).astype(np.float32)
        params, loss = train(params, x[rank::size], y[rank::size], vnp.tanh)
    mine = {k: np.asarray(v) for k, v in params.items()}
    gathered = vg.distributed.init().allgather(mine)
    if rank == 0:
        np.savez(out, loss=np.asarray(loss),
                 **{f"{k}_{r}": v for r, p in enumerate(gathered) for k, v in p.items()})


if __name__ == "__main__":
    if sys.argv[2:] == ["buckets"]:
        segmented.BUCKET_BYTES = 1
    main(sys.argv[1])
