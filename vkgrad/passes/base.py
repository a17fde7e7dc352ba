"""What a pass is: a small named object with one `apply(program) -> program`.

Contract (xDSL's ModulePass): `apply` returns a NEW program (the input is never mutated) that
the verifier accepts whenever the input was accepted.
"""

from __future__ import annotations

from vkgrad.ir.core import Program, Var


class Pass:
    name: str = "pass"

    def apply(self, program: Program) -> Program:
        raise NotImplementedError

    def __call__(self, program: Program) -> Program:
        return self.apply(program)

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


def resolve(env: dict, x):
    """Follow the substitution map `env` (Var -> Var | Literal) to the value x stands for."""
    while isinstance(x, Var) and x in env:
        x = env[x]
    return x


def substitute_outputs(program: Program, env: dict) -> tuple:
    return tuple(resolve(env, o) for o in program.outputs)


__all__ = ["Pass", "resolve", "substitute_outputs"]
