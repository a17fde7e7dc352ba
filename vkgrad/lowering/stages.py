"""The compiler's stages, in order: ONE table for `vg.jit(f).lower(...).as_text(stage)` and
`python -m vkgrad dump --stage`, so a stage name means the same thing in both.

Each stage is a function (value of the previous stage, options) -> value; every value is a
Program until `lowered`, which is a `Lowered` (dispatches and buffers).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from vkgrad.ir.core import Program, print_program
from vkgrad.ir.verifier import checked
from vkgrad.lowering.lower import lower
from vkgrad.passes import optimize
from vkgrad.passes.fuse import canonicalize_for_lowering, fuse
from vkgrad.transforms.autodiff import grad_program


@dataclass
class Options:
    grad: bool = False               # `grad` stage: differentiate (the dump's --grad)
    argnums: tuple = (0,)            # ... with respect to these inputs
    device_info: object = None       # `lowered` stage: plan for this device (None: generic)


@dataclass(frozen=True)
class Stage:
    name: str
    meaning: str
    run: Callable = field(repr=False)


def _grad(program: Program, opts: Options) -> Program:
    return checked(grad_program(program, opts.argnums), "autodiff") if opts.grad else program


def _fuse(program: Program, opts: Options) -> Program:
    return checked(fuse.apply(canonicalize_for_lowering.apply(program)), "pass fuse")


STAGES = (
    Stage("traced", "the function as traced (a vg.grad inside it is already differentiated)",
          lambda p, opts: p),
    Stage("grad", "with --grad, the joint forward+backward program of its gradient, before "
          "optimization (otherwise the traced program)", _grad),
    Stage("optimized", "after the pass pipeline: simplify, fold_transposes, cse, dce",
          lambda p, opts: optimize(p, final=True)),
    Stage("fused", "elementwise and layout eqns grouped into `fused` eqns, one generated GPU "
          "kernel each (what runs on the GPU)", _fuse),
    Stage("lowered", "the dispatches and buffers vg.jit records for the device",
          lambda p, opts: lower(p, opts.device_info)),
)
STAGE_NAMES = tuple(s.name for s in STAGES)


def run_stages(program: Program, until: str, opts: Options | None = None,
               values: dict | None = None, times: dict | None = None) -> dict:
    """{stage name: value} for every stage up to and including `until`, filled into `values`
    as they complete (so a caller that catches a later stage's error keeps the earlier ones);
    `times` gets the seconds each stage took."""
    opts = opts or Options()
    if until not in STAGE_NAMES:
        raise ValueError(f"unknown stage {until!r}")
    values = {} if values is None else values
    value = program
    for st in STAGES[: STAGE_NAMES.index(until) + 1]:
        t0 = time.perf_counter()
        value = values[st.name] = st.run(value, opts)
        if times is not None:
            times[st.name] = time.perf_counter() - t0
    return values


def stage_text(value, *, source: bool = False) -> str:
    """The printed form of a stage's value."""
    return print_program(value, source=source) if isinstance(value, Program) else value.text()


def describe_stages() -> str:
    """One line per stage: its name and meaning (for --help texts and errors)."""
    return "\n".join(f"  {s.name:<10} {s.meaning}" for s in STAGES)
