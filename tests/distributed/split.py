"""The split step on Vulkan (tests/test_distributed.py starts it under mpirun -n 2): a
collective over a world of two splits a jitted program into parts, with the all-reduce on the
host between them (vkgrad/execution/segmented.py). Over a world of one the collectives are the
identity and nothing splits, so these checks need two ranks. Each rank runs

    three     a step whose gradients fit one bucket: the kinds of its steps, its submissions
              a warm call, its fallback reason
    donated   the same Array passed as a donated argument and as one a later part reads
    buckets   every gradient its own bucket (BUCKET_BYTES = 1): the order of the buckets

each against the same data_parallel step on the interpreter (which all-reduces through MPI
too), and rank 0 writes every rank's record to the JSON file named by argv[1]."""

import json
import sys

import numpy as np

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.execution import segmented
from vkgrad.runtime import counters


def kinds(train, *args) -> list:
    return [s[0] for s in train.jitted.lower(*args).runner.steps]


def error(got, want) -> float:
    """How far two pytrees' leaves are apart in units of float32 tolerance (rtol 1e-5, atol
    1e-6): at most 1 where every leaf is within it."""
    pairs = zip(vg.tree_util.tree_leaves(got), vg.tree_util.tree_leaves(want))
    return max(float(np.max(np.abs(np.asarray(g) - np.asarray(w))
                            / (1e-6 + 1e-5 * np.abs(np.asarray(w))))) for g, w in pairs)


def three(rank, rng) -> dict:
    """Gradients past the size a call reads back itself: the part before the pmean (one
    submission), the gradients read back in one more, the part after it (the optimizer)."""
    def step(w, x):
        g = vg.grad(lambda w: vnp.sum(vnp.tanh(x @ w["a"]) @ w["b"]))(w)
        return vg.tree_util.tree_map(lambda w, g: w - 0.5 * g, w, vg.lax.pmean(g, "batch"))

    w = {"a": rng.standard_normal((70, 70)).astype(np.float32) / 9,
         "b": rng.standard_normal((70, 65)).astype(np.float32) / 9}
    x = rng.standard_normal((2, 4, 70)).astype(np.float32)[rank]
    train = vg.distributed.data_parallel(step, backend="vulkan")
    train(w, x)
    before = counters["submissions"]
    got = vg.block_until_ready(train(w, x))
    return {"steps": kinds(train, w, x), "submissions": counters["submissions"] - before,
            "fallback": train.jitted.lower(w, x).fallback_reason,
            "error": error(got, vg.distributed.data_parallel(step, backend="numpy")(w, x))}


def donated(rank, rng) -> dict:
    """The part that reads the donated p last must not write over it: q, the same Array, is
    read after it (the call then does without)."""
    def step(p, q, x):
        g = vg.lax.pmean(vg.grad(lambda p: vnp.sum(vnp.tanh(x @ p)))(p), "batch")
        p = p - 0.5 * g                       # the donated p's last reader
        total = vg.lax.psum(vnp.sum(p), "batch")
        return p, q * total                   # q read after it

    w = rng.standard_normal((5, 4)).astype(np.float32)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)[rank]
    want = vg.distributed.data_parallel(step, backend="numpy")(w, w, x)
    train = vg.distributed.data_parallel(step, backend="vulkan", donate_argnums=0)
    a = vg.device_put(w)
    got = train(a, a, x)
    try:
        np.asarray(a)
        reused = "no error"
    except vg.DeletedArrayError as e:
        reused = str(e)
    return {"steps": kinds(train, w, w, x), "error": error(got, want), "reused": reused}


def buckets(rank, rng) -> dict:
    """Every gradient its own bucket, placed right after the eqn that computes it: the last
    layer's first."""
    def loss(p, x):
        h = vnp.tanh(vnp.tanh(x @ p["w1"]) @ p["w2"])
        return vnp.sum((h @ p["w3"]) ** 2)

    def step(p, x):
        g = vg.lax.pmean(vg.grad(loss)(p, x), "batch")
        return vg.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)

    p = {k: rng.standard_normal(s).astype(np.float32) / 3
         for k, s in [("w1", (4, 5)), ("w2", (5, 6)), ("w3", (6, 2))]}
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)[rank]
    train = vg.distributed.data_parallel(step, backend="vulkan")
    default, segmented.BUCKET_BYTES = segmented.BUCKET_BYTES, 1   # read when it compiles
    try:
        got = train(p, x)
    finally:
        segmented.BUCKET_BYTES = default
    steps = train.jitted.lower(p, x).runner.steps
    return {"steps": [s[0] for s in steps],
            "buckets": [[str(v.type) for v in s[1].inputs] for s in steps if s[0] == "host"],
            "error": error(got, vg.distributed.data_parallel(step, backend="numpy")(p, x))}


def main(out):
    rank = vg.distributed.rank()
    rng = np.random.default_rng(0)       # the same parameters on every rank; each its own x
    record = {"rank": rank, "size": vg.distributed.size(),
              **{f.__name__: f(rank, rng) for f in (three, donated, buckets)}}
    records = vg.distributed.init().allgather(record)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(records, f)


if __name__ == "__main__":
    main(sys.argv[1])
