"""Passes that do not depend on the device: small named objects with one
`apply(program) -> program` (see base.py's contract).

    dce                dead code elimination (from the 'pure' trait)
    cse                common subexpression elimination ('commutative' operands canonicalised)
    simplify           the algebraic rewrite table (simplify.RULES)
    fold_transposes    transpose of the last two axes -> matmul transpose flag
    remat              save or recompute: which forward values the backward reads from memory,
                       by a min cut (remat.py)
    fuse               elementwise and layout eqns grouped into `fused` loop kernels (fuse.py)
    fuse_horizontal    independent loop kernels of any shapes as one dispatch (the optimizer)
    inline_custom      custom_vjp/custom_jvp calls replaced by their bodies (inline.py)
    inline_checkpoints checkpoint eqns (vg.checkpoint) replaced by their bodies (inline.py)
    select_conds       a cond as every branch and a select of their results (for the device)
    scans              a scan another repeats merged into it; stacked results nobody reads
                       dropped (scans.py)

The passes that fuse into hand-written kernels depend on the kernel and the device: they are in
vkgrad/lowering/fusion/. The pipeline that runs them all, by name, is vkgrad/pipeline.py.

`optimize(program, final=True)` inlines custom calls, merges and prunes scans, optimises the
closed sub-programs of control eqns (loop bodies, cond branches) the same way, then runs
simplify, fold_transposes, cse and dce until a round changes nothing. `final=False` keeps
stop_gradient and the custom calls: use it for a program that may still be differentiated (a
transform's result inside an outer trace).
"""

from __future__ import annotations

from vkgrad.ir.core import Program, print_program, sub_programs
from vkgrad.ir.verifier import checked
from vkgrad.passes.base import Pass
from vkgrad.passes.cse import CommonSubexpressionElimination, cse
from vkgrad.passes.dce import DeadCodeElimination, dce
from vkgrad.passes.fold_transposes import FoldTransposes, fold_transposes
from vkgrad.passes.fuse import fuse
from vkgrad.passes.fuse_horizontal import fuse_horizontal
from vkgrad.passes.remat import remat
from vkgrad.passes.inline import (InlineCheckpoints, InlineCustom, inline_checkpoints,
                                  inline_custom)
from vkgrad.passes.scans import Scans, scans
from vkgrad.passes.select_conds import SelectConds, select_conds
from vkgrad.passes.simplify import RULES, Rule, Simplify, simplify

PASSES = {p.name: p for p in (dce, cse, simplify, fold_transposes, inline_custom, select_conds,
                              inline_checkpoints, scans, remat, fuse, fuse_horizontal)}
_simplify_keep_sg = simplify.without("stop_gradient", "checkpoint_name")


OPTIMIZE = ("simplify", "fold_transposes", "cse", "dce")


def optimize(program: Program, *, final: bool = True, max_rounds: int = 8,
             disabled: frozenset = frozenset(), passes: tuple = OPTIMIZE) -> Program:
    """`passes` (names), round after round, until a round changes nothing (the printed program
    is the same: a rewrite that keeps the eqn count, such as folding a transpose into a flag, is
    a change) or `max_rounds` rounds ran. `final=False`: simplify keeps stop_gradient."""
    pipeline = [_simplify_keep_sg if n == "simplify" and not final else PASSES[n]
                for n in passes if n not in disabled]
    if final:
        program = checked(inline_custom.apply(program), f"pass {inline_custom.name}")
    if "scans" not in disabled:    # while a VJP's forward scan shares its body's eqns
        program = checked(scans.apply(program), f"pass {scans.name}")
    program = _optimize_bodies(program, final, max_rounds, disabled, passes)
    text = print_program(program)
    for _ in range(max_rounds):
        for p in pipeline:
            program = checked(p.apply(program), f"pass {p.name}")
        before, text = text, print_program(program)
        if text == before:
            break
    return program


def _optimize_bodies(program, final, max_rounds, disabled, passes) -> Program:
    """A control eqn's closed sub-programs (a loop's body, a cond's branches) optimised by the
    same passes: their inputs and outputs stay as they are, so the eqn keeps its meaning."""
    eqns = []
    for e in program.eqns:
        subs = sub_programs(e.params) if e.prim.control else []
        if subs:
            new = {}
            for key, i, body in subs:
                body = optimize(body, final=final, max_rounds=max_rounds, disabled=disabled,
                                passes=passes)
                new[key] = body if i is None else new.get(key, ()) + (body,)
            e = e.replace(params=e.params.replace(**new))
        eqns.append(e)
    return program.replace(eqns=tuple(eqns))


__all__ = ["Pass", "PASSES", "OPTIMIZE", "optimize", "dce", "cse", "simplify",
           "fold_transposes", "remat", "fuse", "fuse_horizontal", "RULES", "Rule", "Simplify",
           "DeadCodeElimination", "CommonSubexpressionElimination", "FoldTransposes",
           "inline_custom", "InlineCustom", "select_conds", "SelectConds", "scans", "Scans",
           "inline_checkpoints", "InlineCheckpoints"]
