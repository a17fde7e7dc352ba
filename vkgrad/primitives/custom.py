"""custom_vjp_call and custom_jvp_call: a user function with its own derivative rule
(vg.custom_vjp, vg.custom_jvp; vkgrad/transforms/custom.py) as ONE eqn, so reverse mode uses
the user's rule instead of differentiating the function's body.

    custom_vjp_call[rule](*leaves) -> the body's outputs

`rule` (a CustomRule) holds the traced body (a Program over the call's input leaves, plus any
values it closed over) and `vjp(gs, ins)`, which the transform layer builds from the user's
functions. The interpreter runs the body; `optimize(final=True)` inlines it (vkgrad/passes/
inline.py), so the lowering never sees these primitives: a jitted program runs the body's own
eqns, and the backward the user's rule traced into it.

A CustomRule prints as `rule=<function name>`; the text cannot be parsed back into Python
functions, so such programs do not round-trip through the parser.
"""

from __future__ import annotations

from typing import Callable

from vkgrad.ir.core import Primitive, Program, abstract_eval_rules, vjp_rules
from vkgrad.ir.interpreter import impls, run_program


class CustomRule:
    """The body and the VJP of one call of a custom_vjp/custom_jvp function. Compared and
    hashed by identity (each call traces its own)."""

    __slots__ = ("name", "body", "vjp")

    def __init__(self, name: str, body: Program, vjp: Callable):
        self.name, self.body, self.vjp = name, body, vjp

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


def _custom(name: str) -> Primitive:
    p = Primitive(name, ("pure",), multiple_results=True)
    abstract_eval_rules[p] = lambda *types, rule: [o.type for o in rule.body.outputs]
    impls[p] = lambda *arrays, rule: run_program(rule.body, *arrays)
    vjp_rules[p] = lambda gs, outs, *ins, rule: rule.vjp(gs, ins)
    return p


custom_vjp_call_p = _custom("custom_vjp_call")
custom_jvp_call_p = _custom("custom_jvp_call")
CUSTOM_CALLS = (custom_vjp_call_p, custom_jvp_call_p)
