"""Algebraic simplification: a table of rewrite rows, each with a one-line algebra comment.

A row is `Rule(name, prim, fn)`; `fn(eqn, producer)` sees the eqn with its operands already
rewritten and `producer` (Var -> the eqn defining it, in the rewritten program) and returns
    None          no match;
    a Var/Literal the eqn's (single) output is that value: uses are redirected to it;
    a tuple       of Var/Literal, one per output of a multiple-results eqn, likewise;
    an Eqn        a cheaper eqn defining the SAME output Var.
A Var/Literal replacement must have exactly the output's type (checked here, so a row cannot
change a program's types). Rows apply until nothing changes; eqns left unused are removed.

`stop_gradient(x) -> x` (and `checkpoint_name(x) -> x`) is only valid once the program will
not be differentiated again: transforms whose result is still being traced use
`simplify.without("stop_gradient", "checkpoint_name")`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from vkgrad import primitives as P
from vkgrad.ir.core import Eqn, Literal, Params, Program, Var
from vkgrad.ir.interpreter import apply as interpret
from vkgrad.passes.base import Pass, resolve, substitute_outputs
from vkgrad.passes.dce import dce


@dataclass(frozen=True)
class Rule:
    name: str
    prim: object            # a Primitive, or None: tried on every eqn
    fn: Callable


def _fill(x, d):
    """The scalar x is filled with, if x is a literal or a broadcast/reshape of one."""
    while isinstance(x, Var):
        src = d.get(x)
        if src is None or src.prim not in (P.broadcast_to_p, P.reshape_p):
            return None
        x = src.inputs[0]
    return x.value if x.dtype != "bool" else None


def _lit(x, *values) -> bool:
    return isinstance(x, Literal) and x.dtype != "bool" and x.value in values


def _fits(x, e):
    """x, if it has exactly the type of e's output (else no rewrite)."""
    return x if _same_type(x, e.out) else None


def _same_type(x, v) -> bool:
    return x.shape == v.shape and x.dtype == v.dtype


def _other(e, d, value):
    """For a binary e with one operand filled with `value`: the other operand, if it fits."""
    x, y = e.inputs
    if _fill(y, d) == value:
        return _fits(x, e)
    if _fill(x, d) == value:
        return _fits(y, e)
    return None


def _made_by(d, x, prim):
    """The eqn that made x, if x is a Var made by `prim`."""
    src = d.get(x) if isinstance(x, Var) else None
    return src if src is not None and src.prim is prim else None


def _as(e, prim, inputs, **params):
    return e.replace(prim=prim, inputs=tuple(inputs), params=Params(params))


def _fold(e, d):
    """f(literal, ...) -> literal: evaluate scalar elementwise ops on literals now."""
    if not (e.prim.elementwise and e.inputs and len(e.outputs) == 1 and e.out.shape == ()
            and all(isinstance(x, Literal) for x in e.inputs)):
        return None
    (r,) = interpret(e.prim, [x.array() for x in e.inputs], e.params, [e.out.type])
    return Literal(r.item(), e.out.dtype)


def _implicit_broadcast(e, d):
    """Elementwise ops broadcast their operands themselves (numpy rules, as broadcast_to does),
    so an operand made by broadcast_to can be replaced by broadcast_to's input whenever the
    result keeps its shape. A GPU kernel then reads the small operand with stride 0 instead
    of a materialised copy."""
    if not e.prim.elementwise or len(e.inputs) < 2:
        return None
    ins = list(e.inputs)
    for i, x in enumerate(ins):
        src = _made_by(d, x, P.broadcast_to_p)
        if src is None:
            continue
        types = [y.type for j, y in enumerate(ins) if j != i] + [src.inputs[0].type]
        if P.broadcast_shapes(e.prim.name, types) == e.out.shape:
            ins[i] = src.inputs[0]
            return e.replace(inputs=tuple(ins))
    return None


def _merge_reductions(e, d):
    inner = _made_by(d, e.inputs[0], e.prim)
    if inner is None:
        return None
    a = inner.params["axes"]
    kept = [i for i in range(inner.inputs[0].ndim) if i not in a]   # inner result axis -> x axis
    axes = tuple(sorted((*a, *(kept[b] for b in e.params["axes"]))))
    return _as(e, e.prim, inner.inputs, axes=axes)


def _compose_transpose(e, d):
    inner = _made_by(d, e.inputs[0], P.transpose_p)
    if inner is None:
        return None
    p, q = inner.params["perm"], e.params["perm"]
    perm = tuple(p[i] for i in q)
    return _as(e, P.transpose_p, inner.inputs, perm=perm)


def _is_full_slice(e):
    x = e.inputs[0]
    pr = e.params
    return (all(s == 0 for s in pr["start"]) and tuple(pr["limit"]) == x.shape
            and all(k == 1 for k in pr["step"]))


RULES = [
    # x + 0 -> x,  0 + x -> x      (0: a literal, or a literal broadcast to a shape)
    Rule("add_zero", P.add_p, lambda e, d: _other(e, d, 0)),
    # x * 1 -> x,  1 * x -> x
    Rule("mul_one", P.mul_p, lambda e, d: _other(e, d, 1)),
    # x * -1 -> -x
    Rule("mul_minus_one", P.mul_p, lambda e, d: (
        _as(e, P.neg_p, [e.inputs[0]]) if _lit(e.inputs[1], -1) and _fits(e.inputs[0], e) else
        _as(e, P.neg_p, [e.inputs[1]]) if _lit(e.inputs[0], -1) and _fits(e.inputs[1], e) else
        None)),
    # x / 1 -> x
    Rule("div_one", P.div_p, lambda e, d: _fits(e.inputs[0], e) if _lit(e.inputs[1], 1) else None),
    # x ** 1 -> x
    Rule("pow_one", P.pow_p, lambda e, d: _fits(e.inputs[0], e) if _lit(e.inputs[1], 1) else None),
    # x ** 2 -> x * x   (exact, and GLSL's pow is undefined for x < 0)
    Rule("pow_two", P.pow_p, lambda e, d: (
        _as(e, P.mul_p, [e.inputs[0]] * 2) if _lit(e.inputs[1], 2) and _fits(e.inputs[0], e)
        else None)),
    # x ** 0.5 -> sqrt(x)
    Rule("pow_half", P.pow_p, lambda e, d: (
        _as(e, P.sqrt_p, [e.inputs[0]]) if _lit(e.inputs[1], 0.5) and _fits(e.inputs[0], e)
        else None)),
    # -(-x) -> x
    Rule("neg_neg", P.neg_p, lambda e, d: (
        d[e.inputs[0]].inputs[0] if _made_by(d, e.inputs[0], P.neg_p) else None)),
    # stop_gradient(x) -> x   (after the last differentiation)
    Rule("stop_gradient", P.stop_gradient_p, lambda e, d: e.inputs[0]),
    # checkpoint_name(x) -> x   (likewise: a name matters only to a checkpoint's policy)
    Rule("checkpoint_name", P.checkpoint_name_p, lambda e, d: e.inputs[0]),
    # convert[dtype=T](x: T) -> x
    Rule("convert_same", P.convert_p, lambda e, d: _fits(e.inputs[0], e)),
    # reshape[shape of x](x) -> x
    Rule("reshape_same", P.reshape_p, lambda e, d: _fits(e.inputs[0], e)),
    # reshape(reshape(x)) -> reshape(x)
    Rule("reshape_reshape", P.reshape_p, lambda e, d: (
        _as(e, P.reshape_p, d[e.inputs[0]].inputs, shape=e.params["shape"])
        if _made_by(d, e.inputs[0], P.reshape_p) else None)),
    # transpose[identity](x) -> x
    Rule("transpose_identity", P.transpose_p, lambda e, d: (
        e.inputs[0] if tuple(e.params["perm"]) == tuple(range(len(e.params["perm"]))) else None)),
    # transpose[q](transpose[p](x)) -> transpose[p o q](x)
    Rule("transpose_transpose", P.transpose_p, _compose_transpose),
    # broadcast_to[shape of x](x) -> x
    Rule("broadcast_same", P.broadcast_to_p, lambda e, d: _fits(e.inputs[0], e)),
    # broadcast_to(reshape(s)) -> broadcast_to(s)   for a scalar s
    Rule("broadcast_scalar", P.broadcast_to_p, lambda e, d: (
        _as(e, P.broadcast_to_p, d[e.inputs[0]].inputs, shape=e.params["shape"])
        if _made_by(d, e.inputs[0], P.reshape_p) and d[e.inputs[0]].inputs[0].shape == ()
        else None)),
    # broadcast_to(broadcast_to(x)) -> broadcast_to(x)
    Rule("broadcast_broadcast", P.broadcast_to_p, lambda e, d: (
        _as(e, P.broadcast_to_p, d[e.inputs[0]].inputs, shape=e.params["shape"])
        if _made_by(d, e.inputs[0], P.broadcast_to_p) else None)),
    # reduce_sum[b](reduce_sum[a](x)) -> reduce_sum[a + b](x)   (b renumbered to x's axes)
    *[Rule(f"{p.name}_{p.name}", p, _merge_reductions) for p in (P.reduce_sum_p, P.reduce_max_p,
                                                               P.reduce_min_p)],
    # reduce_sum[axes=()](x) -> x  (and max, min)
    *[Rule(f"{p.name}_no_axes", p, lambda e, d: e.inputs[0] if not e.params["axes"] else None)
      for p in (P.reduce_sum_p, P.reduce_max_p, P.reduce_min_p)],
    # x[0:n:1, ...] -> x
    Rule("slice_all", P.slice_p, lambda e, d: e.inputs[0] if _is_full_slice(e) else None),
    # pad[0, 0, 0](x) -> x
    Rule("pad_none", P.pad_p, lambda e, d: e.inputs[0] if not any(
        (*e.params["low"], *e.params["high"], *e.params["interior"])) else None),
    # select(c, x, x) -> x
    Rule("select_same", P.select_p, lambda e, d: (
        _fits(e.inputs[1], e) if e.inputs[1] is e.inputs[2] or (
            isinstance(e.inputs[1], Literal) and e.inputs[1] == e.inputs[2]) else None)),
    # select(True, a, b) -> a,  select(False, a, b) -> b
    Rule("select_const", P.select_p, lambda e, d: (
        _fits(e.inputs[1] if e.inputs[0].value else e.inputs[2], e)
        if isinstance(e.inputs[0], Literal) else None)),
    # reshape(broadcast_to(s)) -> broadcast_to(s)   for a scalar s (a fill stays a fill)
    Rule("reshape_fill", P.reshape_p, lambda e, d: (
        _as(e, P.broadcast_to_p, d[e.inputs[0]].inputs, shape=e.params["shape"])
        if _made_by(d, e.inputs[0], P.broadcast_to_p) and d[e.inputs[0]].inputs[0].shape == ()
        else None)),
    # f(x, broadcast_to(y)) -> f(x, y)   for elementwise f, when the result keeps its shape
    Rule("implicit_broadcast", None, _implicit_broadcast),
    # op(literal, ...) -> literal   (constant folding of scalar elementwise ops)
    Rule("fold_constants", None, _fold),
    # psum(xs) over an axis of one member -> xs   (and pmax, pmin: a world of one process)
    *[Rule(f"{p.name}_one_member", p, lambda e, d: e.inputs if e.params["axis_size"] == 1
           else None) for p in (P.psum_p, P.pmax_p, P.pmin_p)],
]


class Simplify(Pass):
    name = "simplify"

    def __init__(self, rules=RULES, max_sweeps: int = 10):
        self.rules = tuple(rules)
        self.max_sweeps = max_sweeps

    def without(self, *names) -> "Simplify":
        return Simplify([r for r in self.rules if r.name not in names], self.max_sweeps)

    def apply(self, program: Program) -> Program:
        for _ in range(self.max_sweeps):
            program, changed = self._sweep(program)
            if not changed:
                break
        return dce.apply(program)

    def _sweep(self, program):
        env, producer, eqns, changed = {}, {}, [], False
        for e in program.eqns:
            ins = tuple(resolve(env, x) for x in e.inputs)
            if ins != e.inputs:
                e = e.replace(inputs=ins)
            for rule in self.rules:
                if rule.prim is not None and rule.prim is not e.prim:
                    continue
                r = rule.fn(e, producer)
                if r is None:
                    continue
                values = r if isinstance(r, tuple) else (r,)
                if isinstance(r, Eqn):
                    assert r.outputs == e.outputs, rule.name
                    e = r
                elif len(values) == len(e.outputs) and all(map(_same_type, values, e.outputs)):
                    env.update(zip(e.outputs, values))
                    e = None
                else:
                    continue
                changed = True
                break
            if e is not None:
                eqns.append(e)
                producer.update((o, e) for o in e.outputs)
        return program.replace(eqns=tuple(eqns), outputs=substitute_outputs(program, env)), changed


simplify = Simplify()
