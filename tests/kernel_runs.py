"""Running a kernel planner's OpPlan on the real device, for the kernel tests."""

import numpy as np

from vkgrad.runtime import Executable


def bind(device, plan, buffers) -> list:
    """Dispatches for `plan`, with `buffers` a {role: Buffer} holding operands and temps."""
    missing = sorted({r for _, roles in plan.steps for r in roles} - set(buffers))
    if missing:
        raise KeyError(f"no buffer given for role(s) {missing}")
    return [device.dispatch(launch, [buffers[r] for r in roles]) for launch, roles in plan.steps]


def run_plan(device, plan, inputs: dict, outputs: dict, poison=True) -> dict:
    """Run `plan` with `inputs` {role: array} and `outputs` {role: size}; return the outputs.
    Outputs and temporaries start poisoned (NaN, junk ints), so an element a kernel forgets to
    write, or a temporary it forgets to clear, shows up."""
    bufs, uploads = {}, []
    for role, arr in inputs.items():
        bufs[role] = device.buffer(arr.size, arr.dtype)
        uploads.append((bufs[role], arr))
    for role, size in outputs.items():
        bufs[role] = device.buffer(size)
        uploads.append((bufs[role], np.full(size, np.nan, np.float32)))
    for t in plan.temps:
        bufs[t.role] = device.buffer(t.size, t.dtype)
        junk = np.full(t.size, np.nan, np.float32) if t.dtype == "float32" else \
            np.full(t.size, 12345, np.int32)
        uploads.append((bufs[t.role], junk))
    ex = Executable(device, bind(device, plan, bufs))
    ex.run(uploads=uploads, downloads=[bufs[r] for r in outputs])
    return {r: bufs[r].read_staging() for r in outputs}
