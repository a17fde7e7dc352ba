"""Save or recompute: which forward values the backward reads from memory, and which it
recomputes inside its own fused kernels, decided by a minimum cut (networkx).

In a joint forward+backward program the backward reads forward values (the residuals). Each
can be *saved* (written by the forward, kept in memory until the backward reads it) or
*recomputed* by the backward from other saved values, when every eqn on the way is cheap
elementwise or layout work that a fused backward kernel does in registers. The choice is a
minimum s-t cut (PyTorch's AOTAutograd min-cut partitioner is the public reference):

    source -> every program input and const (free: they are in memory anyway)
    source -> every kernel result (matmul, reductions, softmax, take: never recomputed; the
              backward reads them if it needs them)
    value_in -> value_out, capacity = the value's bytes (saving it costs that much)
    u_out -> v_in (infinite) for each operand u of a recomputable (fusible) eqn making v
    v_out -> sink (infinite) for each forward value a backward eqn reads

A cut separates the backward's needs from the source; the values whose in->out edge it cuts
are saved, everything between them and the backward is recomputed.

Bytes alone would recompute a transformer's whole residual stream: x_l = x_{l-1} + branch_l is
cheap elementwise work from values the backward keeps anyway (each branch's matmul operands),
so saving nothing more looks free, and layer l's backward kernel re-reads every earlier
layer's values (the medium LM in bf16 on the H200: backward kernels of 40-160 inputs, 0.5 ->
1.1 ms growing with depth, 3.9 ms for one of 50 outputs, 26 ms of fused work a step). So a
value whose recomputation would read more than MAX_RECOMPUTE_READS distinct values (what a
fused kernel handles well) is not recomputed: like a kernel's result, it is saved if the
backward needs it (AOTAutograd bans recomputation far from the backward likewise). Ties go to a kernel's
result (written anyway), then to the value nearest the backward (less to recompute). Then the
program is rewritten:
  * each saved fusible value v gets `s = save v` right after it, and every reader of v reads s:
    `save` is not fusible, so v is written to memory once (by whatever kernel computes it)
    and nothing recomputes it (`save` itself is no dispatch, the lowering aliases it);
  * each backward read of a forward value that is not saved reads a recomputed copy, made of
    backward-phase clones of the forward eqns between it and the saved values, which the
    fusion passes then put inside the backward kernels (a matmul operand's prologue, an
    epilogue, a loop kernel).
The bytes that cross from forward to backward are `lowered.stats()["saved_bytes"]`.
"""

from __future__ import annotations

import itertools
import math

import networkx as nx

from vkgrad.ir.core import (Eqn, Params, Primitive, Program, Var, abstract_eval_rules,
                            vjp_rules)
from vkgrad.dtypes import storage_words
from vkgrad.ir.interpreter import impls
from vkgrad.passes.base import Pass
from vkgrad.primitives.compiler import save_p

# the most distinct values one recomputed forward value may be made from (see the docstring)
MAX_RECOMPUTE_READS = 8
MIN_BAN_ELEMENTS = 1 << 16    # ... for a value this large (a small one is cheap to redo)


def nbytes(v) -> int:
    return storage_words(max(1, math.prod(v.shape)), v.dtype) * 4


def too_deep(eqns) -> set:
    """The fusible forward values whose recomputation would read more than
    MAX_RECOMPUTE_READS distinct values, in program order: a value's reads are its operands
    that are kernel results, inputs, constants or themselves too deep, and the reads of its
    other (recomputable) operands."""
    reads: dict = {}
    deep: set = set()
    for e in eqns:
        if e.phase != "fwd" or not e.prim.fusible:
            continue
        mine: set = set()
        for u in e.inputs:
            if isinstance(u, Var):
                mine |= reads[u] if u in reads and u not in deep else {u}
        if len(mine) > MAX_RECOMPUTE_READS + 1:   # past the bound is all that matters: a wide
            mine = set(itertools.islice(mine, MAX_RECOMPUTE_READS + 1))   # sum stays linear
        for o in e.outputs:
            reads[o] = mine
            if len(mine) > MAX_RECOMPUTE_READS and math.prod(o.shape) >= MIN_BAN_ELEMENTS:
                deep.add(o)
    return deep


class SaveOrRecompute(Pass):
    name = "remat"

    def apply(self, program: Program) -> Program:
        saved = self.saved(program)
        if saved is None:
            return program
        return self.rewrite(program, saved)

    def saved(self, program: Program) -> set | None:
        """The forward values to save (the min cut), or None when the program has no backward
        reading the forward."""
        eqns = program.eqns
        producer = {o: e for e in eqns if e.phase == "fwd" for o in e.outputs}
        demand = {x for e in eqns if e.phase == "bwd" for x in e.inputs
                  if isinstance(x, Var) and x in producer}
        if not demand:
            return None
        pos = {o: i for i, e in enumerate(eqns) for o in e.outputs}
        free = set(program.inputs) | {v for v, _ in program.consts}
        deep = too_deep(eqns)
        g = nx.DiGraph()
        todo, seen = list(demand), set()
        while todo:
            v = todo.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in free:
                g.add_edge("source", (v, "in"))
                g.add_edge((v, "in"), (v, "out"), capacity=0)
                continue
            e = producer.get(v)
            if e is None:          # a backward value: not ours to place
                continue
            # Bytes first. Among equal sizes a kernel's result is cheapest (it is written anyway;
            # what follows it is recomputed in registers), then the later value (less to redo).
            n = len(eqns)
            tie = (n + 1 if e.prim.fusible else 0) + n - pos[v]
            g.add_edge((v, "in"), (v, "out"), capacity=nbytes(v) * 4 * (n + 1) + tie)
            if not e.prim.fusible or v in deep:
                g.add_edge("source", (v, "in"))
                continue
            for u in e.inputs:
                if isinstance(u, Var):
                    g.add_edge((u, "out"), (v, "in"))
                    todo.append(u)
        for v in demand:
            g.add_edge((v, "out"), "sink")
        if "source" not in g:
            return set()
        _, (reach, _) = nx.minimum_cut(g, "source", "sink")
        return {v for v in seen if (v, "in") in reach and (v, "out") not in reach
                and v not in free}

    def rewrite(self, program: Program, saved: set) -> Program:
        producer = {o: e for e in program.eqns if e.phase == "fwd" for o in e.outputs}
        alias = {}                 # saved fusible value -> its `save` result
        clones: dict = {}          # forward value -> its recomputed copy in the backward
        out = []

        def cloned(x) -> bool:
            """Whether the backward reads x as a recomputed copy (made or still to make)."""
            return (isinstance(x, Var) and x in producer and x not in alias and x not in saved
                    and producer[x].prim.fusible)

        def recompute(x):
            """x as the backward sees it: saved, or recomputed from what is saved. The copies
            are made operands first with an explicit stack, in the order a recursion would
            make them: a chain of 3,000 recomputed ops recursed past Python's 1,000 frames."""
            if not cloned(x):
                return alias.get(x, x) if isinstance(x, Var) else x
            todo = [(x, False)]
            while todo:
                v, ready = todo.pop()
                if v in clones or not cloned(v):
                    continue
                p = producer[v]
                if not ready:
                    todo.append((v, True))
                    todo.extend((u, False) for u in reversed(p.inputs))
                    continue
                ins = tuple(clones[u] if cloned(u) else alias.get(u, u) if isinstance(u, Var)
                            else u for u in p.inputs)
                outs = tuple(Var(o.shape, o.dtype) for o in p.outputs)
                out.append(Eqn(p.prim, ins, p.params, outs, p.source, "bwd"))
                clones.update(zip(p.outputs, outs))
            return clones[x]

        for e in program.eqns:
            if e.phase == "fwd":
                e = _reread(e, alias)
                out.append(e)
                for o in e.outputs:
                    if o in saved and e.prim.fusible:
                        s = Var(o.shape, o.dtype)
                        out.append(Eqn(save_p, (o,), Params(), (s,), e.source, "fwd"))
                        alias[o] = s
                continue
            out.append(e.replace(inputs=tuple(recompute(x) for x in e.inputs)))
        outputs = tuple(alias.get(o, o) if isinstance(o, Var) else o for o in program.outputs)
        return program.replace(eqns=tuple(out), outputs=outputs)


def _reread(e: Eqn, alias: dict) -> Eqn:
    ins = tuple(alias.get(x, x) if isinstance(x, Var) else x for x in e.inputs)
    return e if ins == e.inputs else e.replace(inputs=ins)


remat = SaveOrRecompute()
