"""Faults under mpirun -n 2 (tests/test_distributed.py): argv[1] is
    raise    rank 1 raises in its second step while rank 0 waits in the step's all-reduce
    shapes   rank 1 passes a batch of another shape from its first step
    static   rank 1 passes another learning rate (a static argument) from its first step
Each must end the whole job with a message naming the rank and the cause; each rank prints a
line after each step it finishes."""

import sys

import numpy as np

import vkgrad as vg
import vkgrad.numpy as vnp


def step(w, x, lr):
    g = vg.grad(lambda w: vnp.sum((x @ w) ** 2))(w)
    return w - lr * vg.lax.pmean(g, "batch")


def main(mode):
    rank = vg.distributed.rank()
    train = vg.distributed.data_parallel(step, static_argnums=2)
    w = np.ones((3, 2), np.float32)
    rows = 4 if mode == "shapes" and rank == 1 else 3
    lr = 0.2 if mode == "static" and rank == 1 else 0.1
    for i in range(3):
        if mode == "raise" and rank == 1 and i == 1:
            raise ValueError("the data loader of rank 1 found a corrupt record")
        w = train(w, np.ones((rows, 3), np.float32), lr)
        print(f"rank {rank} step {i} done", flush=True)
    print("finished", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
