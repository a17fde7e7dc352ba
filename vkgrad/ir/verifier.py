"""The verifier: a program is well-formed SSA whose every eqn agrees with its shape rule.

Checks: each Var is defined once (an input, a const or one eqn output) and before it is used;
literals are scalars of a known dtype; consts match their Var's type; params are Params; each
eqn's output types are exactly what its primitive's shape rule computes from its input types;
phases are 'fwd'/'bwd'; a body (a `fused` eqn's sub-program) is well-formed itself and has the
eqn's operands as inputs and the eqn's results as outputs; a control eqn's closed sub-programs
(a scan's body, a cond's branches) are well-formed themselves, and its shape rule checks their
types against the eqn's operands and results.

Tests turn on `VERIFY_ALL` (tests/conftest.py) so every transform and pass verifies what it
produces (`checked(program, stage)`); VKGRAD_VERIFY=1 does the same outside tests.
"""

from __future__ import annotations

import os

import numpy as np

from vkgrad.errors import IRError, VkgradError
from vkgrad.ir.core import (DTYPES, Literal, Params, Primitive, Program, Var, np_dtype,
                            sub_programs, type_str)

VERIFY_ALL = os.environ.get("VKGRAD_VERIFY", "") not in ("", "0")


def verify(program: Program) -> Program:
    """Raise IRError describing the first problem; return the program if it is well-formed."""
    defined: set[Var] = set()

    def fail(msg, eqn=None):
        where = f"program {program.name}"
        if eqn is not None:
            where += f", eqn {program.eqns.index(eqn)} ({eqn.prim.name})"
        raise IRError(f"{where}: {msg}", primitive=getattr(eqn, "prim", None) and eqn.prim.name,
                      source=getattr(eqn, "source", None), stage="verification")

    def define(v, eqn=None):
        if not isinstance(v, Var):
            fail(f"{v!r} is bound but is not a Var", eqn)
        if v in defined:
            fail(f"{v!r} is defined twice (not SSA)", eqn)
        defined.add(v)

    def use(x, eqn=None):
        if isinstance(x, Literal):
            if x.dtype not in DTYPES:
                fail(f"literal {x!r} has an unknown dtype", eqn)
        elif not isinstance(x, Var):
            fail(f"operand {x!r} is neither a Var nor a Literal", eqn)
        elif x not in defined:
            fail(f"{x!r} is used before it is defined", eqn)

    for v in program.inputs:
        define(v)
    for v, arr in program.consts:
        define(v)
        if not isinstance(arr, np.ndarray) or arr.shape != v.shape or arr.dtype != np_dtype(
                v.dtype):
            fail(f"const {v!r} holds {type(arr).__name__} "
                 f"{getattr(arr, 'dtype', '?')}{list(getattr(arr, 'shape', ()))}")
    for e in program.eqns:
        if not isinstance(e.prim, Primitive):
            fail(f"eqn has primitive {e.prim!r}", e)
        if not isinstance(e.params, Params):
            fail("params must be a Params mapping", e)
        if e.phase not in ("fwd", "bwd"):
            fail(f"phase {e.phase!r} is not 'fwd' or 'bwd'", e)
        for x in e.inputs:
            use(x, e)
        try:
            want = e.prim.abstract_eval(*[x.type for x in e.inputs], **e.params)
        except VkgradError as err:
            fail(f"shape rule rejects the operands: {err.message}", e)
        except TypeError as err:
            fail(f"params {dict(e.params)} do not fit the shape rule: {err}", e)
        got = [o.type for o in e.outputs]
        if got != want:
            fail(f"outputs typed {', '.join(map(str, got))} but the shape rule gives "
                 f"{', '.join(map(str, want))}", e)
        for o in e.outputs:
            define(o, e)
        for key, i, body in sub_programs(e.params):
            try:                  # a body is a program of its own
                verify(body)
            except IRError as err:
                fail(f"{key if i is None else f'{key}[{i}]'}: {err.message}", e)
            if e.prim.control:    # closed: the shape rule checked its types against the eqn's
                continue
            if tuple(body.outputs) != tuple(e.outputs) or \
                    [v for v in e.inputs if isinstance(v, Var)] != list(body.inputs):
                fail("the body's inputs and outputs must be the eqn's", e)
    for o in program.outputs:
        use(o)
    return program


def checked(program: Program, stage: str) -> Program:
    """Verify `program` when VERIFY_ALL is on (tests); name the stage that produced it."""
    if VERIFY_ALL:
        try:
            verify(program)
        except IRError as e:
            e.message = f"after {stage}: {e.message}"
            raise
    return program


__all__ = ["verify", "checked", "VERIFY_ALL", "type_str"]
