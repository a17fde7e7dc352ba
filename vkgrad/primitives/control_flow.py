"""Control flow: scan, while and cond, each ONE eqn holding closed sub-programs (JAX's
scan_p, while_p and cond_p; jax/_src/lax/control_flow/loops.py and conditionals.py), so a loop
stays a loop: the program's size does not depend on the trip count. The user's functions
(vg.lax.scan, fori_loop, while_loop, cond, switch, map) are vkgrad/control_flow.py.

    scan[jaxpr, length, reverse, unroll, num_consts, num_carry](*consts, *init, *xs)
        -> (*final carry, *stacked ys)
        jaxpr(*consts, *carry, *x slices) -> (*carry, *y slices); xs and ys are stacked along a
        leading axis of `length`; with reverse=True the steps run from the last index to the
        first (ys[i] is still step i's y).
    while[cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts](*cond_consts, *body_consts, *init)
        -> final carry; cond_jaxpr(*cond_consts, *carry) -> bool[], body_jaxpr(*body_consts,
        *carry) -> carry.
    cond[branches](index, *operands) -> branches[index](*operands); index an i32 scalar,
        clamped into range (as lax.switch clamps).
    checkpoint[jaxpr, policy, num_res](*operands) -> jaxpr(*operands) (vg.checkpoint, JAX's
        remat): the body's last num_res outputs are the values its policy saves for the
        backward; the rest are the function's results. checkpoint_name[name](x) = x names a
        value for a policy.

Rules, beside each primitive:
* JVP of while (jvp_rules): a while loop over (carry, its tangent) whose body is the body's
  JVP program. Every other forward mode is the double VJP (vkgrad/transforms/autodiff.py).
* VJP. scan, as JAX's partial evaluation of a scan: the body's VJP program is split at its
  backward (`_backward_part`). The forward scan also stacks, as more ys, the body's values
  that the backward reads (the per-step residuals: a carry entering the step, an eqn's
  result); those that depend on the consts alone are computed once before the loop (hoisted).
  The transposed body is the backward alone, as a scan in the opposite direction reading the
  stacked residuals, accumulating the consts' cotangents in its carry: no forward work runs
  in it. A checkpointed body (vg.checkpoint, ad_checkpoint.py) is one checkpoint eqn, whose
  residuals are its operands and the values its policy saves: its backward recomputes the
  rest, as the policy says. The forward scan is the user's with more outputs, so
  passes/scans.py merges the two. Forward mode and grad-of-grad follow, since the backward is
  a scan again (forward mode is the double VJP, vkgrad/transforms/autodiff.py). cond: a cond
  over the branches' VJP programs. while: no reverse mode, a clear error (as JAX).
* Batching. A batched carry is found by iterating to a fixpoint (a carry is batched if its
  initial value is, or the body makes it so). cond with a batched index runs every branch and
  selects per example; while with a batched predicate runs until every example's predicate is
  false, each example's carry frozen once its own predicate is.
* checkpoint's VJP evaluates its body's VJP program in the backward: the body's forward is
  recomputed there (a backward eqn, which no CSE merges with the forward: the forward is inside
  the checkpoint eqn until the fused stage inlines it), except the saved values, read from the
  forward's extra results.

The rules need the program transforms themselves (the VJP program of a body, a batched body),
which live a layer above (vkgrad/transforms/): they find them in `program_transforms`
(vkgrad/ir/core.py), which those modules fill in.
"""

from __future__ import annotations

import numpy as np

from vkgrad.errors import GradError, IRError, ShapeError
from vkgrad.ir.core import (Literal, Primitive, Program, TensorType, Var, abstract_eval_rules,
                            batching_rules, is_float, jvp_rules, np_dtype, param_defaults,
                            program_transforms, vjp_rules)
from vkgrad.ir.interpreter import impls, run_program
from vkgrad.primitives.lax import (add, batch_to_front, broadcast_to, convert, dtype_of, eq, lt,
                                   mapped_size, maximum, minimum, moveaxis, reduce_max, reshape,
                                   select)
from vkgrad.tracer.core import bind, eval_program, new_trace, user_source


# ----------------------------------------------------------------------------------- helpers

def trace_closed(fun, in_types, name: str, control: str | None = None, phase: str = "fwd"):
    """fun(*tracers) traced into a closed Program over `in_types`: (program, captured), the
    values of enclosing traces it reads (extra inputs at the end of the program's inputs).
    `control` names the construct whose body this is (for errors inside it); phase "bwd" marks
    every eqn as backward (a transposed body: its recomputed forward is backward work too)."""
    with new_trace(name) as t:
        t.control = control
        t.phase = phase
        args = [t.new_arg(ty.shape, ty.dtype) for ty in in_types]
        outs = fun(*args)
        return t.finish(list(outs))


def aval(x) -> TensorType:
    """The type of a value a rule gets (a tracer, or a numpy array or scalar)."""
    return TensorType(tuple(np.shape(x)), dtype_of(x))


def _types(program: Program, which: str) -> list:
    return [x.type for x in getattr(program, which)]


def _zeros(t: TensorType):
    return broadcast_to(convert(0, t.dtype), t.shape)


def _transform(name: str):
    fn = program_transforms.get(name)
    if fn is None:   # pragma: no cover - vkgrad.transforms is always imported with vkgrad
        raise IRError(f"the '{name}' program transform is not registered")
    return fn


def _reached(program: Program, mapped) -> set:
    """The values of `program` that depend on the inputs marked in `mapped`."""
    hit = {v for v, m in zip(program.inputs, mapped) if m}
    for e in program.eqns:
        if any(x in hit for x in e.inputs if not isinstance(x, Literal)):
            hit.update(e.outputs)
    return hit


def depends(program: Program, mapped) -> list:
    """Which outputs of `program` depend on the inputs marked in `mapped` (what a batched
    body's outputs are: mapped wherever a mapped input reaches)."""
    hit = _reached(program, mapped)
    return [not isinstance(o, Literal) and o in hit for o in program.outputs]


def _batch_body(program, mapped, out_mapped, size):
    """The program batched along axis 0 of the mapped inputs; out_mapped outputs carry the axis
    first (an output that does not depend on a mapped input is broadcast along it)."""
    return _transform("batch")(program, [0 if m else None for m in mapped],
                               [0 if m else None for m in out_mapped], size)


def _check_types(what: str, got, want) -> None:
    got, want = [TensorType(t.shape, t.dtype) for t in got], list(want)
    if got != want:
        raise ShapeError(f"{what}: got {', '.join(map(str, got))}, expected "
                         f"{', '.join(map(str, want))}")


# ----------------------------------------------------------------------------------- scan

scan_p = Primitive("scan", ("pure", "control"), multiple_results=True)
param_defaults[scan_p] = {"reverse": False, "unroll": 1}


def _split(seq, *sizes):
    out, i = [], 0
    for n in sizes:
        out.append(list(seq[i:i + n]))
        i += n
    out.append(list(seq[i:]))
    return out


def _scan_rule(*types, jaxpr, length, num_consts, num_carry, reverse=False, unroll=1):
    consts, init, xs = _split(types, num_consts, num_carry)
    for x in xs:
        if x.shape[:1] != (length,):
            raise ShapeError(f"scan: a scanned operand {x} has no leading axis of the length "
                             f"{length}")
    _check_types("scan: the body's inputs", _types(jaxpr, "inputs"),
                 consts + init + [TensorType(x.shape[1:], x.dtype) for x in xs])
    outs = _types(jaxpr, "outputs")
    _check_types("scan: the body's carry out", outs[:num_carry], init)
    return init + [TensorType((length,) + y.shape, y.dtype) for y in outs[num_carry:]]


def _scan_impl(*arrays, jaxpr, length, num_consts, num_carry, reverse=False, unroll=1):
    consts, carry, xs = _split(arrays, num_consts, num_carry)
    ys = []
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = run_program(jaxpr, *consts, *carry, *[x[i] for x in xs])
        carry, y = outs[:num_carry], outs[num_carry:]
        ys.append(y)
    if reverse:
        ys.reverse()
    y_types = _types(jaxpr, "outputs")[num_carry:]
    stacked = [np.stack([y[j] for y in ys]) if ys else np.zeros((0,) + t.shape, np_dtype(t.dtype))
               for j, t in enumerate(y_types)]
    return list(carry) + stacked


abstract_eval_rules[scan_p] = _scan_rule
impls[scan_p] = _scan_impl


def scan(jaxpr, consts, init, xs, length, reverse=False, unroll=1):
    """Bind scan_p: (final carry list, stacked ys list)."""
    outs = bind(scan_p, *consts, *init, *xs, jaxpr=jaxpr, length=int(length),
                reverse=bool(reverse), unroll=int(unroll), num_consts=len(consts),
                num_carry=len(init))
    return list(outs[:len(init)]), list(outs[len(init):])


def _scan_vjp(gs, outs, *ins, jaxpr, length, num_consts, num_carry, reverse=False, unroll=1):
    nc, nk = num_consts, num_carry
    consts, init, xs = _split(ins, nc, nk)
    ny = len(jaxpr.outputs) - nk
    body_in = list(jaxpr.inputs)
    wrt = [i for i, v in enumerate(body_in) if is_float(v.dtype)]
    ct_outs = [j for j, o in enumerate(jaxpr.outputs) if is_float(o.dtype)]
    joint = _transform("vjp")(jaxpr, wrt, ct_outs)
    hoisted, stacked, bwd = _backward_part(joint, jaxpr, nc, nk)

    # the forward again, its body's values that the backward reads stacked as more ys (this is
    # the user's scan with more outputs: passes/scans.py merges the two); those that depend on
    # the consts alone computed once, before the loop
    fwd_body = jaxpr.replace(outputs=tuple(jaxpr.outputs) + tuple(stacked))
    _, res = scan(fwd_body, consts, init, xs, length, reverse, unroll)
    res = res[ny:]
    inv = eval_program(_slice(jaxpr, hoisted, body_in[:nc]), consts)

    fc = [i for i in range(nc) if is_float(body_in[i].dtype)]               # float consts
    fk = [i for i in range(nk) if is_float(body_in[nc + i].dtype)]          # float carries
    fx = [i for i in range(len(xs)) if is_float(body_in[nc + nk + i].dtype)]
    fy = [j for j in range(ny) if is_float(jaxpr.outputs[nk + j].dtype)]
    grad_at = {b: k for k, b in enumerate(wrt)}

    def step(*a):
        c, h, acc, ctk, r, x, cty = _split(a, nc, len(hoisted), len(fc), len(fk), len(stacked),
                                           len(xs))
        ct_of = dict(zip(fk, ctk))
        ct_of.update((nk + j, g) for j, g in zip(fy, cty))
        grads = eval_program(bwd, c + x + [ct_of[j] for j in ct_outs] + h + r)
        new_acc = [add(s, grads[grad_at[i]]) for s, i in zip(acc, fc)]
        new_ctk = [grads[grad_at[nc + i]] for i in fk]
        return new_acc + new_ctk + [grads[grad_at[nc + nk + i]] for i in fx]

    in_types = ([v.type for v in body_in[:nc]] + [v.type for v in hoisted] +
                [body_in[i].type for i in fc] + [body_in[nc + i].type for i in fk] +
                [v.type for v in stacked] + [v.type for v in body_in[nc + nk:]] +
                [jaxpr.outputs[nk + j].type for j in fy])
    bwd_body, captured = trace_closed(step, in_types, "scan_transpose", phase="bwd")
    if captured:   # pragma: no cover - the step reads only its own inputs
        raise IRError("the transposed scan body captured outer values")
    acc0 = [_zeros(body_in[i].type) for i in fc]
    ctk0 = [gs[i] for i in fk]
    fin, ct_xs = scan(bwd_body, consts + inv, acc0 + ctk0, res + xs + [gs[nk + j] for j in fy],
                      length, not reverse, unroll)
    cts = [None] * len(ins)
    for i, g in zip(fc, fin[:len(fc)]):
        cts[i] = g
    for i, g in zip(fk, fin[len(fc):]):
        cts[nc + i] = g
    for i, g in zip(fx, ct_xs):
        cts[nc + nk + i] = g
    return tuple(cts)


def _backward_part(joint: Program, body: Program, nc: int, nk: int):
    """Split `joint` (body's VJP program: its inputs body's then the cotangents, its first eqns
    replaying body's one for one, then the backward) at the backward, as JAX's scan partial
    evaluation does: (hoisted, stacked, bwd). hoisted and stacked are the residuals, the values
    of body the backward reads beyond the consts, xs and cotangents (body's Vars: a carry input
    or an eqn's result): hoisted those that depend on the consts alone, stacked the rest. bwd is
    the backward alone: inputs (*consts, *xs, *cotangents, *hoisted, *stacked), outputs the
    gradients, no forward work."""
    n, n_in = len(body.eqns), len(body.inputs)
    of = dict(zip(joint.inputs[nc:nc + nk], body.inputs[nc:nc + nk]))
    for je, be in zip(joint.eqns[:n], body.eqns):
        of.update(zip(je.outputs, be.outputs))
    back = joint.eqns[n:]
    grads = joint.outputs[len(body.outputs):]
    res = list(dict.fromkeys(x for x in [*(x for e in back for x in e.inputs), *grads]
                             if isinstance(x, Var) and x in of))
    varying = _reached(body, [i >= nc for i in range(n_in)])
    hoisted = [x for x in res if of[x] not in varying]
    stacked = [x for x in res if of[x] in varying]
    inputs = (joint.inputs[:nc] + joint.inputs[nc + nk:n_in] + joint.inputs[n_in:] +
              tuple(hoisted) + tuple(stacked))
    bwd = Program(f"{body.name}_bwd", inputs, grads, back, joint.consts)
    return [of[x] for x in hoisted], [of[x] for x in stacked], bwd


def _slice(program: Program, outputs, inputs) -> Program:
    """The eqns of `program` that `outputs` need, as a program over `inputs` (they read no
    other input)."""
    need, eqns = set(outputs), []
    for e in reversed(program.eqns):
        if any(o in need for o in e.outputs):
            eqns.append(e)
            need.update(x for x in e.inputs if isinstance(x, Var))
    return Program(f"{program.name}_invariant", tuple(inputs), tuple(outputs),
                   tuple(reversed(eqns)), program.consts)


vjp_rules[scan_p] = _scan_vjp


def _scan_batcher(args, dims, *, jaxpr, length, num_consts, num_carry, reverse=False,
                  unroll=1):
    size = mapped_size(args, dims)
    nc, nk = num_consts, num_carry
    mapped = [d is not None for d in dims]
    while True:   # a carry is mapped if it starts mapped or the body makes it so: a fixpoint
        out = depends(jaxpr, mapped)
        carry = [a or b for a, b in zip(mapped[nc:nc + nk], out[:nk])]
        if carry == mapped[nc:nc + nk]:
            break
        mapped[nc:nc + nk] = carry
    ins = []
    for i, (x, d) in enumerate(zip(args, dims)):
        if i >= nc + nk:                       # scanned: the mapped axis second
            ins.append(x if d is None else moveaxis(x, d, 1))
        else:
            ins.append(batch_to_front(x, d, size) if mapped[i] else x)
    body = _batch_body(jaxpr, mapped, carry + out[nk:], size)
    consts, init, xs = _split(ins, nc, nk)
    fin, ys = scan(body, consts, init, xs, length, reverse, unroll)
    return fin + ys, [0 if m else None for m in carry] + [1 if m else None for m in out[nk:]]


batching_rules[scan_p] = _scan_batcher


# ----------------------------------------------------------------------------------- while

while_p = Primitive("while", ("pure", "control"), multiple_results=True)


def _while_rule(*types, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cc, bc, init = _split(types, cond_nconsts, body_nconsts)
    _check_types("while: the predicate's inputs", _types(cond_jaxpr, "inputs"), cc + init)
    pred = _types(cond_jaxpr, "outputs")
    if pred != [TensorType((), "bool")]:
        raise ShapeError(f"while: the predicate must give one bool[], got "
                         f"{', '.join(map(str, pred))}")
    _check_types("while: the body's inputs", _types(body_jaxpr, "inputs"), bc + init)
    _check_types("while: the body's carry out", _types(body_jaxpr, "outputs"), init)
    return init


def _while_impl(*arrays, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cc, bc, carry = _split(arrays, cond_nconsts, body_nconsts)
    while bool(run_program(cond_jaxpr, *cc, *carry)[0]):
        carry = run_program(body_jaxpr, *bc, *carry)
    return carry


def _while_vjp(gs, outs, *ins, **params):
    raise GradError("reverse-mode differentiation does not work for vg.lax.while_loop or "
                    "vg.lax.fori_loop with traced bounds (the number of steps is not known "
                    "when the backward is built); use vg.lax.scan, or fori_loop with Python "
                    "int bounds", source=user_source())


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """Forward mode: one while loop over (carry, its tangent), the body's JVP program as the
    body. Every float carry and body const takes a tangent (zeros where none came in)."""
    cc, bc, init = _split(primals, cond_nconsts, body_nconsts)
    _, tbc, tinit = _split(tangents, cond_nconsts, body_nconsts)
    nb, nk = len(bc), len(init)
    fb = [i for i in range(nb) if is_float(body_jaxpr.inputs[i].dtype)]
    fk = [i for i in range(nk) if is_float(body_jaxpr.inputs[nb + i].dtype)]
    wrt = fb + [nb + i for i in fk]
    jvp = _transform("jvp")(body_jaxpr, wrt)
    zero = lambda i, given: given if given is not None else _zeros(aval(primals[i]))
    tb = [zero(cond_nconsts + i, tbc[i]) for i in fb]
    tk = [zero(cond_nconsts + nb + i, tinit[i]) for i in fk]

    def body(*a):
        b, t_b, k, t_k = _split(a, nb, len(fb), nk)
        cts = [_zeros(o.type) for o in body_jaxpr.outputs if is_float(o.dtype)]
        r = eval_program(jvp, b + k + cts + t_b + t_k)
        return r[:nk] + r[nk:]

    def cond(*a):
        c, k = a[:cond_nconsts], a[cond_nconsts:cond_nconsts + nk]
        return eval_program(cond_jaxpr, list(c) + list(k))

    types = [aval(x) for x in primals]
    cond_prog, _ = trace_closed(cond, types[:cond_nconsts] + types[cond_nconsts + nb:] +
                                [aval(x) for x in tk], "while_cond")
    body_types = (types[cond_nconsts:cond_nconsts + nb] + [aval(x) for x in tb] +
                  types[cond_nconsts + nb:] + [aval(x) for x in tk])
    body_prog, _ = trace_closed(body, body_types, "while_body")
    outs = while_loop(cond_prog, body_prog, cc, bc + tb, init + tk)
    touts = [None] * nk
    for i, g in zip(fk, outs[nk:]):
        touts[i] = g
    return outs[:nk], touts


abstract_eval_rules[while_p] = _while_rule
impls[while_p] = _while_impl
vjp_rules[while_p] = _while_vjp
jvp_rules[while_p] = _while_jvp


def while_loop(cond_jaxpr, body_jaxpr, cond_consts, body_consts, init) -> list:
    return list(bind(while_p, *cond_consts, *body_consts, *init, cond_jaxpr=cond_jaxpr,
                     body_jaxpr=body_jaxpr, cond_nconsts=len(cond_consts),
                     body_nconsts=len(body_consts)))


def while_chunk(e, k: int) -> Program:
    """A while eqn's next k iterations as one program, for a runner that reads the predicate
    once per k (vkgrad/execution/segmented.py): (*cond_consts, *body_consts, *carry) -> (*the
    carry after them, the predicate on it). Each is a masked iteration, a scan of k of them:
    the body runs and its result is kept only where the predicate holds, so the iterations
    after the loop's end change nothing (a kernel cannot skip the dispatches after it)."""
    p = e.params
    cj, bj, ncc, nbc = p["cond_jaxpr"], p["body_jaxpr"], p["cond_nconsts"], p["body_nconsts"]
    types = [x.type for x in e.inputs]

    def masked(*a):
        cc, bc, carry = _split(a, ncc, nbc)
        pred = eval_program(cj, cc + carry)[0]
        return [select(pred, n, o) for n, o in zip(eval_program(bj, bc + carry), carry)]

    step, _ = trace_closed(masked, types, "while_step")

    def chunk(*a):
        cc, bc, carry = _split(a, ncc, nbc)
        fin, _ = scan(step, cc + bc, carry, [], k)
        return fin + eval_program(cj, cc + fin)

    return trace_closed(chunk, types, "while_chunk")[0]


def _any(pred):
    """bool[] : some example's predicate is true."""
    return lt(0, reduce_max(convert(pred, "i32"), tuple(range(len(pred.shape)))))


def _while_batcher(args, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    size = mapped_size(args, dims)
    ncc, nbc = cond_nconsts, body_nconsts
    mapped = [d is not None for d in dims]
    cm, bm = mapped[:ncc], mapped[ncc:ncc + nbc]
    carry = mapped[ncc + nbc:]
    while True:
        new = [a or b for a, b in zip(carry, depends(body_jaxpr, bm + carry))]
        pred_mapped = depends(cond_jaxpr, cm + new)[0]
        if pred_mapped:          # examples stop at different steps: every carry is per example
            new = [True] * len(new)
        if new == carry:
            break
        carry = new
    ins = [batch_to_front(x, d, size) if (mapped[:ncc + nbc] + carry)[i] else x
           for i, (x, d) in enumerate(zip(args, dims))]
    cc, bc, init = _split(ins, ncc, nbc)
    cond_b = _batch_body(cond_jaxpr, cm + carry, [pred_mapped], size)
    body_b = _batch_body(body_jaxpr, bm + carry, carry, size)
    if not pred_mapped:
        return while_loop(cond_b, body_b, cc, bc, init), [0 if m else None for m in carry]

    def any_cond(*a):
        return [_any(eval_program(cond_b, list(a))[0])]

    def masked_body(*a):     # an example whose predicate is false keeps its carry
        c, b, k = _split(a, ncc, nbc)
        pred = eval_program(cond_b, c + k)[0]
        new = eval_program(body_b, b + k)
        return [select(reshape(pred, (size,) + (1,) * (len(o.shape) - 1)), n, o)
                for n, o in zip(new, k)]

    any_prog, _ = trace_closed(any_cond, [aval(x) for x in cc + init], "while_cond")
    body_prog, _ = trace_closed(masked_body, [aval(x) for x in cc + bc + init], "while_body")
    return while_loop(any_prog, body_prog, cc, cc + bc, init), [0] * len(init)


batching_rules[while_p] = _while_batcher


# ----------------------------------------------------------------------------------- cond

cond_p = Primitive("cond", ("pure", "control"), multiple_results=True)


def _cond_rule(index, *ops, branches):
    if index != TensorType((), "i32"):
        raise ShapeError(f"cond: the branch index must be an i32[], got {index}")
    outs = _types(branches[0], "outputs")
    for k, b in enumerate(branches):
        _check_types(f"cond: the inputs of branch {k}", _types(b, "inputs"), ops)
        _check_types(f"cond: the outputs of branch {k}", _types(b, "outputs"), outs)
    return outs


def _cond_impl(index, *ops, branches):
    return run_program(branches[int(np.clip(index, 0, len(branches) - 1))], *ops)


abstract_eval_rules[cond_p] = _cond_rule
impls[cond_p] = _cond_impl


def cond(index, branches, ops) -> list:
    return list(bind(cond_p, index, *ops, branches=tuple(branches)))


def _cond_vjp(gs, outs, index, *ops, branches):
    types = _types(branches[0], "inputs")
    wrt = [i for i, t in enumerate(types) if is_float(t.dtype)]
    fo = [j for j, o in enumerate(branches[0].outputs) if is_float(o.dtype)]
    vjps = []
    for b in branches:
        joint = _transform("vjp")(b, wrt, fo)
        n_out = len(b.outputs)
        prog, _ = trace_closed(lambda *a, joint=joint, n_out=n_out:
                               eval_program(joint, list(a))[n_out:],
                               types + [branches[0].outputs[j].type for j in fo], "cond_vjp",
                               phase="bwd")
        vjps.append(prog)
    got = cond(index, vjps, list(ops) + [gs[j] for j in fo])
    cts = [None] * len(ops)
    for i, g in zip(wrt, got):
        cts[i] = g
    return (None, *cts)


vjp_rules[cond_p] = _cond_vjp


def _cond_batcher(args, dims, *, branches):
    size = mapped_size(args, dims)
    (index, *ops), (idim, *odims) = args, dims
    mapped = [d is not None for d in odims]
    out = [any(col) for col in zip(*(depends(b, mapped) for b in branches))]
    ops = [batch_to_front(x, d, size) if d is not None else x for x, d in zip(ops, odims)]
    if idim is None:
        bs = [_batch_body(b, mapped, out, size) for b in branches]
        return cond(index, bs, ops), [0 if m else None for m in out]
    # a mapped index: every branch runs, each example selects its own branch's results
    index = minimum(maximum(batch_to_front(index, idim, size), 0), len(branches) - 1)
    results = [eval_program(_batch_body(b, mapped, [True] * len(out), size), ops)
               for b in branches]
    chosen = results[0]
    for k in range(1, len(branches)):
        pick = eq(index, k)
        chosen = [select(reshape(pick, (size,) + (1,) * (len(r.shape) - 1)), r, c)
                  for r, c in zip(results[k], chosen)]
    return chosen, [0] * len(chosen)


batching_rules[cond_p] = _cond_batcher


# ----------------------------------------------------------------------------------- checkpoint

checkpoint_p = Primitive("checkpoint", ("pure", "control"), multiple_results=True)
param_defaults[checkpoint_p] = {"num_res": 0, "prevent_cse": True}


def _checkpoint_rule(*types, jaxpr, policy, num_res=0, prevent_cse=True):
    _check_types("checkpoint: the body's inputs", _types(jaxpr, "inputs"), types)
    return _types(jaxpr, "outputs")


def _checkpoint_impl(*arrays, jaxpr, policy, num_res=0, prevent_cse=True):
    return run_program(jaxpr, *arrays)


def _checkpoint_vjp(gs, outs, *ins, jaxpr, policy, num_res=0, prevent_cse=True):
    """The body's VJP program evaluated in the backward: its forward recomputed there, except
    the values the policy saved (the last num_res outputs), read from the forward's results."""
    n = len(jaxpr.outputs) - num_res
    wrt = [i for i, v in enumerate(jaxpr.inputs) if is_float(v.dtype)]
    # the saved values' own cotangents too (zeros, unless the backward itself is differentiated:
    # it reads them)
    fo = [j for j, o in enumerate(jaxpr.outputs) if is_float(o.dtype)]
    joint = _transform("vjp")(jaxpr, wrt, fo)
    joint = _read_saved(joint, jaxpr, jaxpr.outputs[n:])
    got = eval_program(joint, list(ins) + [gs[j] for j in fo] + list(outs[n:]))[
        len(jaxpr.outputs):]
    cts = [None] * len(ins)
    for i, g in zip(wrt, got):
        cts[i] = g
    return tuple(cts)


def _read_saved(joint: Program, body: Program, saved) -> Program:
    """`joint` (a VJP program of `body`, whose first eqns replay body's eqns one for one) with
    the replayed values of `saved` read from new inputs (after its own) instead of computed."""
    where = {o: (i, k) for i, e in enumerate(body.eqns) for k, o in enumerate(e.outputs)}
    new, added = {}, []
    for r in saved:
        i, k = where[r]
        added.append(Var(r.shape, r.dtype))
        new[joint.eqns[i].outputs[k]] = added[-1]
    eqns = []
    for e in joint.eqns:
        if any(o in new for o in e.outputs):
            if all(o in new for o in e.outputs):
                continue
            e = e.replace(outputs=tuple(Var(o.shape, o.dtype) if o in new else o
                                        for o in e.outputs))
        eqns.append(e.replace(inputs=tuple(new.get(x, x) if isinstance(x, Var) else x
                                           for x in e.inputs)))
    outs = tuple(new.get(o, o) if isinstance(o, Var) else o for o in joint.outputs)
    return joint.replace(inputs=joint.inputs + tuple(added), eqns=tuple(eqns), outputs=outs)


def _checkpoint_batcher(args, dims, *, jaxpr, policy, num_res=0, prevent_cse=True):
    size = mapped_size(args, dims)
    mapped = [d is not None for d in dims]
    out = depends(jaxpr, mapped)
    ins = [batch_to_front(x, d, size) if d is not None else x for x, d in zip(args, dims)]
    outs = bind(checkpoint_p, *ins, jaxpr=_batch_body(jaxpr, mapped, out, size), policy=policy,
                num_res=num_res, prevent_cse=prevent_cse)
    return list(outs), [0 if m else None for m in out]


abstract_eval_rules[checkpoint_p] = _checkpoint_rule
impls[checkpoint_p] = _checkpoint_impl
vjp_rules[checkpoint_p] = _checkpoint_vjp
batching_rules[checkpoint_p] = _checkpoint_batcher

# checkpoint_name[name](x) = x: names a value for a checkpoint policy (save_only_these_names);
# simplify removes it once the program is not differentiated again
checkpoint_name_p = Primitive("checkpoint_name", ("pure",))
abstract_eval_rules[checkpoint_name_p] = lambda x, *, name: x
impls[checkpoint_name_p] = lambda x, *, name: x
vjp_rules[checkpoint_name_p] = lambda g, ans, x, *, name: (g,)
batching_rules[checkpoint_name_p] = lambda args, dims, *, name: (
    bind(checkpoint_name_p, args[0], name=name), dims[0])


def describe(e) -> str:
    """A scan eqn in words, for the plan's loops (`--stage plan`): its trip count."""
    p = e.params
    return (f"scan of {p['length']} steps{' (reverse)' if p['reverse'] else ''}, body of "
            f"{len(p['jaxpr'].eqns)} eqns")


__all__ = ["scan_p", "while_p", "cond_p", "checkpoint_p", "checkpoint_name_p", "scan",
           "while_loop", "while_chunk", "cond", "trace_closed", "depends", "describe", "aval"]
