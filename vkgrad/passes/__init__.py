"""Passes: small named objects with one `apply(program) -> program` (see base.py's contract).

    dce              dead code elimination (from the 'pure' trait)
    cse              common subexpression elimination ('commutative' operands canonicalised)
    simplify         the algebraic rewrite table (simplify.RULES)
    fold_transposes  transpose of the last two axes -> matmul transpose flag
    fuse             elementwise and layout eqns grouped into `fused` kernels (fuse.py; run by
                     the jit before lowering, with canonicalize_for_lowering)
    inline_custom    custom_vjp/custom_jvp calls replaced by their bodies (inline.py)

`optimize(program, final=True)` inlines custom calls, then runs the first four until a round
changes nothing. `final=False` keeps stop_gradient and the custom calls: use it for a program
that may still be differentiated (a transform's result inside an outer trace).
"""

from __future__ import annotations

from vkgrad.ir.core import Program, print_program
from vkgrad.ir.verifier import checked
from vkgrad.passes.base import Pass
from vkgrad.passes.cse import CommonSubexpressionElimination, cse
from vkgrad.passes.dce import DeadCodeElimination, dce
from vkgrad.passes.fold_transposes import FoldTransposes, fold_transposes
from vkgrad.passes.inline import InlineCustom, inline_custom
from vkgrad.passes.simplify import RULES, Rule, Simplify, simplify

PASSES = {p.name: p for p in (dce, cse, simplify, fold_transposes, inline_custom)}
_simplify_keep_sg = simplify.without("stop_gradient")


def optimize(program: Program, *, final: bool = True, max_rounds: int = 8) -> Program:
    """The pipeline, round after round, until a round changes nothing (the printed program is
    the same: a rewrite that keeps the eqn count, such as folding a transpose into a flag, is a
    change) or `max_rounds` rounds ran."""
    pipeline = [simplify if final else _simplify_keep_sg, fold_transposes, cse, dce]
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


__all__ = ["Pass", "PASSES", "optimize", "dce", "cse", "simplify", "fold_transposes",
           "inline_custom", "InlineCustom", "RULES",
           "Rule", "Simplify", "DeadCodeElimination", "CommonSubexpressionElimination",
           "FoldTransposes"]
