"""A compiled program: its stages (vkgrad/lowering/stages.py) and the runner that runs it.

On the Vulkan backend the program goes through every stage to `lowered` and runs on a
`VulkanRunner`; a program the kernels cannot run (`Unsupported`) falls back WHOLE to the
interpreter (`fallbacks()` counts the reasons; VKGRAD_STRICT=1 makes it an error).
"""

from __future__ import annotations

import collections
import os
import sys
import warnings

from vkgrad.errors import ArgumentError, VkgradError
from vkgrad.lowering.lower import Unsupported
from vkgrad.lowering.stages import STAGE_NAMES, Options, run_stages, stage_text
from vkgrad.runtime import get_device
from vkgrad.runtime.runners import NumpyRunner, VulkanRunner

BACKENDS = ("vulkan", "numpy")

_fallbacks: collections.Counter = collections.Counter()
_warned_no_device = False
_noticed_cpu_device = False


class StrictModeError(VkgradError):
    """VKGRAD_STRICT=1 and a program would have fallen back to the interpreter."""


def fallbacks() -> dict:
    """How many compiled programs fell back to the numpy interpreter, by reason."""
    return dict(_fallbacks)


def default_backend() -> str:
    """VKGRAD_BACKEND if set; else "vulkan" on a Vulkan GPU; else "numpy", with a one-line
    notice, once: when no Vulkan device opens, and when the only one is a CPU implementation
    (lavapipe) and VKGRAD_DEVICE does not ask for it.

    Why numpy on lavapipe (measured on a busy 2-core machine, 2026-11-30): an MLP training step
    (batch 256, 512-512-10, Adam) took 76-88 ms on the interpreter and 590-600 ms on lavapipe
    (issue 14, which asked for this, measured 9 vs 174 ms); the demo's step (2-64-64-3, batch
    128) 15-24 vs 17-18 ms, and compiling it 35 ms vs 440-670 ms (shaders)."""
    global _warned_no_device, _noticed_cpu_device
    env = os.environ.get("VKGRAD_BACKEND", "").strip().lower()
    if env:
        if env not in BACKENDS:
            raise ArgumentError(f"VKGRAD_BACKEND={env!r}: choose one of {', '.join(BACKENDS)}")
        return env
    try:
        device = get_device()
    except VkgradError as e:
        if not _warned_no_device:
            warnings.warn(f"vkgrad: no Vulkan device ({e}); running on the numpy interpreter",
                          stacklevel=3)
            _warned_no_device = True
        return "numpy"
    if device.info.type != "CPU" or os.environ.get("VKGRAD_DEVICE", "").strip():
        return "vulkan"
    if not _noticed_cpu_device:
        print(f"vkgrad: running on the numpy interpreter: the only Vulkan device, "
              f"{device.info.name}, runs on the CPU and is slower than numpy here "
              "(VKGRAD_BACKEND=vulkan uses it anyway)", file=sys.stderr)
        _noticed_cpu_device = True
    return "numpy"


def log(msg: str) -> None:
    """A line on stderr when VKGRAD_LOG_COMPILES is set."""
    if os.environ.get("VKGRAD_LOG_COMPILES", "") not in ("", "0"):
        print(f"vkgrad: {msg}", file=sys.stderr)


class Compiled:
    """One compiled program: `stages` ({name: value}), `runner`, and the output structure."""

    def __init__(self, program, out_tree, backend: str, donated):
        self.out_tree = out_tree
        self.donated = tuple(sorted(donated))   # leaf indices whose Arrays a call consumes
        self.stages: dict = {}
        self.fallback_reason = None
        self.runner = None
        if backend == "vulkan":
            try:
                device = get_device()
                run_stages(program, "lowered", Options(device_info=device.info), self.stages)
                self.runner = VulkanRunner(device, self.stages["lowered"], donated)
                self.stages["lowered"] = self.runner.lowered   # in the order it runs
            except Unsupported as u:
                self.stages.pop("fused", None)
                self.fallback_reason = u.reason
                _fallbacks[u.reason] += 1
                if os.environ.get("VKGRAD_STRICT", "") not in ("", "0"):
                    raise StrictModeError(f"{program.name} cannot run on Vulkan: {u.reason} "
                                          "(VKGRAD_STRICT=1 forbids the interpreter fallback)")
                log(f"{program.name} falls back to the numpy interpreter: {u.reason}")
        if self.runner is None:
            run_stages(program, "optimized", values=self.stages)
            self.runner = NumpyRunner(self.stages["optimized"])

    def __repr__(self) -> str:
        st = self.stats()
        what = (f"{st['dispatches']} dispatches" if "dispatches" in st else
                f"{st['optimized_eqns']} eqns" + (f", fell back: {self.fallback_reason}"
                                                  if self.fallback_reason else ""))
        return f"<vkgrad.jit.Compiled {self.stages['traced'].name}: {self.backend}, {what}>"

    def _repr_pretty_(self, p, cycle) -> None:
        """IPython/Jupyter show the optimized program (as jax.make_jaxpr shows a jaxpr), with a
        line saying where it runs and how to see the other stages."""
        p.text(f"# {self!r}; .as_text(stage) for the stages ({', '.join(STAGE_NAMES)}), "
               f".stats()\n" + self.as_text("optimized").rstrip("\n"))

    @property
    def backend(self) -> str:
        return "numpy" if isinstance(self.runner, NumpyRunner) else "vulkan"

    @property
    def lowered(self):
        return self.stages.get("lowered")

    def compile(self) -> "Compiled":
        return self

    def as_text(self, stage: str = "lowered") -> str:
        """The program at `stage` (see `python -m vkgrad dump --help` for the stages)."""
        if stage not in STAGE_NAMES:
            raise ArgumentError(f"stage={stage!r}: choose one of {', '.join(STAGE_NAMES)}")
        if stage not in self.stages:
            return (f"# {stage}: not lowered to Vulkan "
                    f"({self.fallback_reason or 'numpy backend'})\n")
        return stage_text(self.stages[stage])

    def stats(self) -> dict:
        st = {"backend": self.backend, "traced_eqns": len(self.stages["traced"].eqns),
              "optimized_eqns": len(self.stages["optimized"].eqns),
              "fallback": self.fallback_reason}
        lw = self.lowered
        if lw is not None:
            st.update(dispatches=len(lw.steps),
                      buffers=len(lw.slots),
                      scratch_bytes=sum(s.size * 4 for s in lw.slots if s.kind == "scratch"),
                      # dispatches per primitive ("fused" = generated elementwise kernels)
                      kernels=dict(collections.Counter(s.eqn.prim.name for s in lw.steps)))
        return st
