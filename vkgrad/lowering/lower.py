"""Fused Program -> Lowered: the kernels to dispatch, in order, and the buffers they use.

Each `fused` eqn becomes one generated kernel (vkgrad/lowering/elementwise.py); every other eqn
goes through `kernel_rules[prim]`, which maps it onto a hand-written kernel's planner
(matmul.py, kernels.py) and says which of its values play which role. A standalone `reshape` is
an alias: a second name for its operand's buffer (the layout is row-major, so it is exact).

Memory planning: every materialized value gets a buffer *slot*. Inputs, consts and what the
program returns (through aliases) get their own slots; intermediates and kernel temporaries
share scratch slots of equal size and dtype whenever their lifetimes (first write .. last read,
in dispatch order) do not overlap.

A program the kernels cannot run raises `Unsupported(reason)`; the jit then runs the WHOLE
program on the numpy interpreter (never op by op) and counts the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vkgrad.errors import VkgradError
from vkgrad import primitives as P
from vkgrad.ir.core import Literal, Program, Var
from vkgrad.passes.fuse import fused_p
from vkgrad.lowering import elementwise
from vkgrad.lowering.attention import plan_flash_attention, plan_flash_attention_bwd
from vkgrad.lowering.kernels import (plan_reduce, plan_softmax, plan_softmax_grad,
                                     plan_take, plan_take_grad)
from vkgrad.lowering.launch import Launch
from vkgrad.lowering.matmul import plan_matmul_op
from vkgrad.lowering.scan import plan_selective_scan, plan_selective_scan_bwd
from vkgrad.primitives.scan import operand_names as scan_operand_names


class Unsupported(VkgradError):
    """This program cannot run on the Vulkan kernels; `reason` says why in a few words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# ----------------------------------------------------------------------------- kernel rules
# prim -> rule(eqn, device_info) -> (OpPlan, {role: Var}); roles not in the map are temps.

def _need_f32(e, *xs):
    for x in xs:
        if x.dtype != "f32":
            raise Unsupported(f"{e.prim.name} of {x.dtype} (the kernel computes in f32)")


def _matmul(e, info):
    a, b = e.inputs
    c = e.out
    _need_f32(e, a, b)
    ta, tb = e.params["transpose_a"], e.params["transpose_b"]
    batch = c.shape[0] if c.ndim == 3 else 1
    m, n = c.shape[-2:]
    k = a.shape[-2] if ta else a.shape[-1]
    plan = plan_matmul_op(batch, m, k, n, ta, tb, m * k if a.ndim == 3 else 0,
                          k * n if b.ndim == 3 else 0, info)
    return plan, {"a": a, "b": b, "c": c}


def _reduction(op):
    def rule(e, info):
        x = e.inputs[0]
        _need_f32(e, x)
        axes = e.params["axes"]
        a0 = axes[0] if axes else x.ndim
        a1 = a0 + len(axes)
        plan = plan_reduce(op, math.prod(x.shape[:a0]), math.prod(x.shape[a0:a1]),
                           math.prod(x.shape[a1:]), info=info)
        return plan, {"x": x, "out": e.out}
    return rule


def _softmax(log):
    def rule(e, info):
        x = e.inputs[0]
        _need_f32(e, x)
        plan = plan_softmax(math.prod(x.shape[:-1]), x.shape[-1], log=log, info=info)
        return plan, {"x": x, "y": e.out}
    return rule


def _softmax_bwd(log):
    def rule(e, info):
        y, g = e.inputs
        _need_f32(e, y, g)
        plan = plan_softmax_grad(math.prod(y.shape[:-1]), y.shape[-1], log=log, info=info)
        return plan, {"y": y, "g": g, "dx": e.out}
    return rule


def _take(e, info):
    x, idx = e.inputs
    if x.dtype not in ("i32", "bool"):   # a gather moves 32-bit words: ints and bools too
        _need_f32(e, x)                 # (x[::-1] of ints fell back before; tests/test_fuzz.py)
    ax = e.params["axis"]
    plan = plan_take(math.prod(x.shape[:ax]), x.shape[ax], math.prod(x.shape[ax + 1:]),
                     math.prod(idx.shape), info=info, ints=x.dtype != "f32")
    return plan, {"x": x, "idx": idx, "out": e.out}


def _scatter_add(e, info):
    g, idx = e.inputs
    _need_f32(e, g)
    ax, shape = e.params["axis"], e.params["shape"]
    plan = plan_take_grad(math.prod(shape[:ax]), shape[ax], math.prod(shape[ax + 1:]),
                          math.prod(idx.shape), info=info)
    return plan, {"g": g, "idx": idx, "dx": e.out}


def _flash_attention(backward):
    def rule(e, info):
        _need_f32(e, *e.inputs)
        q, k = e.inputs[0], e.inputs[1]
        b, h, lq, d = q.shape
        kw = dict(causal=e.params["causal"], scale=e.params["scale"], info=info)
        if backward:
            roles = dict(zip(("q", "k", "v", "o", "lse", "do", "dlse"), e.inputs))
            roles.update(zip(("dq", "dk", "dv"), e.outputs))
            return plan_flash_attention_bwd(b * h, lq, k.shape[2], d, **kw), roles
        roles = dict(zip(("q", "k", "v"), e.inputs))
        roles.update(o=e.outputs[0], lse=e.outputs[1])
        return plan_flash_attention(b * h, lq, k.shape[2], d, **kw), roles
    return rule


def _selective_scan(backward):
    def rule(e, info):
        _need_f32(e, *e.inputs)
        p = e.params
        names = scan_operand_names(p["has_D"], p["has_z"], p["has_bias"])
        roles = dict(zip(names, e.inputs))
        batch, dim, L = roles["u"].shape
        kw = dict(variable_B=roles["B"].ndim == 3, variable_C=roles["C"].ndim == 3,
                  has_D=p["has_D"], has_z=p["has_z"], has_bias=p["has_bias"],
                  softplus=p["softplus"], info=info, chunk=p["chunk"])
        N = roles["A"].shape[1]
        if backward:
            roles.update(states=e.inputs[-2], dout=e.inputs[-1])
            roles.update(zip(["d" + n for n in names], e.outputs))
            return plan_selective_scan_bwd(batch, dim, L, N, **kw), roles
        roles.update(out=e.outputs[0], states=e.outputs[1])
        return plan_selective_scan(batch, dim, L, N, **kw), roles
    return rule


kernel_rules = {
    P.matmul_p: _matmul,
    P.reduce_sum_p: _reduction("sum"),
    P.reduce_max_p: _reduction("max"),
    P.reduce_min_p: _reduction("min"),
    P.softmax_p: _softmax(False),
    P.log_softmax_p: _softmax(True),
    P.softmax_bwd_p: _softmax_bwd(False),
    P.log_softmax_bwd_p: _softmax_bwd(True),
    P.take_p: _take,
    P.scatter_add_p: _scatter_add,
    P.flash_attention_p: _flash_attention(False),
    P.flash_attention_bwd_p: _flash_attention(True),
    P.selective_scan_p: _selective_scan(False),
    P.selective_scan_bwd_p: _selective_scan(True),
}


# ----------------------------------------------------------------------------- the plan

@dataclass
class Slot:
    size: int
    dtype: str          # IR dtype name
    kind: str           # "input" | "const" | "output" | "scratch"


@dataclass
class Step:
    """One dispatch: a launch and the slot bound at each of its bindings."""
    launch: Launch
    slots: tuple
    eqn: object                  # the eqn it computes (for profiles)
    reads: tuple                 # slots read
    writes: tuple                # slots written
    in_place_ok: frozenset = frozenset()   # slots read only at the thread's own element


@dataclass
class Lowered:
    program: Program             # the fused program this was lowered from
    steps: list
    slots: list                  # Slot per slot id
    input_slots: list            # per program input
    output_slots: list           # per program output: slot id, or None (a literal)
    const_values: dict = field(default_factory=dict)   # slot id -> ndarray

    def text(self) -> str:
        """The lowered stage, one line per dispatch (what `as_text(stage="lowered")` shows)."""
        lines = [f"lowered {self.program.name}: {len(self.steps)} dispatches, "
                 f"{len(self.slots)} buffers"]
        for i, s in enumerate(self.slots):
            lines.append(f"  b{i}: {s.dtype}[{s.size}] {s.kind}")
        for i, st in enumerate(self.steps):
            g = "x".join(map(str, st.launch.groups))
            lines.append(f"  k{i}: {st.launch.name:<14} ({', '.join(f'b{s}' for s in st.slots)})"
                         f"  groups {g}")
        outs = ", ".join("literal" if s is None else f"b{s}" for s in self.output_slots)
        lines.append(f"  return {outs}")
        return "\n".join(lines) + "\n"


# Buffers one kernel may bind when the device is not known: lavapipe's
# maxPerStageDescriptorStorageBuffers (NVIDIA and AMD allow far more; binding more than the
# device allows crashes the driver rather than failing cleanly).
DEFAULT_MAX_BUFFERS = 32


def split_bindings(body: Program, limit: int) -> list:
    """`body` (a fused kernel's program) as sub-programs that each bind at most `limit` buffers
    (inputs + outputs): outputs are grouped greedily, each group with the eqns and inputs it
    needs (an eqn two groups need is computed by both). An Adam update of many same-shaped
    parameters is one fused group of 7 buffers per parameter, past lavapipe's 32.

    One output can need more buffers than that by itself (a sum of 40 arrays; a global
    gradient norm over 40 parameters is 40 scalars added): where an eqn would read more, its
    computed operands are first written to scratch buffers by sub-programs of their own, run
    before the others, which read them back (found by tests/test_fuzz.py; before, the whole
    program fell back to the interpreter)."""
    if len(body.inputs) + len(body.outputs) <= limit:
        return [body]
    producer = {o: e for e in body.eqns for o in e.outputs}
    order = {e: i for i, e in enumerate(body.eqns)}
    # leaves[v]: the buffers computing v inline would read; cut: the values materialized
    leaves, cut = {v: {v} for v in body.inputs}, []
    for e in body.eqns:
        operands = [x for x in e.inputs if isinstance(x, Var)]
        need = set().union(*(leaves[x] for x in operands))
        if len(need) + 1 > limit:
            for x in operands:
                if leaves[x] != {x}:
                    cut.append(x)
                    leaves[x] = {x}
            need = set().union(*(leaves[x] for x in operands))
        leaves.update((o, need) for o in e.outputs)
    cut.sort(key=lambda v: order[producer[v]])   # producers before readers
    external = set(body.inputs) | set(cut)

    def cone(out):
        eqns, ins, stack = set(), set(), [out]
        while stack:
            v = stack.pop()
            if v in external and not (v is out and v in producer):
                ins.add(v)
            elif v in producer and producer[v] not in eqns:
                eqns.add(producer[v])
                stack += [x for x in producer[v].inputs if isinstance(x, Var)]
        return eqns, ins

    groups = []                           # [(outputs, eqns, inputs)]
    for o in cut:
        groups.append(([o], *cone(o)))
    for o in body.outputs:
        if o in cut:
            continue
        eqns, ins = cone(o) if isinstance(o, Var) else (set(), set())
        if len(ins) + 1 > limit:
            raise Unsupported(f"an elementwise kernel output reads {len(ins)} buffers; the "
                              f"device allows {limit} per kernel")
        if len(groups) > len(cut) and len(groups[-1][2] | ins) + len(groups[-1][0]) + 1 <= limit:
            outs, g_eqns, g_ins = groups[-1]
            groups[-1] = (outs + [o], g_eqns | eqns, g_ins | ins)
        else:
            groups.append(([o], eqns, ins))
    for outs, _, ins in groups[:len(cut)]:
        if len(ins) + 1 > limit:   # one eqn reading that many (a concatenate of 40 arrays)
            raise Unsupported(f"an elementwise kernel output reads {len(ins)} buffers; the "
                              f"device allows {limit} per kernel")
    sources = (*body.inputs, *cut)
    return [Program(f"{body.name}_{i}", tuple(v for v in sources if v in ins), tuple(outs),
                    tuple(sorted(eqns, key=order.__getitem__)))
            for i, (outs, eqns, ins) in enumerate(groups)]


def lower(program: Program, info=None) -> Lowered:
    for v in list(program.inputs) + [o for o in program.outputs if isinstance(o, Var)]:
        if not elementwise.supports(v.dtype):
            raise Unsupported(f"{v.dtype} values (the Vulkan kernels compute in f32, i32, bool)")
    max_buffers = getattr(info, "max_storage_buffers", None) or DEFAULT_MAX_BUFFERS
    alias = {}                   # reshape output -> the value whose buffer it shares
    for e in program.eqns:
        if e.prim is P.reshape_p:
            alias[e.out] = alias.get(e.inputs[0], e.inputs[0])
    root = lambda v: alias.get(v, v)

    slot_of: dict = {}
    slots: list[Slot] = []

    def new_slot(v, kind):
        slots.append(Slot(max(1, math.prod(v.shape)), v.dtype, kind))
        return len(slots) - 1

    input_slots = [new_slot(v, "input") for v in program.inputs]
    slot_of.update(zip(program.inputs, input_slots))
    const_values = {}
    for v, arr in program.consts:
        slot_of[v] = new_slot(v, "const")
        const_values[slot_of[v]] = arr
    exposed = {root(o) for o in program.outputs if isinstance(o, Var)}
    for v in exposed:
        if v not in slot_of:
            slot_of[v] = new_slot(v, "output")

    # Steps, with values not yet given slots named by Var (scratch, planned below).
    raw = []   # (launch, [Var | ("temp", n)], eqn, reads, writes, in_place)
    n_temps = 0
    temp_specs = {}
    for e in program.eqns:
        if e.prim is P.reshape_p:
            continue
        if e.prim is fused_p:
            body = e.params["body"]
            for v in (*body.inputs, *body.outputs, *(o for b in body.eqns for o in b.outputs)):
                if not elementwise.supports(v.dtype):
                    raise Unsupported(f"{v.dtype} values in an elementwise kernel")
            for part in split_bindings(body, max_buffers):
                launch, identity = elementwise.generate(part, f"fused_{len(raw)}")
                ins = [root(x) for x in part.inputs]
                raw.append((launch, ins + list(part.outputs), e, ins, list(part.outputs),
                            {root(x) for x, ok in identity.items() if ok}))
            continue
        rule = kernel_rules.get(e.prim)
        if rule is None:
            raise Unsupported(f"no Vulkan kernel for '{e.prim.name}'")
        plan, roles = rule(e, info)
        for launch, _ in plan.steps:
            if launch.bindings > max_buffers:
                raise Unsupported(f"{launch.name} binds {launch.bindings} buffers; the device "
                                  f"allows {max_buffers} per kernel")
        local = {}
        for t in plan.temps:
            key = ("temp", n_temps)
            n_temps += 1
            temp_specs[key] = Var((t.size,), "f32" if t.dtype == "float32" else "i32")
            local[t.role] = key
        for launch, role_names in plan.steps:
            refs = [root(roles[r]) if r in roles else local[r] for r in role_names]
            ins = [root(x) for x in e.inputs if isinstance(x, Var)]
            outs = list(e.outputs)
            temps = [r for r in refs if isinstance(r, tuple)]
            raw.append((launch, refs, e, ins + temps, outs + temps, set()))

    # Liveness of scratch values: first and last step touching them.
    first, last = {}, {}
    for i, (_, refs, *_rest) in enumerate(raw):
        for r in refs:
            first.setdefault(r, i)
            last[r] = i
    free: dict = {}
    release_at: dict = {}
    for i, (_, refs, *_rest) in enumerate(raw):
        for r in refs:
            if r in slot_of or first[r] != i:
                continue
            v = temp_specs.get(r, r)
            key = (max(1, math.prod(v.shape)), v.dtype)
            if free.get(key):
                slot_of[r] = free[key].pop()
            else:
                slot_of[r] = new_slot(v, "scratch")
            release_at.setdefault(last[r], []).append((key, slot_of[r]))
        for key, s in release_at.pop(i, []):
            free.setdefault(key, []).append(s)

    steps = []
    for launch, refs, e, reads, writes, in_place in raw:
        steps.append(Step(launch, tuple(slot_of[r] for r in refs), e,
                          tuple(slot_of[r] for r in reads), tuple(slot_of[r] for r in writes),
                          frozenset(slot_of[r] for r in in_place)))
    output_slots = [None if isinstance(o, Literal) else slot_of[root(o)] for o in program.outputs]
    return Lowered(program, steps, slots, input_slots, output_slots, const_values)
