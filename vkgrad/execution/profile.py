"""vg.profile: per-kernel GPU time of a jitted function, from Vulkan timestamps."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from vkgrad.dtypes import type_str
from vkgrad.errors import VkgradError
from vkgrad.execution.array import call
from vkgrad.execution.jit import Jitted, jit


@dataclass
class ProfileRow:
    kernel: str
    primitives: str
    shapes: str
    us: float
    percent: float


class Profile:
    """Per-kernel GPU time of one compiled program (vg.profile)."""

    def __init__(self, rows, total_us, submission_us):
        self.rows, self.total_us, self.submission_us = rows, total_us, submission_us

    def __str__(self):
        w = max([len(r.primitives) for r in self.rows] + [10])
        lines = [f"{'kernel':<16} {'primitives':<{min(w, 48)}} {'shapes':<24} {'GPU us':>9} {'%':>6}"]
        for r in self.rows:
            prims = r.primitives if len(r.primitives) <= 48 else r.primitives[:45] + "..."
            lines.append(f"{r.kernel:<16} {prims:<{min(w, 48)}} {r.shapes:<24} {r.us:9.1f} "
                         f"{r.percent:6.1f}")
        lines.append(f"{'total':<16} {'':<{min(w, 48)}} {'':<24} {self.total_us:9.1f} {100.0:6.1f}")
        lines.append(f"one call, wall time until its submission is done: {self.submission_us:.1f} us")
        return "\n".join(lines)

    __repr__ = __str__


def _describe(eqn) -> tuple[str, str]:
    if eqn.prim.name == "fused":
        body = eqn.params["body"]
        prims = ",".join(dict.fromkeys(e.prim.name for e in body.eqns))
    else:
        flags = [k for k, v in eqn.params.items() if v is True]
        prims = eqn.prim.name + (f"[{','.join(flags)}]" if flags else "")
    shapes = " ".join(type_str(o.shape, o.dtype) for o in eqn.outputs)
    return prims, shapes


def profile(step, *args, runs: int = 10, **kwargs) -> Profile:
    """Run a jitted function `runs` times with GPU timestamps (donation off, so the arguments
    stay valid) and return the per-kernel table: kernel, primitives, shapes, median GPU us, %."""
    if not isinstance(step, Jitted):
        step = jit(step, backend="vulkan")
    elif step.backend is None:   # the default backend may be numpy (lavapipe): profile Vulkan
        step = jit(step.fun, static_argnums=step.static_argnums, backend="vulkan")
    entry, leaves = step._compiled(args, kwargs)
    runner = entry.runner
    if entry.backend == "vulkan" and entry.lowered is None:
        raise VkgradError("vg.profile times one Vulkan plan; this program's while loop runs as "
                          "several, driven from the host (vkgrad/execution/segmented.py): "
                          "profile its body as a function of its own")
    if entry.backend != "vulkan":
        raise VkgradError("vg.profile times Vulkan kernels, but this program runs on the numpy "
                          f"interpreter ({entry.fallback_reason or 'numpy backend'})")
    call(entry, leaves, timestamps=True)   # warm up: record, compile, first touch
    runner.last_submission.wait()
    per_kernel, walls = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        call(entry, leaves, timestamps=True)
        runner.last_submission.wait()          # the timestamps are read when it is done
        walls.append((time.perf_counter() - t0) * 1e6)
        ex = runner.last_run
        # [uploads, slot copies in] dispatches [slot copies out, download]: the dispatches sit
        # where the recording says, each loop body's once per step (its recorded order): a
        # step's time is their sum
        n = len(runner.lowered.steps)
        order = ex.order or range(n)
        start, end = ex.last_program_span
        sums = [0.0] * n
        for i, (label, us) in zip(order, ex.last_timings_us[start:end]):
            if label != ex.dispatches[i].kernel.name:
                raise VkgradError(f"vg.profile: timestamp {label!r} where kernel "
                                  f"{ex.dispatches[i].kernel.name!r} was recorded")
            sums[i] += us
        per_kernel.append(sums)
    med = np.median(np.asarray(per_kernel), axis=0)
    total = float(med.sum())
    rows = []
    for st, us in zip(runner.lowered.steps, med):
        prims, shapes = _describe(st.eqn)
        rows.append(ProfileRow(st.launch.name, prims, shapes, float(us),
                               100.0 * float(us) / total if total else 0.0))
    return Profile(rows, total, float(np.median(walls)))
