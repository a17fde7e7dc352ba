"""Passes: small named objects with one `apply(program) -> program` (see base.py's contract).

    dce              dead code elimination (from the 'pure' trait)
    cse              common subexpression elimination ('commutative' operands canonicalised)
    simplify         the algebraic rewrite table (simplify.RULES)
    fold_transposes  transpose of the last two axes -> matmul transpose flag

`optimize(program, final=True)` runs them to a fixed point. `final=False` keeps stop_gradient:
use it for a program that may still be differentiated (a transform's result inside an outer
trace).
"""

from __future__ import annotations

from vkgrad.ir.core import Program
from vkgrad.ir.passes.base import Pass
from vkgrad.ir.passes.cse import CommonSubexpressionElimination, cse
from vkgrad.ir.passes.dce import DeadCodeElimination, dce
from vkgrad.ir.passes.fold_transposes import FoldTransposes, fold_transposes
from vkgrad.ir.passes.simplify import RULES, Rule, Simplify, simplify
from vkgrad.ir.verifier import checked

PASSES = {p.name: p for p in (dce, cse, simplify, fold_transposes)}
_simplify_keep_sg = simplify.without("stop_gradient")


def optimize(program: Program, *, final: bool = True, max_rounds: int = 4) -> Program:
    pipeline = [simplify if final else _simplify_keep_sg, fold_transposes, cse, dce]
    for _ in range(max_rounds):
        before = len(program.eqns)
        for p in pipeline:
            program = checked(p.apply(program), f"pass {p.name}")
        if len(program.eqns) == before:
            break
    return program


__all__ = ["Pass", "PASSES", "optimize", "dce", "cse", "simplify", "fold_transposes", "RULES",
           "Rule", "Simplify", "DeadCodeElimination", "CommonSubexpressionElimination",
           "FoldTransposes"]
