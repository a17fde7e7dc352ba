"""scans: a scan whose work another scan repeats is merged into it, and stacked results nobody
reads are dropped.

Merge. A scan's VJP (primitives/control_flow.py) binds the forward scan again with the values
each step's backward reads (its residuals) stacked as well: its body is the forward body with
more outputs (the same eqns, the same Vars). When both scans are in one program (a value and
its gradient), the first is the second's prefix: its results are the second's first results,
and the second moves to the first's place (its operands are the first's, defined before it).
So the program runs ONE forward scan: the VJP rule cannot replace the first itself, since the
joint program replays the forward before any rule runs. Run before the bodies are optimised
on their own (optimize does), while the two still share their eqns.

Prune. A stacked output (a y) that nothing reads is removed from the eqn and from its body's
outputs, and DCE then drops the body eqns only it used (a gradient program that reads the
transposed scan's results, not the forward's ys); two stacked outputs of the same body value
become one; a const or a scanned operand (an x) the body does not read is dropped (a
transposed body reads the stacked residuals, often not the forward's xs). Carries stay: the
next step reads them.

Uniform xs. A scanned operand whose every element is one literal (broadcast_to of a scalar
literal, through transposes and reshapes: the cotangent of a loss that sums a scan's ys) is
made inside the body instead, as broadcast_to of that literal, where the body's fusion folds
it into its readers: no stacked buffer of the trip count's size, no dispatch filling it and
no slice of it copied in every step.
"""

from __future__ import annotations

from vkgrad import primitives as P
from vkgrad.ir.core import Eqn, Literal, Params, Program, Var
from vkgrad.passes.base import Pass, resolve, substitute_outputs
from vkgrad.primitives.control_flow import scan_p


def _extends(b, a) -> bool:
    """b is scan a with more body outputs."""
    ja, jb = a.params["jaxpr"], b.params["jaxpr"]
    same = {k: v for k, v in a.params.items() if k != "jaxpr"} == \
        {k: v for k, v in b.params.items() if k != "jaxpr"}
    return (same and b.inputs == a.inputs and jb.eqns is ja.eqns and jb.inputs == ja.inputs
            and jb.consts == ja.consts and jb.outputs[:len(ja.outputs)] == ja.outputs)


class Scans(Pass):
    name = "scans"

    def apply(self, program: Program) -> Program:
        if not any(e.prim is scan_p for e in program.eqns):
            return program
        return self._prune(self._merge(program))

    @staticmethod
    def _merge(program: Program) -> Program:
        scans = [e for e in program.eqns if e.prim is scan_p]
        into = {}                      # a scan -> the later one that repeats it
        for i, a in enumerate(scans):
            b = next((b for b in scans[i + 1:] if _extends(b, a)), None)
            if b is not None:
                into[a] = b
        if not into:
            return program
        moved = set(into.values())
        env, eqns = {}, []
        for e in program.eqns:
            if e in moved:
                continue
            if e in into:              # a chain (a VJP's scan's VJP): the last takes all
                chain = [e]
                while chain[-1] in into:
                    chain.append(into[chain[-1]])
                for m in chain[:-1]:
                    env.update(zip(m.outputs, chain[-1].outputs))
                e = chain[-1].replace(phase=e.phase)
            eqns.append(e.replace(inputs=tuple(resolve(env, x) for x in e.inputs)))
        return program.replace(eqns=tuple(eqns), outputs=substitute_outputs(program, env))

    @staticmethod
    def _prune(program: Program) -> Program:
        program = Scans._dedupe(program)
        defs = {o: e for e in program.eqns for o in e.outputs}
        program = program.replace(eqns=tuple(_drop_unread(_uniform_xs_inside(e, defs))
                                             if e.prim is scan_p else e
                                             for e in program.eqns))
        used = {x for e in program.eqns for x in e.inputs if isinstance(x, Var)}
        used |= {o for o in program.outputs if isinstance(o, Var)}
        eqns = []
        for e in program.eqns:
            nk = e.params["num_carry"] if e.prim is scan_p else 0
            if e.prim is scan_p and any(o not in used for o in e.outputs[nk:]):
                keep = list(range(nk)) + [j for j in range(nk, len(e.outputs))
                                          if e.outputs[j] in used]
                body = e.params["jaxpr"]
                body = body.replace(outputs=tuple(body.outputs[j] for j in keep))
                e = e.replace(outputs=tuple(e.outputs[j] for j in keep),
                              params=e.params.replace(jaxpr=body))
            eqns.append(e)
        return program.replace(eqns=tuple(eqns))

    @staticmethod
    def _dedupe(program: Program) -> Program:
        """Two stacked outputs of one body value are one (a merged VJP scan stacks the carry
        entering each step, which the user's y often is already): readers of the second read
        the first, and pruning drops the second."""
        env = {}
        for e in program.eqns:
            if e.prim is scan_p:
                nk, body = e.params["num_carry"], e.params["jaxpr"]
                first = {}
                for y, o in zip(body.outputs[nk:], e.outputs[nk:]):
                    if isinstance(y, Var):
                        if y in first:
                            env[o] = first[y]
                        else:
                            first[y] = o
        if not env:
            return program
        return program.replace(
            eqns=tuple(e.replace(inputs=tuple(resolve(env, x) for x in e.inputs))
                       for e in program.eqns), outputs=substitute_outputs(program, env))


def _uniform(defs, x):
    """The scalar literal every element of x is (x made by broadcast_to of it, through
    transposes and reshapes), or None."""
    e = defs.get(x)
    while e is not None and e.prim in (P.transpose_p, P.reshape_p):
        e = defs.get(e.inputs[0])
    if e is not None and e.prim is P.broadcast_to_p and isinstance(e.inputs[0], Literal) \
            and e.inputs[0].shape == ():
        return e.inputs[0]
    return None


def _uniform_xs_inside(e, defs):
    """Scan e with each uniform x (_uniform) made in its body instead of stacked outside;
    _drop_unread then drops the operand."""
    p, body = e.params, e.params["jaxpr"]
    first = p["num_consts"] + p["num_carry"]
    made = [Eqn(P.broadcast_to_p, (lit,), Params(shape=v.shape), (v,), e.source, e.phase)
            for x, v in zip(e.inputs[first:], body.inputs[first:])
            if (lit := _uniform(defs, x)) is not None]
    if not made:
        return e
    inside = {m.outputs[0] for m in made}
    body = body.replace(inputs=tuple(v if v not in inside else Var(v.shape, v.dtype)
                                     for v in body.inputs),
                        eqns=(*made, *body.eqns))
    return e.replace(params=p.replace(jaxpr=body))


def _drop_unread(e):
    """Scan e without the consts and xs its body does not read (a transposed body reads the
    residuals, often not the forward's xs: each would be a copy per step on the device)."""
    p, body = e.params, e.params["jaxpr"]
    nc, nk = p["num_consts"], p["num_carry"]
    read = {x for be in body.eqns for x in be.inputs} | set(body.outputs)
    keep = [i for i, v in enumerate(body.inputs) if nc <= i < nc + nk or v in read]
    if len(keep) == len(body.inputs):
        return e
    body = body.replace(inputs=tuple(body.inputs[i] for i in keep))
    return e.replace(inputs=tuple(e.inputs[i] for i in keep), params=p.replace(
        jaxpr=body, num_consts=sum(1 for i in keep if i < nc)))


scans = Scans()
