"""Reverse mode as a program transform: Program -> joint Program (forward, then backward).

`vjp_rules[prim]` (vkgrad.ir.core's table, filled in beside each primitive in
vkgrad/primitives/) is `rule(g, ans, *inputs, **params) -> tuple of cotangents` (None: no
cotangent).

How the joint program is built (`_joint`):
  1. Open a fresh trace whose inputs are the program's inputs (plus cotangent inputs for vjp).
  2. Replay the forward eqns into it (phase 'fwd', each keeping its source line).
  3. Activity analysis: only float values that depend on the `wrt` inputs get cotangents.
  4. Switch the trace to phase 'bwd' and walk the eqns in reverse, calling each one's VJP rule
     on the replayed tracers. The rules bind ordinary primitives, so the backward is traced
     into the same program as IR (under `source_context(eqn.source)`, so every backward eqn
     carries the user's line of the forward eqn it differentiates). Cotangents reaching one
     value from several uses are summed.
  5. Outputs: the original outputs, then one gradient per `wrt` input (zeros of the input's
     shape if it does not influence the result).

The printer shows '# ---- backward ----' where the phase changes. The result is un-optimised:
callers run the pass pipeline (DCE, CSE, simplification) on it.

Forward mode (`jvp_program`) uses the double-VJP trick rather than a second rule table: the
backward program maps cotangents to gradients linearly (ct -> J^T ct), so differentiating IT
with respect to the cotangents, against the tangent u, gives J u. It works wherever grad-of-grad
works, and every primitive needs only one derivative rule. The exception is a primitive with no
reverse mode at all (a while loop, as in JAX): a program where a tangent reaches one is walked
eqn by eqn (`_forward_walk`), that eqn through its `jvp_rules` rule (ir/core.py), every other
through the double VJP of itself alone.
"""

from __future__ import annotations

from vkgrad import primitives as P
from vkgrad.errors import GradError, IRError, MissingRuleError
from vkgrad.ir.core import (Literal, Program, Var, is_float, jvp_rules, program_transforms,
                            type_str, vjp_rules)
from vkgrad.tracer.core import bind_eqn, derivative_of, eval_program, new_trace, source_context


def grad_program(program: Program, wrt, out_index: int = 0, name: str | None = None) -> Program:
    """Joint program of d outputs[out_index] / d inputs[wrt]; outputs[out_index] must be a
    float scalar. Outputs: program.outputs + one gradient per wrt input."""
    o = program.outputs[out_index]
    if o.shape != () or not is_float(o.dtype):
        raise GradError(f"grad needs a float scalar output, got {type_str(o.shape, o.dtype)}")
    return _joint(program, tuple(wrt), seed_one=out_index, ct_outputs=(), name=name)


def vjp_program(program: Program, wrt, ct_outputs=None, name: str | None = None) -> Program:
    """Joint program of the VJP. Inputs: program.inputs, then one cotangent per output index in
    `ct_outputs` (default: every float output). Outputs: program.outputs + one cotangent per
    wrt input (sum over ct_outputs of ct^T d out / d input)."""
    if ct_outputs is None:
        ct_outputs = [j for j, o in enumerate(program.outputs) if is_float(o.dtype)]
    return _joint(program, tuple(wrt), seed_one=None, ct_outputs=tuple(ct_outputs), name=name)


def jvp_program(program: Program, wrt, name: str | None = None) -> Program:
    """Forward mode by double VJP. Inputs: program.inputs, then one cotangent per float output
    (any value: the result does not depend on them; pass zeros), then one tangent per wrt
    input. Outputs: program.outputs + one tangent per float output. A custom_vjp call that a
    tangent reaches is refused, as in JAX: its rule says nothing about forward mode, and the
    double VJP would differentiate the user's bwd instead."""
    _refuse_custom_vjp(program, wrt)
    if _reaches(program, wrt, jvp_rules):
        return _forward_walk(program, wrt, name)
    n_in, n_out = len(program.inputs), len(program.outputs)
    float_outs = [j for j, o in enumerate(program.outputs) if is_float(o.dtype)]
    back = vjp_program(program, wrt, float_outs)             # (x, ct) -> (y, J^T ct)
    ct_ins = range(n_in, n_in + len(float_outs))
    grads = range(n_out, n_out + len(wrt))
    fwd = vjp_program(back, ct_ins, grads, name=name)         # (x, ct, u) -> (y, J^T ct, J u)
    keep = list(fwd.outputs[:n_out]) + list(fwd.outputs[n_out + len(wrt):])
    return fwd.replace(outputs=tuple(keep))


program_transforms["vjp"] = vjp_program   # a loop's VJP is its body's (primitives/control_flow)
program_transforms["jvp"] = jvp_program


def _reaches(program: Program, wrt, prims) -> bool:
    """Whether a tangent of the `wrt` inputs reaches an eqn of one of `prims`."""
    active = {program.inputs[i] for i in wrt}
    for e in program.eqns:
        if any(isinstance(x, Var) and x in active for x in e.inputs):
            if e.prim in prims:
                return True
            active.update(o for o in e.outputs if is_float(o.dtype))
    return False


def _forward_walk(program: Program, wrt, name) -> Program:
    """jvp_program eqn by eqn, for a program where a tangent reaches a primitive with no
    reverse mode (a while loop): that eqn's `jvp_rules` rule, every other eqn's forward mode
    the double VJP of a program of that one eqn. Same inputs and outputs as jvp_program."""
    float_outs = [o for o in program.outputs if is_float(o.dtype)]
    with new_trace(name or program.name) as t:
        args = [t.new_arg(v.shape, v.dtype) for v in program.inputs]
        for o in float_outs:       # the cotangent inputs jvp_program has (unused)
            t.new_arg(o.shape, o.dtype)
        env = dict(zip(program.inputs, args))
        env.update(program.consts)
        tan = {program.inputs[i]: t.new_arg(program.inputs[i].shape, program.inputs[i].dtype)
               for i in wrt}

        def read(x):
            return x.array() if isinstance(x, Literal) else env[x]

        for e in program.eqns:
            ins = [read(x) for x in e.inputs]
            active = [i for i, x in enumerate(e.inputs) if isinstance(x, Var) and x in tan]
            if not active:
                outs = bind_eqn(e.prim, ins, e.params, source=e.source)
                env.update(zip(e.outputs, outs if e.prim.multiple_results else [outs]))
                continue
            with source_context(e.source):
                outs, touts = _eqn_jvp(e, ins, [tan.get(x) if isinstance(x, Var) else None
                                                for x in e.inputs], active)
            env.update(zip(e.outputs, outs))
            tan.update((o, g) for o, g in zip(e.outputs, touts)
                       if g is not None and is_float(o.dtype))
        tangents = [tan[o] if isinstance(o, Var) and o in tan else
                    P.broadcast_to(P.convert(0, o.dtype), o.shape) for o in float_outs]
        prog, _ = t.finish([read(o) for o in program.outputs] + tangents)
    return prog


def _eqn_jvp(e, ins, tangents, active):
    """(outputs, their tangents) of one eqn."""
    rule = jvp_rules.get(e.prim)
    if rule is not None:
        outs, touts = rule(ins, tangents, **e.params)
        return list(outs), list(touts)
    vars_ = list(dict.fromkeys(x for x in e.inputs if isinstance(x, Var)))
    one = Program(e.prim.name, vars_, e.outputs, (e,))
    wrt = [vars_.index(e.inputs[i]) for i in dict.fromkeys(active)]
    wrt = list(dict.fromkeys(wrt))
    fouts = [o for o in e.outputs if is_float(o.dtype)]
    jp = jvp_program(one, wrt)
    at = {x: v for x, v in zip(e.inputs, ins) if isinstance(x, Var)}
    tan_of = {e.inputs[i]: tangents[i] for i in active}
    r = eval_program(jp, [at[v] for v in vars_] +
                     [P.broadcast_to(P.convert(0, o.dtype), o.shape) for o in fouts] +
                     [tan_of[vars_[i]] for i in wrt])
    n = len(e.outputs)
    it = iter(r[n:])
    return r[:n], [next(it) if is_float(o.dtype) else None for o in e.outputs]


def _refuse_custom_vjp(program: Program, wrt) -> None:
    active = {program.inputs[i] for i in wrt}
    for e in program.eqns:
        if any(isinstance(x, Var) and x in active for x in e.inputs):
            if e.prim is P.custom_vjp_call_p:
                raise GradError("can't apply forward-mode autodiff (jvp) to a custom_vjp "
                                f"function ({e.params['rule']}); use vg.custom_jvp, or "
                                "reverse mode (grad, vjp, jacrev)", source=e.source)
            active.update(o for o in e.outputs if is_float(o.dtype))


def _joint(program, wrt, seed_one, ct_outputs, name):
    for i in wrt:
        v = program.inputs[i]
        if not is_float(v.dtype):
            raise GradError(f"cannot differentiate with respect to input {i} of type "
                            f"{type_str(v.shape, v.dtype)}: only float inputs have gradients")
    with new_trace(name or program.name) as t:
        args = [t.new_arg(v.shape, v.dtype) for v in program.inputs]
        cts_in = [t.new_arg(program.outputs[j].shape, program.outputs[j].dtype)
                  for j in ct_outputs]
        env = dict(zip(program.inputs, args))
        env.update(program.consts)

        def read(x):
            return x.array() if isinstance(x, Literal) else env[x]

        for e in program.eqns:                                    # 2. forward replay
            outs = bind_eqn(e.prim, [read(x) for x in e.inputs], e.params, source=e.source)
            env.update(zip(e.outputs, outs if e.prim.multiple_results else [outs]))

        active = {program.inputs[i] for i in wrt}                 # 3. activity
        for e in program.eqns:
            if any(isinstance(x, Var) and x in active for x in e.inputs):
                active.update(o for o in e.outputs if is_float(o.dtype))

        t.phase = "bwd"                                           # 4. backward
        ct: dict[Var, object] = {}

        def accumulate(v, c, prim_name):
            c_shape = tuple(getattr(c, "shape", ()))
            if c_shape != v.shape:
                raise IRError(f"the VJP rule of '{prim_name}' returned a cotangent of shape "
                              f"{c_shape} for an operand of type {type_str(v.shape, v.dtype)}",
                              primitive=prim_name, stage="autodiff")
            c = P.convert(c, v.dtype)
            ct[v] = P.add(ct[v], c) if v in ct else c

        for j in ([seed_one] if seed_one is not None else []):
            o = program.outputs[j]
            if isinstance(o, Var) and o in active:
                ct[o] = P.broadcast_to(P.convert(1.0, o.dtype), o.shape)
        for j, c in zip(ct_outputs, cts_in):
            o = program.outputs[j]
            if isinstance(o, Var) and o in active:
                accumulate(o, c, "<cotangent input>")

        for e in reversed(program.eqns):
            gs = [ct.pop(o, None) for o in e.outputs]
            if all(g is None for g in gs):
                continue
            rule = vjp_rules.get(e.prim)
            if rule is None:
                why = (" (it is the backward of another primitive: a second derivative, or "
                       "forward mode, which vkgrad derives from the backward, needs its VJP)"
                       if e.phase == "bwd" or e.prim.name.endswith("_bwd") else "")
                raise MissingRuleError(
                    f"cannot differentiate '{e.prim.name}': it has no VJP rule{why}",
                    primitive=e.prim.name, stage="autodiff", source=e.source)
            ins = [read(x) for x in e.inputs]
            outs = [read(o) for o in e.outputs]
            with source_context(e.source), derivative_of(e.prim.name):
                if e.prim.multiple_results:
                    gs = [g if g is not None else P.broadcast_to(P.convert(0, o.dtype), o.shape)
                          for g, o in zip(gs, e.outputs)]
                    in_cts = rule(gs, outs, *ins, **e.params)
                else:
                    in_cts = rule(gs[0], outs[0], *ins, **e.params)
                if len(in_cts) != len(ins):
                    raise IRError(f"the VJP rule of '{e.prim.name}' returned {len(in_cts)} "
                                  f"cotangents for {len(ins)} inputs", primitive=e.prim.name,
                                  stage="autodiff")
                for x, c in zip(e.inputs, in_cts):
                    if c is not None and isinstance(x, Var) and x in active:
                        accumulate(x, c, e.prim.name)

        grads = []                                                # 5. outputs
        for i in wrt:
            v = program.inputs[i]
            grads.append(ct[v] if v in ct else P.broadcast_to(P.convert(0, v.dtype), v.shape))
        prog, captured = t.finish([read(o) for o in program.outputs] + grads)
    if captured:   # pragma: no cover - rules only see this trace's values
        raise IRError("autodiff captured values from an enclosing trace")
    return prog.replace(arg_names=program.arg_names)   # the inputs come first, as before
