"""Helpers over a fused program (whose top-level eqns each become kernels), shared by the
fusion passes here (fuse_horizontal) and in the lowering (lowering/fusion/: what the
hand-written kernels' contracts let them take).

A *kernel eqn* is a top-level eqn that runs as a hand-written kernel: a non-fusible eqn
(matmul, reduce_*, softmax, ...) or a `fused` eqn of kind input/output/multi_output, whose body
holds such an eqn (the *anchor*) with elementwise/layout eqns around it (vkgrad/passes/fuse.py
lists the kinds; vkgrad/lowering/hooks.py turns them into generated loads and stores).
"""

from __future__ import annotations

import math

from vkgrad import primitives as P
from vkgrad.ir.core import Eqn, Params, Program, Var
from vkgrad.passes.fuse import body_inputs
from vkgrad.primitives.compiler import fused_p
from vkgrad.primitives.compiler import save_p

# Per-element cost of an eqn in a fused chain, in "simple op" units (add, mul, select: 1;
# layout: 0, it is index arithmetic). Transcendentals cost more on every GPU.
OP_COST = {P.exp_p: 4, P.log_p: 4, P.log1p_p: 4, P.tanh_p: 4, P.sin_p: 4, P.cos_p: 4,
           P.pow_p: 8, P.sqrt_p: 2, P.div_p: 2}

VIEWS = (P.reshape_p, save_p)    # top-level eqns that are views of their operand's buffer


def kind(e: Eqn) -> str | None:
    """'loop', 'horizontal', 'input', 'output', 'multi_output', 'horizontal_reduce' for a
    fused eqn; 'kernel' for a hand-written kernel eqn on its own; None for anything else (an
    alias)."""
    if e.prim is fused_p:
        return e.params.get("kind", "loop")
    if e.prim in VIEWS:
        return None
    return "kernel"


def is_loop(e: Eqn) -> bool:
    return kind(e) == "loop"


def body_of(e: Eqn) -> Program:
    """The eqn as a body: a fused eqn's own, or a one-eqn program around a kernel eqn."""
    if e.prim is fused_p:
        return e.params["body"]
    ins = tuple(dict.fromkeys(x for x in e.inputs if isinstance(x, Var)))
    return Program(e.prim.name, ins, e.outputs, (e,))


def anchors(body: Program) -> list:
    return [b for b in body.eqns if not b.prim.fusible]


def cost(e: Eqn) -> int:
    if e.prim.fusible and not e.prim.elementwise:
        return 0
    return OP_COST.get(e.prim, 1)


def toposort(eqns) -> list:
    """`eqns` (each once) in an order where every value is defined before it is used, as close
    to the given order as that allows (bodies merged from two kernels share eqns)."""
    eqns = list(dict.fromkeys(eqns))
    producer = {o: e for e in eqns for o in e.outputs}
    done, out = set(), []

    def producers(e):
        return (producer.get(x) if isinstance(x, Var) else None for x in e.inputs)

    # depth first with an explicit stack of (eqn, its producers still to visit): a chain of
    # thousands of eqns given consumers first would recurse past Python's 1,000 frames
    for root in eqns:
        if root in done:
            continue
        todo = [(root, producers(root))]
        while todo:
            e, rest = todo[-1]
            p = next((p for p in rest if p is not None and p not in done and p is not e), None)
            if p is not None:
                todo.append((p, producers(p)))
                continue
            todo.pop()
            if e not in done:
                done.add(e)
                out.append(e)
    return out


def make_fused(body_eqns, outputs, kind_: str, like: Eqn) -> Eqn:
    """A fused eqn computing `outputs` with `body_eqns` (put in a valid order); its inputs are
    whatever those eqns read and do not define, in order of first use."""
    body_eqns = toposort(body_eqns)
    inputs = body_inputs(body_eqns)
    body = Program(f"fused_{kind_}", tuple(inputs), tuple(outputs), tuple(body_eqns))
    return Eqn(fused_p, tuple(inputs), Params(kind=kind_, body=body), tuple(outputs),
               like.source, like.phase)


def needed(body_eqns, values) -> list:
    """The eqns of `body_eqns` that `values` need (in their order)."""
    producer = {o: e for e in body_eqns for o in e.outputs}
    keep, stack = set(), [producer[v] for v in values if v in producer]
    while stack:
        e = stack.pop()
        if e in keep:
            continue
        keep.add(e)
        stack += [producer[x] for x in e.inputs if isinstance(x, Var) and x in producer]
    return [e for e in body_eqns if e in keep]


def chain_cost(body: Program, value: Var) -> tuple[int, int]:
    """(per-element cost, number of full-size memory inputs) of computing `value` in `body`:
    inputs at least as large as `value` are read once per element, smaller ones (a bias, a
    scalar) are broadcast and cheap."""
    eqns = needed(body.eqns, [value])
    defined = {o for e in eqns for o in e.outputs}
    leaves = {x for e in eqns for x in e.inputs if isinstance(x, Var) and x not in defined}
    size = math.prod(value.shape)
    return sum(cost(e) for e in eqns), sum(1 for x in leaves if math.prod(x.shape) >= size)


class Schedule:
    """The top-level eqns of a fused program with who reads what: `readers[v]` are the
    positions of the eqns that read v from memory, seen through aliases (a kernel reading
    `reshape v` reads v)."""

    def __init__(self, program: Program):
        self.program = program
        self.eqns = list(program.eqns)
        self.producer = {o: i for i, e in enumerate(self.eqns) for o in e.outputs}
        self.returned = {o for o in program.outputs if isinstance(o, Var)}
        self.alias_of = {e.out: e.inputs[0] for e in self.eqns
                         if e.prim in VIEWS and isinstance(e.inputs[0], Var)}
        self.readers: dict = {}
        for i, e in enumerate(self.eqns):
            if e.prim in VIEWS:
                continue
            for x in dict.fromkeys(x for x in e.inputs if isinstance(x, Var)):
                self.readers.setdefault(self.root(x), []).append(i)
        for o in list(self.returned):
            self.returned.add(self.root(o))

    def root(self, v):
        while v in self.alias_of:
            v = self.alias_of[v]
        return v

    def alias_path(self, x) -> list:
        """The alias eqns from a root value to x (empty when x is the root)."""
        path = []
        while x in self.alias_of:
            path.append(self.eqns[self.producer[x]])
            x = self.alias_of[x]
        return path[::-1]

    def reads_between(self, lo: int, hi: int, values) -> bool:
        """Does an eqn at a position in (lo, hi] read one of `values` (through aliases)?"""
        values = {self.root(v) for v in values}
        for i in range(lo + 1, hi + 1):
            e = self.eqns[i]
            if any(isinstance(x, Var) and self.root(x) in values for x in e.inputs):
                return True
        return False
