"""The compile pipeline as data: the stages in order, and the passes each runs, by name.

ONE table for `vg.jit(f).lower(...).as_text(stage)` and `python -m vkgrad dump --stage`, so a
stage name means the same thing in both. Each stage is a function (value of the previous stage,
options) -> value: a Program up to `fused`, then the `Lowered` plan (dispatches and buffers),
then the GLSL listing (text). Each prints as text (`stage_text`) and as Graphviz DOT
(`stage_dot`; not `glsl`).

The pass lists are names (`OPTIMIZE`, `FUSE`), looked up in `PASSES`: the target-independent
passes of vkgrad/passes/ and the kernel-fusion passes of vkgrad/lowering/fusion/, which are
given the Target (`for_target`) because what pays depends on the device. Any pass can be
switched off by name: `VKGRAD_DISABLE_PASSES=fuse,remat` or `vg.jit(f, disable_passes=...)`;
`memory` (the lowering's buffer reuse) too.

This module sits above the lowering (it runs autodiff, the passes, the lowering and the
donation plan); a runner allocates and runs a finished plan and never rewrites it.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Callable

from vkgrad.config import env_reader
from vkgrad.errors import ArgumentError
from vkgrad.ir.core import Program, print_program
from vkgrad.ir.verifier import checked
from vkgrad.lowering import loops
from vkgrad.lowering.donation import plan_donation
from vkgrad.lowering.fusion import KERNEL_FUSION_PASSES
from vkgrad.lowering.lower import Lowered, lower
from vkgrad.lowering.render import glsl_text, plan_graph, program_graph, to_dot
from vkgrad.passes import OPTIMIZE, PASSES as _TARGET_FREE_PASSES, optimize
from vkgrad.passes.fuse import canonicalize_for_lowering, fuse_nothing
from vkgrad.target import target_of
from vkgrad.transforms.autodiff import grad_program

# every pass by name; those that take a Target answer `for_target`
PASSES = {**_TARGET_FREE_PASSES, **KERNEL_FUSION_PASSES}
# the `optimized` stage: OPTIMIZE (passes/__init__.py), round after round until a round
# changes nothing
# the `fused` stage, in order (canonicalize_for_lowering runs after remat, always);
# attention_scores first (what it writes out is plain eqns for all that follows), then
# widen_halves: the converts it adds around kernels fuse like any others
FUSE = ("attention_scores", "widen_halves", "select_conds", "inline_checkpoints", "remat", "fuse", "fuse_producers",
        "fuse_epilogues", "fuse_multi_output", "fuse_rows", "fuse_horizontal",
        "fuse_horizontal_reductions", "fold_attention_layouts", "fold_conv_layouts")
# Names that switch something off besides the passes (the lowering's buffer reuse).
OTHER_SWITCHES = ("memory",)
# Switch these off for the plan of loop fusion alone (kernels without fused loads and stores,
# one optimizer kernel per parameter shape).
LOOP_FUSION_ONLY = ("remat", "fuse_producers", "fuse_epilogues", "fuse_multi_output",
                    "fuse_rows", "fuse_horizontal", "fuse_horizontal_reductions")


_disable_passes_env = env_reader("VKGRAD_DISABLE_PASSES")   # read on every jitted call


def disabled_passes(names=None) -> frozenset:
    """The set of switched-off pass names: `names` (a comma-separated string or an iterable),
    else VKGRAD_DISABLE_PASSES. An unknown name is an error that lists the known ones."""
    if names is None:
        names = _disable_passes_env()
    if isinstance(names, str):
        return _parse(names)
    return _parse(",".join(names))


@functools.lru_cache(maxsize=64)
def _parse(names: str) -> frozenset:
    out = frozenset(n.strip() for n in names.split(",") if n.strip())
    unknown = out - set(PASSES) - set(OTHER_SWITCHES)
    if unknown:
        raise ArgumentError(f"unknown pass(es) to disable: {', '.join(sorted(unknown))}; known: "
                            f"{', '.join(list(PASSES) + list(OTHER_SWITCHES))}")
    return out


def pass_for(name: str, target=None):
    """The pass `name`, configured for `target` where it depends on the device."""
    p = PASSES[name]
    return p.for_target(target_of(target)) if hasattr(p, "for_target") else p


def fuse_program(program: Program, disabled: frozenset = frozenset(), target=None) -> Program:
    """From an optimized program to the kernels to run on `target`: the FUSE list (without
    `fuse`, nothing is fused: one kernel per eqn). A scan's body is fused the same way, on its
    own: the lowering lowers it once (lowering/loops.py); the bodies are fused after
    select_conds has made each cond its branches and a select, since a branch may hold a scan
    (a bounded while loop: execution/segmented.py). (A while loop runs as chunks.)"""
    split = FUSE.index("select_conds") + 1
    program = _run_passes(program, FUSE[:split], disabled, target)
    program = program.replace(eqns=tuple(
        e.replace(params=e.params.replace(jaxpr=fuse_program(e.params["jaxpr"], disabled,
                                                             target)))
        if loops.lowers(e) else e for e in program.eqns))
    return _run_passes(program, FUSE[split:], disabled, target)


def _run_passes(program: Program, names, disabled: frozenset, target) -> Program:
    for name in names:
        if name == "fuse":
            program = checked(canonicalize_for_lowering.apply(program),
                              "canonicalize_for_lowering")
            if name in disabled:
                return checked(fuse_nothing.apply(program), "pass fuse_nothing")
        if name not in disabled:
            program = checked(pass_for(name, target).apply(program), f"pass {name}")
    return program


@dataclass
class Options:
    grad: bool = False               # `grad` stage: differentiate (the dump's --grad)
    argnums: tuple = (0,)            # ... with respect to these inputs
    target: object = None            # plan for this Target (None: the generic one)
    disabled: frozenset = frozenset()   # passes switched off (disabled_passes)
    donated: frozenset = frozenset()    # `plan` stage: inputs whose buffers results may reuse


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
    Stage("optimized", "after " + ", ".join(OPTIMIZE),
          lambda p, opts: optimize(p, final=True, disabled=opts.disabled, passes=OPTIMIZE)),
    Stage("fused", "after remat (save or recompute) and fusion: each top-level eqn is one GPU "
          "kernel (`fused` ones: generated, or a hand-written kernel with fused loads/stores)",
          lambda p, opts: fuse_program(p, opts.disabled, opts.target)),
    Stage("plan", "the dispatches in order (kernel, shapes, workgroups), buffers with sizes and "
          "lifetimes, peak bytes, the saved residuals, which results reuse donated arguments' "
          "buffers: what vg.jit records",
          lambda p, opts: plan_donation(lower(p, opts.target, reuse="memory" not in opts.disabled),
                                        opts.donated)),
    Stage("glsl", "the shader of every dispatch, headed by the eqns it computes",
          lambda lw, opts: glsl_text(lw)),
)
STAGE_NAMES = tuple(s.name for s in STAGES)
FORMATS = ("text", "dot", "svg")
# Older stage names, still accepted: `lowered` was the plan's name before it showed memory.
STAGE_ALIASES = {"lowered": "plan"}


def stage_name(name: str) -> str:
    """The stage `name` (or an alias of it) stands for; an unknown one is an ArgumentError."""
    name = STAGE_ALIASES.get(name, name)
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


def stage_text(value, *, source: bool = False) -> str:
    """The printed form of a stage's value."""
    if isinstance(value, Program):
        return print_program(value, source=source)
    if isinstance(value, Lowered):
        return value.text()
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
