"""Host time of eager vkgrad.numpy operations and of an eager vg.grad on small arrays (the
interpreter: no device), in microseconds per call; prints one JSON object.

    python bench/eager_overhead.py [--repeat 2000] [--device]

--device adds the same operations on device Arrays (vg.device_put, VKGRAD_BACKEND=vulkan): one
compiled one-eqn program per operation, one submission each.

Eager results are vg.Arrays (vkgrad/tracer/array.py); this is the cost of that on the paths a
notebook user takes: one op on numpy data, a chain of ops on Arrays, an eager grad.
"""

import argparse
import json
import time

import numpy as np

import vkgrad as vg
import vkgrad.numpy as vnp


def per_call_us(fn, repeat):
    fn()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t) / repeat * 1e6)
    return round(best, 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2000)
    ap.add_argument("--device", action="store_true", help="also on device Arrays")
    args = ap.parse_args()
    n = args.repeat
    a = np.ones((8, 8), np.float32)
    b = np.full((8, 8), 2.0, np.float32)
    x, y = vnp.tanh(a), vnp.tanh(b)   # eager results, as a user holds them
    w = np.ones((8, 4), np.float32)
    loss = vg.grad(lambda w: vnp.sum(vnp.tanh(a @ w)))
    step = vg.jit(lambda w: vnp.tanh(a @ w) * 2.0, backend="numpy")
    out = {
        "vnp.add(ndarray, ndarray)": per_call_us(lambda: vnp.add(a, b), n),
        "x + y (results)": per_call_us(lambda: x + y, n),
        "(1 - x) * (1 - y)": per_call_us(lambda: (1 - x) * (1 - y), n),
        "vnp.sum(x)": per_call_us(lambda: vnp.sum(x), n),
        "x[0] (results)": per_call_us(lambda: x[0], n),
        "vg.grad(tanh matmul sum)": per_call_us(lambda: loss(w), max(1, n // 10)),
        "jitted call (numpy backend)": per_call_us(lambda: step(w), n),
    }
    if args.device:
        dx, dy = vg.device_put(x, 0), vg.device_put(y, 0)
        out["device: x + y"] = per_call_us(lambda: (dx + dy).block_until_ready(), n // 10)
        out["device: (1 - x) * (1 - y)"] = per_call_us(
            lambda: ((1 - dx) * (1 - dy)).block_until_ready(), n // 10)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
