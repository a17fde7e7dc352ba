"""What the passes that fuse into hand-written kernels share: what each kernel can take, cost
weights, and a few helpers over a fused program (whose top-level eqns each become kernels).

A *kernel eqn* is a top-level eqn that runs as a hand-written kernel: a non-fusible eqn
(matmul, reduce_*, softmax, ...) or a `fused` eqn of kind input/output/multi_output, whose body
holds such an eqn (the *anchor*) with elementwise/layout eqns around it (vkgrad/passes/fuse.py
lists the kinds; vkgrad/lowering/hooks.py turns them into generated loads and stores).
"""

from __future__ import annotations

import math

from vkgrad import primitives as P
from vkgrad.ir.core import Eqn, Params, Program, Var
from vkgrad.passes.base import Pass
from vkgrad.passes.fuse import body_inputs, fused_p
from vkgrad.passes.remat import save_p

# Operands whose loads a kernel can compute (a fused producer), by position. These are the
# `VKG_LOAD_BN` hooks of vkgrad/kernels_glsl/*.comp (binding N = operand position here).
PROLOGUE_OPERANDS = {
    P.reduce_sum_p: (0,), P.reduce_max_p: (0,), P.reduce_min_p: (0,),
    P.softmax_p: (0,), P.log_softmax_p: (0,),
    P.softmax_bwd_p: (0, 1), P.log_softmax_bwd_p: (0, 1),
    P.take_p: (0, 1),
    P.matmul_p: (0, 1),      # only cheap chains: MATMUL_PROLOGUE_* below
}
# Kernels whose result stores can run an epilogue (the `VKG_STORE_BN` hooks).
EPILOGUE_KERNELS = frozenset({P.matmul_p, P.softmax_p, P.log_softmax_p, P.softmax_bwd_p,
                              P.log_softmax_bwd_p, P.reduce_sum_p, P.reduce_max_p,
                              P.reduce_min_p, P.take_p})

# Per-element cost of an eqn in a fused chain, in "simple op" units (add, mul, select: 1;
# layout: 0, it is index arithmetic). Transcendentals cost more on every GPU.
OP_COST = {P.exp_p: 4, P.log_p: 4, P.log1p_p: 4, P.tanh_p: 4, P.sin_p: 4, P.cos_p: 4,
           P.pow_p: 8, P.sqrt_p: 2, P.div_p: 2}

# A matmul loads each operand element once per tile of the other operand (N / BN times for A),
# so a producer fused into its loads runs that many times: only short chains that read no more
# memory per element than the operand itself would (one full-size input).
MATMUL_PROLOGUE_MAX_COST = 3          # add, mul, max, select: no exp/tanh/pow per load
MATMUL_PROLOGUE_MAX_FULL_INPUTS = 1
# Measured on the H200 (the transformer block step, d512 L1024 batch 4, 2026-11-30): matmuls of
# 1.6-8.6 GFLOP with generated loads or stores ran 2-4x slower than without them (the hooks cost
# the large tiles their vec4 loads and registers), 15x with a GELU's tanh in them; a small
# matmul is dispatch-bound, where a fused load or store saves a dispatch and a round trip. So
# only matmuls up to this many flops take fused loads, stores or a column sum.
MATMUL_HOOK_MAX_FLOPS = 2 ** 30


# A matmul with few output tiles and a long K runs split-K on a GPU (vkgrad/lowering/matmul.py,
# choose_splits: fewer than 66 workgroups of the smallest 32x64 tile, 8 or more k steps of 32),
# and a matmul with fused loads or stores never does (it gave wrong results on the H200). Such a
# matmul takes no hooks: on the H200 (bench_lm, 2026-12-01) weight gradients over K = 8192
# tokens ran 406 us ([256,256] with a fused column sum) and 1510 us ([512,48] with fused loads)
# on 32 and 16 workgroups.
SPLIT_K_TILE, SPLIT_K_MAX_TILES, SPLIT_K_MIN_K = (32, 64), 66, 256


def split_k_likely(mm: Eqn) -> bool:
    a = mm.inputs[0]
    k = a.shape[-2] if mm.params["transpose_a"] else a.shape[-1]
    *batch, m, n = mm.out.shape
    tiles = math.prod(batch) * -(-m // SPLIT_K_TILE[0]) * -(-n // SPLIT_K_TILE[1])
    return tiles < SPLIT_K_MAX_TILES and k >= SPLIT_K_MIN_K


# On a GPU, fused loads cost a matmul more than its stores: the 784-1024-1024-10 MLP step's
# matmuls of 0.4-0.5 GFLOP ran 9 us slower with a ReLU in their loads and 33-44 us slower with
# the bias gradient riding along as a column sum (its ones row goes through the load hooks),
# where a separate kernel costs 4-11 us (H200, 2026-12-01: the step's GPU time 323 us with them,
# 283 without the column sums, 275 without any hooks). Only a matmul about as short as a
# dispatch takes them there.
MATMUL_LOAD_HOOK_MAX_FLOPS_GPU = 2 ** 26


def takes_hooks(e: Eqn, gpu: bool = True, loads: bool = False) -> bool:
    """Can kernel eqn `e` run generated stores (or, `loads`, loads and column sums)? Not a
    large matmul, nor on a GPU one that would run split-K or a fused load of one that is not
    tiny (above), and not a take moving i32/bool values (the generated hooks compute in
    float)."""
    if e.prim is P.matmul_p:
        a = e.inputs[0]
        k = a.shape[-2] if e.params["transpose_a"] else a.shape[-1]
        flops = 2 * math.prod(e.out.shape) * k
        limit = MATMUL_LOAD_HOOK_MAX_FLOPS_GPU if gpu and loads else MATMUL_HOOK_MAX_FLOPS
        return flops <= limit and not (gpu and split_k_likely(e))
    if e.prim is P.take_p:
        return e.inputs[0].dtype == "f32"
    return True


class HookFusion(Pass):
    """A pass that gives kernels generated loads or stores. `gpu`: the target is a GPU (it
    splits K and its matmul tiles pay for fused loads; lavapipe does neither)."""

    def __init__(self, gpu: bool = True):
        self.gpu = gpu

    def takes_hooks(self, e: Eqn, loads: bool = False) -> bool:
        return takes_hooks(e, self.gpu, loads)


# An epilogue runs once per result element in the kernel's store; more than a few extra
# full-size reads or writes there (an optimizer update: 3 and 3) is a kernel of its own.
EPILOGUE_MAX_EXTRA_INPUTS = 2
EPILOGUE_MAX_OUTPUTS = 3

ALIASES = (P.reshape_p, save_p)    # top-level eqns that are views of their operand's buffer


def kind(e: Eqn) -> str | None:
    """'loop', 'horizontal', 'input', 'output', 'multi_output' for a fused eqn; 'kernel' for a
    hand-written kernel eqn on its own; None for anything else (an alias)."""
    if e.prim is fused_p:
        return e.params.get("kind", "loop")
    if e.prim in ALIASES:
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
                         if e.prim in ALIASES and isinstance(e.inputs[0], Var)}
        self.readers: dict = {}
        for i, e in enumerate(self.eqns):
            if e.prim in ALIASES:
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
