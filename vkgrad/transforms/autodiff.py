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
works, and every primitive needs only one derivative rule.
"""

from __future__ import annotations

from vkgrad import primitives as P
from vkgrad.errors import GradError, IRError, MissingRuleError
from vkgrad.ir.core import (Literal, Program, Var, is_float, program_transforms, type_str,
                            vjp_rules)
from vkgrad.tracer.core import bind_eqn, new_trace, source_context


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
    n_in, n_out = len(program.inputs), len(program.outputs)
    float_outs = [j for j, o in enumerate(program.outputs) if is_float(o.dtype)]
    back = vjp_program(program, wrt, float_outs)             # (x, ct) -> (y, J^T ct)
    ct_ins = range(n_in, n_in + len(float_outs))
    grads = range(n_out, n_out + len(wrt))
    fwd = vjp_program(back, ct_ins, grads, name=name)         # (x, ct, u) -> (y, J^T ct, J u)
    keep = list(fwd.outputs[:n_out]) + list(fwd.outputs[n_out + len(wrt):])
    return fwd.replace(outputs=tuple(keep))


program_transforms["vjp"] = vjp_program   # a loop's VJP is its body's (primitives/control_flow)


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
            with source_context(e.source):
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
