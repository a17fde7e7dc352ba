"""What moving a batch to the device costs: the host's copy into staging memory, and the
submission with and without the upload (run once per kp build to compare memory types).
    source bench/gpu_env.sh && python3 bench/bench_upload.py
"""
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vkgrad.runtime import Executable, get_device  # noqa: E402


def median_us(fn, n=200):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


dev = get_device()
x = np.random.default_rng(0).standard_normal((256, 784)).astype(np.float32)
buf = dev.buffer(x.size)
ex = Executable(dev, [])
print(f"{dev.info.name}: batch {x.shape} float32, {x.nbytes / 1e3:.0f} kB")
print(f"  host copy into staging memory: {median_us(lambda: buf.write_staging(x)):8.1f} us")
print(f"  read staging memory back:      {median_us(lambda: buf.read_staging()):8.1f} us")
print(f"  submission, upload:            {median_us(lambda: ex.run(uploads=[(buf, x)])):8.1f} us")
print(f"  submission, nothing:           {median_us(lambda: ex.run()):8.1f} us")
