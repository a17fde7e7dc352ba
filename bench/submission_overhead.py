"""Cost of one Kompute submission (Sequence.eval) holding 1, 10 or 100 tiny dispatches.

Works with stock kp 0.9.0 and with vkgrad's patched build, so the two can be compared in one run:
    python bench/submission_overhead.py LABEL [OUT.json]
Prints one line per dispatch count: median and 10th percentile of the wall time of eval().
"""

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import kp

SHADER = """
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
void main() { x[gl_GlobalInvocationID.x] += 1.0; }
"""


def spirv() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.comp", Path(d) / "k.spv"
        src.write_text(SHADER)
        subprocess.run(["glslangValidator", "-V", "-o", str(out), str(src)], check=True,
                       capture_output=True)
        return out.read_bytes()


def main():
    label = sys.argv[1]
    mgr = kp.Manager()
    t = mgr.tensor(np.zeros(64, np.float32))
    algo = mgr.algorithm([t], spirv(), (1, 1, 1), [], [])
    mgr.sequence().eval(kp.OpTensorSyncDevice([t]))
    rows = []
    for n in (1, 10, 100):
        seq = mgr.sequence()
        for _ in range(n):
            seq.record(kp.OpAlgoDispatch(algo))
        for _ in range(50):
            seq.eval()
        times = []
        for _ in range(1000):
            t0 = time.perf_counter()
            seq.eval()
            times.append((time.perf_counter() - t0) * 1e6)
        times.sort()
        rows.append({"label": label, "dispatches": n, "median_us": statistics.median(times),
                     "p10_us": times[len(times) // 10], "p90_us": times[9 * len(times) // 10]})
        print(f"{label:>14}: {n:3d} dispatch(es) per eval: median {rows[-1]['median_us']:7.1f} us "
              f"(p10 {rows[-1]['p10_us']:.1f}, p90 {rows[-1]['p90_us']:.1f})", flush=True)
    mgr.sequence().eval(kp.OpTensorSyncLocal([t]))
    expect = 1050 + 10 * 1050 + 100 * 1050
    got = float(t.data()[0])
    print(f"{label:>14}: check: x[0] = {got:.0f} (expected {expect})")
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
