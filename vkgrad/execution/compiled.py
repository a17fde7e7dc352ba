"""A compiled program: its stages (vkgrad/pipeline.py) and the runner that runs it.

On the Vulkan backend the program goes through every stage to `plan` and runs on a
`VulkanRunner`; a program the kernels cannot run (`Unsupported`) falls back WHOLE to the
interpreter (`fallbacks()` counts the reasons; VKGRAD_STRICT=1 makes it an error).
"""

from __future__ import annotations

import collections
import os
import sys
import warnings

from vkgrad import config
from vkgrad.config import env_reader
from vkgrad.errors import ArgumentError, VkgradError
from vkgrad.execution import fallback, fastpath, segmented
from vkgrad.lowering.contracts import Unsupported
from vkgrad.lowering.render import dot_svg
from vkgrad.pipeline import (FORMATS, STAGE_NAMES, Options, run_stages, stage_dot,
                                    stage_name, stage_text)
from vkgrad.runtime import get_device
from vkgrad.runtime.shaders import compile_threads
from vkgrad.runtime.runners import NumpyRunner, VulkanRunner, picker

BACKENDS = ("vulkan", "numpy")
_TIMED = ("trace", "grad", "optimized", "fused", "plan", "shaders", "pipelines", "buffers")

_fallbacks: collections.Counter = collections.Counter()
_warned_no_device = False
_noticed_cpu_device = False


class StrictModeError(VkgradError):
    """VKGRAD_STRICT=1 and a program would have fallen back to the interpreter."""


def fallbacks() -> dict:
    """How many compiled programs fell back to the numpy interpreter, by reason."""
    return dict(_fallbacks)


_backend_of_env: dict = {}
_backend_env, _device_env = env_reader("VKGRAD_BACKEND"), env_reader("VKGRAD_DEVICE")


def default_backend() -> str:
    """VKGRAD_BACKEND if set; else "vulkan" on a Vulkan GPU; else "numpy", with a one-line
    notice, once: when no Vulkan device opens, and when the only one is a CPU implementation
    (lavapipe) and VKGRAD_DEVICE does not ask for it. Asked on every jitted call: the answer is
    kept per value of the two variables.

    Why numpy on lavapipe (measured on a busy 2-core machine, 2026-11-30): an MLP training step
    (batch 256, 512-512-10, Adam) took 76-88 ms on the interpreter and 590-600 ms on lavapipe
    (issue 14, which asked for this, measured 9 vs 174 ms); the demo's step (2-64-64-3, batch
    128) 15-24 vs 17-18 ms, and compiling it 35 ms vs 440-670 ms (shaders)."""
    key = (_backend_env(), _device_env())
    hit = _backend_of_env.get(key)
    if hit is None:
        hit = _backend_of_env[key] = _default_backend(key[0])
    return hit


def _default_backend(env: str) -> str:
    global _warned_no_device, _noticed_cpu_device
    env = env.strip().lower()
    if env:
        if env not in BACKENDS:
            raise ArgumentError(f"VKGRAD_BACKEND={env!r}: choose one of {', '.join(BACKENDS)}")
        return env
    try:
        device = get_device()
    except VkgradError as e:
        if not _warned_no_device:
            fallback.warn(f"vkgrad: no Vulkan device ({e}); running on the numpy interpreter")
            _warned_no_device = True
        return "numpy"
    if not device.target.interpreter_faster or os.environ.get("VKGRAD_DEVICE", "").strip():
        return "vulkan"
    if not _noticed_cpu_device:
        print(f"vkgrad: running on the numpy interpreter: the only Vulkan device, "
              f"{device.info.name}, runs on the CPU and is slower than numpy here "
              "(VKGRAD_BACKEND=vulkan uses it anyway)", file=sys.stderr)
        _noticed_cpu_device = True
    return "numpy"


def log(msg: str) -> None:
    """A line on stderr when VKGRAD_LOG_COMPILES is set (or inside vg.log_compiles())."""
    if config.switches.log_compiles or os.environ.get("VKGRAD_LOG_COMPILES", "") not in ("", "0"):
        print(f"vkgrad: {msg}", file=sys.stderr)


class Compiled:
    """One compiled program: `stages` ({name: value}), `runner`, and the output structure."""

    def __init__(self, program, out_tree, backend: str, donated, disabled=frozenset(),
                 times=None):
        self.out_tree = out_tree
        self.donated = tuple(sorted(donated))   # leaf indices whose Arrays a call consumes
        self.stages: dict = {}
        self.options = Options(disabled=frozenset(disabled))
        self.times = dict(times or {})         # seconds per compile stage (VKGRAD_LOG_COMPILES)
        self.fallback_reason = None
        self.runner = None
        if backend == "vulkan":
            try:
                device = get_device()
                self.options = Options(target=device.target, disabled=frozenset(disabled),
                                       donated=frozenset(donated))
                run_stages(program, "plan", self.options, self.stages, self.times)
                self.runner = VulkanRunner(device, self.stages["plan"])
                self.times.update(self.runner.compile_times)
            except Unsupported as u:
                self.stages.pop("fused", None)
                self.runner = self._segmented(device)
                if self.runner is None:
                    self._fall_back(program, device, u)
        if self.runner is None:
            run_stages(program, "optimized", self.options, values=self.stages, times=self.times)
            self.runner = NumpyRunner(self.stages["optimized"])
        # a call's way to the runner that also says whether the arguments were distinct
        # (vkgrad/execution/array.py), and its donated leaves
        self.run_distinct = hasattr(self.runner, "run_distinct")
        self.gone = picker(self.donated)
        # the type of each result, one object per type (fastpath.py compares them by identity)
        self.out_avals = [fastpath.intern(o.type) for o in self.stages["optimized"].outputs]
        self.build_outputs = fastpath.builder(out_tree)   # result leaves -> result pytree
        # a runner's outs -> result Arrays
        self.results = fastpath.results(self.out_avals, getattr(self.runner, "owned_results",
                                                                None),
                                        getattr(self.runner, "future_results", None))

    def _segmented(self, device):
        """A program with while loops at its top level: the SegmentedRunner (its parts on
        Vulkan, each loop driven from the host), or None where a part cannot run there."""
        optimized = self.stages.get("optimized")
        if optimized is None or not segmented.splits(optimized):
            return None
        try:
            runner = segmented.SegmentedRunner(device, optimized, self.options)
        except Unsupported:
            return None
        self.times.update(runner.compile_times)
        return runner

    def _fall_back(self, program, device, u) -> None:
        self.fallback_reason = u.reason
        _fallbacks[u.reason] += 1
        why = fallback.explain(program, u)
        if os.environ.get("VKGRAD_STRICT", "") not in ("", "0"):
            raise StrictModeError(f"{program.name} cannot run on Vulkan: {why} "
                                  "(VKGRAD_STRICT=1 forbids the interpreter fallback)")
        fallback.warn(f"vkgrad: {program.name} runs on the numpy interpreter, not on "
                      f"{device.info.name}: {why}")

    def describe_times(self) -> str:
        """One line: seconds per compile stage, and what the kernels cost."""
        t = self.times
        parts = [f"{k} {t[k]:.3f} s" for k in ("trace", "optimized", "fused", "plan")
                 if k in t]
        if "shaders" in t:
            parts += [f"{t['kernels']} shaders {t['shaders']:.3f} s ({t['compiled']} compiled "
                      f"on up to {compile_threads()} threads, {t['from_disk']} from the SPIR-V "
                      f"cache)",
                      f"{t['new_pipelines']} pipelines {t['pipelines']:.3f} s",
                      f"buffers {t['buffers']:.3f} s"]
        total = sum(v for k, v in t.items() if k in _TIMED)
        return ", ".join(parts) + f"; total {total:.3f} s"

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
        """The plan (vkgrad.lowering.lower.Lowered), or None on the interpreter."""
        return self.stages.get("plan")

    def compile(self) -> "Compiled":
        return self

    def as_text(self, stage: str = "plan", format: str = "text") -> str:
        """The program at `stage`, as text, Graphviz DOT or SVG (`format`); the stages are
        those of `python -m vkgrad dump --stage` (vkgrad/pipeline.py)."""
        stage = stage_name(stage)
        if format not in FORMATS:
            raise ArgumentError(f"format={format!r}: choose one of {', '.join(FORMATS)}")
        if stage == "glsl" and "plan" in self.stages:
            run_stages(None, "glsl", self.options, self.stages)
        if stage not in self.stages:
            return (f"# {stage}: not lowered to Vulkan "
                    f"({self.fallback_reason or 'numpy backend'})\n")
        value = self.stages[stage]
        if format == "text":
            return stage_text(value)
        dot = stage_dot(value)
        return dot if format == "dot" else dot_svg(dot)

    def stats(self) -> dict:
        st = {"backend": self.backend, "traced_eqns": len(self.stages["traced"].eqns),
              "optimized_eqns": len(self.stages["optimized"].eqns),
              "eqns": len(self.stages["optimized"].eqns),
              "fallback": self.fallback_reason,
              "disabled_passes": sorted(self.options.disabled)}
        lw = self.lowered
        if lw is not None:
            mem = lw.memory()
            st.update(dispatches=len(lw.steps),
                      buffers=len(lw.slots),
                      peak_bytes=mem["peak"],
                      scratch_bytes=mem["scratch"],
                      saved_bytes=lw.saved_bytes(),
                      # dispatches per primitive ("fused" = generated elementwise kernels;
                      # a kernel with fused loads/stores counts as its own primitive)
                      kernels=dict(collections.Counter(_kernel_name(s.eqn) for s in lw.steps)))
        return st

    def _repr_markdown_(self) -> str:
        """A notebook shows the plan (or, on the interpreter, the optimized program)."""
        st = self.stats()
        head = ", ".join(f"{k} {st[k]}" for k in ("backend", "eqns", "dispatches", "buffers",
                                                  "peak_bytes", "saved_bytes") if k in st)
        stage = "plan" if self.lowered is not None else "optimized"
        return f"**{head}**\n\n```\n{self.as_text(stage)}```\n"


def _kernel_name(eqn) -> str:
    if eqn.prim.name != "fused":
        return eqn.prim.name
    body = eqn.params["body"]
    anchors = [b.prim.name for b in body.eqns if not b.prim.fusible]
    if eqn.params.get("kind") == "horizontal_reduce":     # one kernel for all its members
        return f"{anchors[0]}[horizontal]"
    return "+".join(anchors) if anchors else "fused"
