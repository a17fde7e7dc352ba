"""What a pass is: a small named object with one `apply(program) -> program`.

Contract (xDSL's ModulePass): `apply` returns a NEW program (the input is never mutated) that
the verifier accepts whenever the input was accepted.
"""

from __future__ import annotations

from vkgrad.ir.core import Program, Var
from vkgrad.target import target_of


class Pass:
    name: str = "pass"

    def apply(self, program: Program) -> Program:
        raise NotImplementedError

    def __call__(self, program: Program) -> Program:
        return self.apply(program)

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


class TargetPass(Pass):
    """A pass that plans for a device: `target` (None: the generic Target); `for_target` gives
    the same pass for another device (vkgrad/pipeline.py asks each pass that has it)."""

    def __init__(self, target=None):
        self.target = target_of(target)

    def for_target(self, target) -> "TargetPass":
        return type(self)(target)


def resolve(env: dict, x):
    """Follow the substitution map `env` (Var -> Var | Literal) to the value x stands for."""
    while isinstance(x, Var) and x in env:
        x = env[x]
    return x


def substitute_outputs(program: Program, env: dict) -> tuple:
    return tuple(resolve(env, o) for o in program.outputs)


__all__ = ["Pass", "TargetPass", "resolve", "substitute_outputs"]
