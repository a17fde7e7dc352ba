"""vkgrad's main job on the default device (until the compiler lands: a GLSL kernel chain).

Runs 200 dependent dispatches in one submission and checks the result against numpy.
"""

import time

import numpy as np

from vkgrad.runtime import Dispatch, Executable, compile_glsl, get_device

SHIFT_ADD = """
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer In { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Out { float y[]; };
layout(push_constant) uniform Push { uint n; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) y[i] = x[(i + 1u) % p.n] + 1.0;
}
"""


def main():
    dev = get_device()
    print(f"device: {dev.info.name} ({dev.info.type})")
    n, steps = 1 << 16, 200
    x = np.random.default_rng(0).integers(-1000, 1000, n).astype(np.float32)
    a, b = dev.buffer(n), dev.buffer(n)
    k = dev.kernel(compile_glsl(SHIFT_ADD, name="shift_add"), bindings=2, push_words=1, name="shift_add")
    chain = [Dispatch(k, (a, b) if s % 2 == 0 else (b, a), ((n + 63) // 64, 1, 1), (n,))
             for s in range(steps)]
    ex = Executable(dev, chain)
    t0 = time.perf_counter()
    ex.run(uploads=[(a, x)], downloads=[a])
    dt = time.perf_counter() - t0
    ok = np.array_equal(a.read_staging(), np.roll(x, -steps) + steps)
    print(f"{steps} dependent dispatches in one submission: {dt * 1e3:.1f} ms, "
          f"result {'matches numpy' if ok else 'DOES NOT match numpy'}")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
