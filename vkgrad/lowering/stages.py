"""The compiler's stages, in order: ONE table for `vg.jit(f).lower(...).as_text(stage)` and
`python -m vkgrad dump --stage`, so a stage name means the same thing in both.

Each stage is a function (value of the previous stage, options) -> value: a Program up to
`fused`, then the `Lowered` plan (dispatches and buffers), then the GLSL listing (text).
Each prints as text (`stage_text`) and as Graphviz DOT (`stage_dot`; not `glsl`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from vkgrad.errors import ArgumentError
from vkgrad.ir.core import Program, print_program
from vkgrad.ir.verifier import checked
from vkgrad.lowering.lower import Lowered, lower
from vkgrad.lowering.matmul import splits_k
from vkgrad.lowering.render import glsl_text, plan_graph, program_graph, to_dot
from vkgrad.passes import fuse_program, optimize
from vkgrad.transforms.autodiff import grad_program


@dataclass
class Options:
    grad: bool = False               # `grad` stage: differentiate (the dump's --grad)
    argnums: tuple = (0,)            # ... with respect to these inputs
    device_info: object = None       # `plan` stage: plan for this device (None: generic)
    disabled: frozenset = frozenset()   # passes switched off (vkgrad.passes.disabled_passes)


@dataclass(frozen=True)
class Stage:
    name: str
    meaning: str
    run: Callable = field(repr=False)


def _grad(program: Program, opts: Options) -> Program:
    return checked(grad_program(program, opts.argnums), "autodiff") if opts.grad else program


STAGES = (
    Stage("traced", "the function as traced (a vg.grad inside it is already differentiated)",
          lambda p, opts: p),
    Stage("grad", "with --grad, the joint forward+backward program of its gradient (without, "
          "the traced program), before optimization", _grad),
    Stage("optimized", "after simplify, fold_transposes, cse, dce",
          lambda p, opts: optimize(p, final=True, disabled=opts.disabled)),
    Stage("fused", "after remat (save or recompute) and fusion: each top-level eqn is one GPU "
          "kernel (`fused` ones: generated, or a hand-written kernel with fused loads/stores)",
          lambda p, opts: fuse_program(p, opts.disabled, gpu=splits_k(opts.device_info))),
    Stage("plan", "the dispatches in order (kernel, shapes, workgroups), buffers with sizes and "
          "lifetimes, peak bytes, the saved residuals: what vg.jit records",
          lambda p, opts: lower(p, opts.device_info, reuse="memory" not in opts.disabled)),
    Stage("glsl", "the shader of every dispatch, headed by the eqns it computes",
          lambda lw, opts: glsl_text(lw)),
)
STAGE_NAMES = tuple(s.name for s in STAGES)
# Older names, still accepted: `lowered` was the plan's name before it showed memory.
ALIASES = {"lowered": "plan"}
FORMATS = ("text", "dot", "svg")


def stage_name(name: str) -> str:
    """The stage `name` (or an alias of it) stands for; an unknown one is an ArgumentError."""
    name = ALIASES.get(name, name)
    if name not in STAGE_NAMES:
        raise ArgumentError(f"stage={name!r}: choose one of {', '.join(STAGE_NAMES)}")
    return name


def run_stages(program: Program, until: str, opts: Options | None = None,
               values: dict | None = None, times: dict | None = None) -> dict:
    """{stage name: value} for every stage up to and including `until`, filled into `values`
    as they complete (so a caller that catches a later stage's error keeps the earlier ones;
    stages already in `values` are not run again); `times` gets the seconds each stage took."""
    opts = opts or Options()
    until = stage_name(until)
    values = {} if values is None else values
    value = program
    for st in STAGES[: STAGE_NAMES.index(until) + 1]:
        if st.name in values:
            value = values[st.name]
            continue
        t0 = time.perf_counter()
        value = values[st.name] = st.run(value, opts)
        if times is not None:
            times[st.name] = time.perf_counter() - t0
    return values


def stage_text(value, *, source: bool = False, donation: dict | None = None) -> str:
    """The printed form of a stage's value."""
    if isinstance(value, Program):
        return print_program(value, source=source)
    if isinstance(value, Lowered):
        return value.text(donation)
    return value


def stage_dot(value) -> str:
    """Graphviz DOT of a stage's value (a program's eqns, or the plan's dispatches)."""
    if isinstance(value, Program):
        return to_dot(program_graph(value))
    if isinstance(value, Lowered):
        return to_dot(plan_graph(value))
    raise ArgumentError("the glsl stage has no graph; use --format text")


def describe_stages() -> str:
    """One line per stage: its name and meaning (for --help texts and errors)."""
    return "\n".join(f"  {s.name:<10} {s.meaning}" for s in STAGES)
