"""Batching (vmap) as a program transform: Program -> Program with a mapped axis.

`batching_rules[prim]` (vkgrad.ir.core's table, filled in beside each primitive in
vkgrad/primitives/) is `rule(args, dims, **params) -> (outs, out_dims)`: `args` are the
operands, `dims[i]` the position of the mapped axis in args[i] (None: args[i] is the same for
every example), and it returns the result(s) and the position of the mapped axis in each.

How the batched program is built (`batch_program`), in the style of reverse mode:
  1. Open a fresh trace whose inputs are the program's inputs with the mapped axis inserted at
     `in_dims[i]` (an input with in_dims[i] None keeps its type).
  2. Replay the eqns. An eqn none of whose operands is mapped is bound as it is (its results
     are unmapped: the same for every example, computed once). Otherwise its batching rule runs
     on the replayed values; the rules bind ordinary primitives, so the result is IR that
     prints, fuses, differentiates and batches again (nested vmap), each eqn keeping the
     user's source line and phase of the eqn it came from.
  3. Move each output's mapped axis to `out_axes[j]`; an unmapped output with an axis there is
     broadcast along it (as JAX does), a mapped output with None there is an error.

No per-example loop is emitted except by `unrolled_batcher` rules (selective_scan_bwd), for
primitives whose batch cannot fold into one call (see each rule).
"""

from __future__ import annotations

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError, IRError, MissingRuleError
from vkgrad.ir.core import Literal, Program, batching_rules, program_transforms, type_str
from vkgrad.passes.inline import inline_custom
from vkgrad.primitives.collective import batching_axis, over_mapped_axis
from vkgrad.tracer.core import bind_eqn, new_trace, source_context, user_source


def batch_program(program: Program, in_dims, out_axes, size: int, name: str | None = None,
                  out_names=None, axis_name=None) -> Program:
    """The program mapped over an axis of `size`: input i carries the mapped axis at
    in_dims[i] (None: unmapped), output j at out_axes[j] (None: unmapped; it must not depend
    on a mapped input). `out_names[j]` names output j in errors.

    A custom_vjp/custom_jvp call is mapped through its body (inlined first): under vmap the
    function keeps its values, and its derivatives come from the body, not from its rule.

    `axis_name`: the mapped axis' name, which collectives over it reduce (a loop body batched
    inside keeps the enclosing vmap's name)."""
    if axis_name is not None:
        with batching_axis(axis_name, size):
            return batch_program(program, in_dims, out_axes, size, name, out_names)
    program = inline_custom.apply(program)
    with new_trace(name or program.name) as t:
        args = []
        for v, d in zip(program.inputs, in_dims):
            shape = v.shape if d is None else v.shape[:d] + (size,) + v.shape[d:]
            args.append(t.new_arg(shape, v.dtype))
        env = {v: (a, d) for v, a, d in zip(program.inputs, args, in_dims)}
        env.update((v, (a, None)) for v, a in program.consts)

        def read(x):
            return (x.array(), None) if isinstance(x, Literal) else env[x]

        for e in program.eqns:
            vals, dims = zip(*(read(x) for x in e.inputs)) if e.inputs else ((), ())
            if all(d is None for d in dims) and not over_mapped_axis(e):
                outs = bind_eqn(e.prim, vals, e.params, source=e.source, phase=e.phase)
                outs = outs if e.prim.multiple_results else [outs]
                env.update((o, (r, None)) for o, r in zip(e.outputs, outs))
                continue
            rule = batching_rules.get(e.prim)
            if rule is None:
                raise MissingRuleError(f"vmap cannot batch '{e.prim.name}': it has no batching "
                                       "rule", primitive=e.prim.name, stage="batching",
                                       source=e.source)
            t.phase = e.phase
            with source_context(e.source):
                outs, out_dims = rule(list(vals), list(dims), **e.params)
            t.phase = "fwd"
            if not e.prim.multiple_results:
                outs, out_dims = [outs], [out_dims]
            for o, r, d in zip(e.outputs, outs, out_dims):
                want = o.shape if d is None else o.shape[:d] + (size,) + o.shape[d:]
                if tuple(r.shape) != want:
                    raise IRError(f"the batching rule of '{e.prim.name}' returned "
                                  f"{type_str(r.shape, o.dtype)} with the mapped axis at {d}, "
                                  f"for a per-example {type_str(o.shape, o.dtype)}",
                                  primitive=e.prim.name, stage="batching", source=e.source)
                env[o] = (r, d)

        results = []
        for j, (o, axis) in enumerate(zip(program.outputs, out_axes)):
            val, d = read(o)
            results.append(_place(val, d, axis, size, o, f"vmap of {program.name}: " +
                                  (out_names[j] if out_names else f"output {j}")))
        prog, captured = t.finish(results)
    if captured:   # pragma: no cover - the batched program only sees this trace's values
        raise IRError("batching captured values from an enclosing trace")
    return prog


program_transforms["batch"] = batch_program   # a batched loop's body (primitives/control_flow)


def _place(val, d, axis, size, o, what):
    if axis is None:
        if d is not None:
            raise ArgumentError(f"{what} ({type_str(o.shape, o.dtype)} per example) depends on "
                                "the mapped axis, but out_axes is None for it; give it an axis "
                                "to be stacked along", source=user_source())
        return val
    if d is None:   # the same for every example: broadcast along the new axis (as JAX does)
        return P.moveaxis(P.broadcast_to(val, (size,) + tuple(o.shape)), 0, axis)
    return P.moveaxis(val, d, axis)
