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
"""

from __future__ import annotations

from vkgrad.ir.core import Program, Var
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
        program = program.replace(eqns=tuple(_drop_unread(e) if e.prim is scan_p else e
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
