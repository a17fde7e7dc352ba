"""The collectives on every rank against numpy on all ranks' data (tests/test_distributed.py
starts it under mpirun -n 2, on the backend VKGRAD_BACKEND names): psum, pmean, pmax, pmin in a
data_parallel step (float32 and int32, a pytree), a vmap's axis and the world's in one psum,
psum's VJP, and the host-side all_reduce and broadcast. Prints "ok" on each rank."""

import numpy as np

import vkgrad as vg
import vkgrad.numpy as vnp


def data(r):
    rng = np.random.default_rng(100 + r)
    return (rng.standard_normal((4, 3)).astype(np.float32),
            rng.integers(-5, 5, (5,)).astype(np.int32))


def step(x, k):
    lax = vg.lax
    both = vg.vmap(lambda row: lax.psum(row, ("i", "batch")), axis_name="i")(x)
    dw = vg.grad(lambda w: vnp.sum(lax.psum(x * w, "batch")))(vnp.ones_like(x))
    return (lax.psum({"x": x, "k": k}, "batch"), lax.pmean(x, "batch"), lax.pmax(x, "batch"),
            lax.pmin(k, "batch"), both, dw, lax.psum(1, "batch"))


def main():
    rank, size = vg.distributed.rank(), vg.distributed.size()
    xs, ks = zip(*(data(r) for r in range(size)))
    x, k = xs[rank], ks[rank]
    total, mean, mx, mn, both, dw, n = vg.distributed.data_parallel(step)(x, k)
    def close(got, want):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)

    close(total["x"], np.sum(xs, 0))
    np.testing.assert_array_equal(np.asarray(total["k"]), np.sum(ks, 0))
    close(mean, np.mean(xs, 0))
    np.testing.assert_array_equal(np.asarray(mx), np.max(xs, 0))
    np.testing.assert_array_equal(np.asarray(mn), np.min(ks, 0))
    close(both, np.broadcast_to(np.sum(xs, (0, 1)), x.shape))
    close(dw, size * x)               # d/dw sum(psum(x w)) = psum(ones) x (JAX's pmap rule)
    assert int(np.asarray(n)) == size
    host = vg.distributed.all_reduce({"x": x, "k": k}, op="sum")
    close(host["x"], np.sum(xs, 0))
    for op, f in [("mean", np.mean), ("max", np.max), ("min", np.min)]:
        close(vg.distributed.all_reduce(x, op=op), f(xs, 0))
    got = vg.distributed.broadcast({"x": x}, root=size - 1)
    assert isinstance(got["x"], vg.Array)
    np.testing.assert_array_equal(np.asarray(got["x"]), xs[size - 1])
    print(f"ok rank {rank}", flush=True)


if __name__ == "__main__":
    main()
