"""What 16-bit storage costs and saves on the scalar path (no cooperative matrices): the same
programs in f32, f16 and bf16, GPU time per kernel (vg.profile, Vulkan timestamps).

    elementwise   a * b + c over N elements: GB/s of the bytes its kernel reads and writes
    matmul        A @ B (NN) and A @ B.T (NT) at 4096^3 and the LM's shapes, 16-bit operands
                  read by the f32 kernel's fused loads, result stored in 16 bits by a convert
                  kernel (lowering/fusion/widen.py): TFLOP/s of the whole program, and each
                  kernel's time

On the NVIDIA device machine, from the repo root (with .gpu carried):
    source bench/gpu_env.sh && python3 bench/bench_half.py
Here (lavapipe, to check the script): python bench/bench_half.py --quick
Prints one JSON object per measurement, and writes --out FILE (default $OUT/half.json or
./half.json).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vkgrad as vg  # noqa: E402
import vkgrad.numpy as vnp  # noqa: E402

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": vnp.bfloat16}
# (label, m, k, n, transpose_b): 4096^3, and the transformer LM medium's forward products
# (d 512, 8 heads, 32 x 512 tokens)
MATMULS = [("cube4096", 4096, 4096, 4096, False), ("cube4096_NT", 4096, 4096, 4096, True),
           ("lm_qkv", 16384, 512, 1536, False), ("lm_fc", 16384, 512, 2048, False),
           ("lm_out", 16384, 2048, 512, False), ("lm_head", 16384, 512, 256, True)]
QUICK_MATMULS = [("q_nn", 130, 33, 70, False), ("q_nt", 130, 33, 70, True)]


def gpu_us(f, *args, runs):
    p = vg.profile(vg.jit(f, backend="vulkan"), *args, runs=runs)
    return p.total_us, [(r.kernel, r.primitives, round(r.us, 1)) for r in p.rows]


def elementwise(n, runs):
    rng = np.random.default_rng(0)
    out = []
    for name, dt in DTYPES.items():
        a, b, c = (rng.standard_normal(n).astype(dt) for _ in range(3))
        us, kernels = gpu_us(lambda a, b, c: a * b + c, a, b, c, runs=runs)
        nbytes = 4 * n * np.dtype(dt).itemsize
        out.append({"bench": "elementwise", "dtype": name, "n": n, "gpu_us": us,
                    "GB_per_s": nbytes / us / 1e3, "kernels": kernels})
    return out


def matmuls(shapes, runs):
    rng = np.random.default_rng(0)
    out = []
    for label, m, k, n, tb in shapes:
        a = rng.standard_normal((m, k)).astype(np.float32) / np.sqrt(k)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        for name, dt in DTYPES.items():
            f = (lambda a, b: a @ b.T) if tb else (lambda a, b: a @ b)
            us, kernels = gpu_us(f, a.astype(dt), b.astype(dt), runs=runs)
            out.append({"bench": "matmul", "shape": label, "m": m, "k": k, "n": n,
                        "transpose_b": tb, "dtype": name, "gpu_us": us,
                        "TFLOP_per_s": 2 * m * k * n / us / 1e6, "kernels": kernels})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes (lavapipe)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.quick:
        results = elementwise(1001, 3) + matmuls(QUICK_MATMULS, 3)
    else:
        results = elementwise(1 << 26, args.runs) + matmuls(MATMULS, args.runs)
    for r in results:
        print(json.dumps(r))
    out = Path(args.out or Path(os.environ.get("OUT", ".")) / "half.json")
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
