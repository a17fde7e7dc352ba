"""Passes: small named objects with one `apply(program) -> program` (see base.py's contract).

    dce                dead code elimination (from the 'pure' trait)
    cse                common subexpression elimination ('commutative' operands canonicalised)
    simplify           the algebraic rewrite table (simplify.RULES)
    fold_transposes    transpose of the last two axes -> matmul transpose flag
    remat              save or recompute: which forward values the backward reads from memory,
                       by a min cut (remat.py)
    fuse               elementwise and layout eqns grouped into `fused` loop kernels (fuse.py)
    fuse_producers     elementwise chains computed in the loads of the kernels they feed
    fuse_epilogues     elementwise work on a kernel's result done in its store
    fuse_multi_output  a bias gradient's column sum computed by its weight gradient's matmul
    fuse_horizontal    independent loop kernels of any shapes as one dispatch (the optimizer)
    inline_custom      custom_vjp/custom_jvp calls replaced by their bodies (inline.py)

`optimize(program, final=True)` inlines custom calls, then runs the first four until a round
changes nothing. `final=False` keeps stop_gradient and the custom calls: use it for a program
that may still be differentiated (a transform's result inside an outer trace). `fuse_program(program)` runs the rest, in the order
above: the `fused` stage of vkgrad/lowering/stages.py.

Any of them can be switched off by name: `VKGRAD_DISABLE_PASSES=fuse,remat,cse,simplify` in
the environment, or `vg.jit(f, disable_passes=...)`; `memory` (the lowering's buffer reuse)
too. Without `fuse` nothing is fused: one kernel per eqn. Results are the same either way
(within float32 rounding); tests/test_fusion_e2e.py checks that on whole training steps.
"""

from __future__ import annotations

import functools
import os

from vkgrad.errors import ArgumentError
from vkgrad.ir.core import Program, print_program
from vkgrad.ir.verifier import checked
from vkgrad.passes.base import Pass
from vkgrad.passes.cse import CommonSubexpressionElimination, cse
from vkgrad.passes.dce import DeadCodeElimination, dce
from vkgrad.passes.fold_transposes import FoldTransposes, fold_transposes
from vkgrad.passes.fuse import canonicalize_for_lowering, fuse, fuse_nothing
from vkgrad.passes.fuse_epilogues import fuse_epilogues
from vkgrad.passes.fuse_horizontal import fuse_horizontal
from vkgrad.passes.fuse_multi_output import fuse_multi_output
from vkgrad.passes.fuse_producers import fuse_producers
from vkgrad.passes.remat import remat
from vkgrad.passes.inline import InlineCustom, inline_custom
from vkgrad.passes.kernel_fusion import HookFusion
from vkgrad.passes.simplify import RULES, Rule, Simplify, simplify

PASSES = {p.name: p for p in (dce, cse, simplify, fold_transposes, inline_custom, remat, fuse,
                              fuse_producers, fuse_epilogues, fuse_multi_output,
                              fuse_horizontal)}
FUSION_PASSES = (fuse_producers, fuse_epilogues, fuse_multi_output, fuse_horizontal)
# the same for a CPU target (lavapipe): matmuls take fused loads and stores there that a GPU's
# do not (passes/kernel_fusion.py: takes_hooks)
FUSION_PASSES_CPU = tuple(type(p)(gpu=False) if isinstance(p, HookFusion) else p
                          for p in FUSION_PASSES)
# Names that switch something off besides the passes above (the lowering's buffer reuse).
OTHER_SWITCHES = ("memory",)
# Switch these off for the plan of loop fusion alone (kernels without fused loads and stores,
# one optimizer kernel per parameter shape): what vkgrad ran before they existed.
LOOP_FUSION_ONLY = ("remat", "fuse_producers", "fuse_epilogues", "fuse_multi_output",
                  "fuse_horizontal")
_simplify_keep_sg = simplify.without("stop_gradient")


def disabled_passes(names=None) -> frozenset:
    """The set of switched-off pass names: `names` (a comma-separated string or an iterable),
    else VKGRAD_DISABLE_PASSES. An unknown name is an error that lists the known ones."""
    if names is None:
        names = os.environ.get("VKGRAD_DISABLE_PASSES", "")
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


def optimize(program: Program, *, final: bool = True, max_rounds: int = 8,
             disabled: frozenset = frozenset()) -> Program:
    """The pipeline, round after round, until a round changes nothing (the printed program is
    the same: a rewrite that keeps the eqn count, such as folding a transpose into a flag, is a
    change) or `max_rounds` rounds ran."""
    pipeline = [simplify if final else _simplify_keep_sg, fold_transposes, cse, dce]
    pipeline = [p for p in pipeline if p.name not in disabled]
    if final:
        program = checked(inline_custom.apply(program), f"pass {inline_custom.name}")
    text = print_program(program)
    for _ in range(max_rounds):
        for p in pipeline:
            program = checked(p.apply(program), f"pass {p.name}")
        before, text = text, print_program(program)
        if text == before:
            break
    return program


def fuse_program(program: Program, disabled: frozenset = frozenset(),
                 gpu: bool = True) -> Program:
    """From an optimized program to the kernels to run: remat, then fusion (or none).
    `gpu`: the target is a GPU, not a CPU implementation of Vulkan (lavapipe)."""
    if "remat" not in disabled:
        program = checked(remat.apply(program), "pass remat")
    program = checked(canonicalize_for_lowering.apply(program), "canonicalize_for_lowering")
    if "fuse" in disabled:
        return checked(fuse_nothing.apply(program), "pass fuse_nothing")
    program = checked(fuse.apply(program), "pass fuse")
    for p in FUSION_PASSES if gpu else FUSION_PASSES_CPU:
        if p.name not in disabled:
            program = checked(p.apply(program), f"pass {p.name}")
    return program


__all__ = ["Pass", "PASSES", "optimize", "fuse_program", "disabled_passes", "dce", "cse",
           "simplify", "fold_transposes", "remat", "fuse", "fuse_producers", "fuse_epilogues",
           "fuse_multi_output", "fuse_horizontal", "RULES", "Rule", "Simplify",
           "DeadCodeElimination", "CommonSubexpressionElimination", "FoldTransposes",
           "LOOP_FUSION_ONLY", "inline_custom", "InlineCustom"]
