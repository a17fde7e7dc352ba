"""Fused Program -> Lowered: the kernels to dispatch, in order, and the buffers they use.

Each `fused` loop or horizontal eqn becomes one generated kernel (lowering/elementwise.py);
every other eqn goes through its kernel family's contract (`CONTRACTS[prim]`, contracts.py),
whose planner (matmul.py, kernels.py, attention.py, scan.py, sort.py) gives the dispatches and
says which of its values play which role. A fused kernel eqn (kind input/output/multi_output) is its anchor's kernel with
generated loads and stores (lowering/hooks.py). A standalone `reshape` or `save` is an alias: a
second name for its operand's buffer (the layout is row-major, so it is exact).

Memory (lowering/memory.py): every materialized value gets a buffer *slot*. Inputs, consts and
what the program returns (through aliases) get their own slots; intermediates and kernel
temporaries share scratch slots by liveness (first write .. last read, in dispatch order), in
place where a kernel reads a dying value only at the element it writes.

A program the kernels cannot run raises `Unsupported(reason)`; the jit then runs the WHOLE
program on the numpy interpreter (never op by op) and counts the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import dataclasses

from vkgrad.ir.core import Literal, Program, Var
from vkgrad.primitives.compiler import fused_p
from vkgrad.lowering import elementwise, limits, loops, row_kernel
# CONTRACTS holds every family: the package imports each family's module (__init__.py)
from vkgrad.lowering.contracts import CONTRACTS, Concat, Each, Members, Unsupported  # noqa: F401
from vkgrad.lowering.hooks import HookWriter, splice
from vkgrad.lowering.launch import Launch
from vkgrad.lowering.memory import Slot, plan_memory, value_bytes  # noqa: F401  (Slot: a plan's)
from vkgrad.lowering.render import KERNELS_DIR, plan_text
from vkgrad.passes.fused_program import VIEWS



# ----------------------------------------------------------------------------- the plan

@dataclass
class Step:
    """One dispatch: a launch and the slot bound at each of its bindings."""
    launch: Launch
    slots: tuple
    eqn: object                  # the eqn it computes (for profiles)
    reads: tuple                 # slots read
    writes: tuple                # slots written
    # (input slot, output slot): the output may be written over the input, which the thread
    # reads only at its own element and before that output's store depends on it
    in_place_ok: frozenset = frozenset()
    index: int = 0               # its place in the memory plan's order (before any reordering)

    @property
    def phase(self) -> str:
        return self.eqn.phase


@dataclass
class Lowered:
    program: Program             # the fused program this was lowered from
    steps: list
    slots: list                  # Slot per slot id
    input_slots: list            # per program input
    output_slots: list           # per program output: slot id, or None (a literal)
    const_values: dict = field(default_factory=dict)   # slot id -> ndarray
    saved: tuple = ()            # (slot, Var, source): forward values the backward reads
    # output slot -> the donated input (by index) whose buffer it is written over: the
    # donation plan (lowering/donation.py), made by the pipeline's plan stage
    donation: dict = field(default_factory=dict)
    # output slots that replace a donated argument whose buffer they could not take (the
    # donation plan's pairing): results kept on the device however small
    carried: frozenset = frozenset()
    # (first, end, trip count): steps[first:end] are a loop body (lowering/loops.py), recorded
    # trip count times in a row into the call's one submission; nested loops nest their ranges
    loops: tuple = ()

    def memory(self) -> dict:
        """Device bytes of one call: arguments, outputs (those not written over a donated
        argument), consts, scratch, and their sum, `peak` (every buffer of a call exists for
        all of it)."""
        donation = self.donation
        out = {"arguments": 0, "outputs": 0, "consts": 0, "scratch": 0}
        key = {"input": "arguments", "output": "outputs", "const": "consts", "scratch": "scratch"}
        for i, s in enumerate(self.slots):
            if s.kind == "output" and i in donation:
                continue
            out[key[s.kind]] += s.nbytes
        out["peak"] = sum(out.values())
        return out

    def saved_bytes(self) -> int:
        """Bytes of the forward values the backward reads from memory."""
        return sum(value_bytes(v) for _, v, _ in self.saved)

    def text(self) -> str:
        """The plan stage (what `as_text(stage="plan")` shows; lowering/render.py)."""
        return plan_text(self)

    def _repr_markdown_(self) -> str:
        return f"```\n{self.text()}```\n"


_UNUSED = ("unused",)   # a hooked binding: bound to some other buffer, never accessed


class _Builder:
    """Collects the dispatches of a program; values not yet given slots are named by Var, and
    kernel temporaries by ("temp", n) keys with their Var-like spec in `temps`."""

    def __init__(self, target, root):
        self.target, self.root = target, root
        self.raw = []      # (launch, refs, eqn, reads, writes, in_place)
        self.temps = {}
        self.loops = []    # (first, end, trip count): raw[first:end] runs trip count times

    def temp_refs(self, plan) -> dict:
        local = {}
        for t in plan.temps:
            key = ("temp", len(self.temps))
            self.temps[key] = Var((t.size,), "f32" if t.dtype == "float32" else "i32")
            local[t.role] = key
        return local

    def add(self, launch, refs, e, reads, writes, in_place=()):
        cap = elementwise.max_bindings(self.target)
        if launch.bindings > cap:      # binding more than the device allows crashes a driver
            raise Unsupported(f"{launch.name} binds {launch.bindings} buffers; the device "
                              f"allows {cap} per kernel")
        real = [r for r in refs if r is not _UNUSED]
        # an unused binding (a hooked one: its shader may still declare it written) gets a
        # buffer this dispatch writes anyway, so it adds no hazard (runtime/hazards.py): an
        # operand there made a matmul with a store hook "write" its input, and every later
        # reader of that input of a loop step waited on a barrier for it
        wrote = set(writes)
        fill = next((r for r in real if r in wrote), real[0] if real else None)
        refs = [fill if r is _UNUSED else r for r in refs]
        if any(r is None for r in refs):
            raise Unsupported(f"{e.prim.name}: a fused kernel with no buffer to bind")
        self.raw.append((launch, refs, e, list(dict.fromkeys(reads)),
                         list(dict.fromkeys(writes)), set(in_place)))

    def loop(self, e):
        body = e.params["body"]
        for v in (*body.inputs, *body.outputs, *(o for b in body.eqns for o in b.outputs)):
            if not elementwise.supports(v.dtype):
                raise Unsupported(f"{v.dtype} values in an elementwise kernel")
        # more buffers than a kernel may bind: a dispatch per part (in order: a part may read
        # an intermediate an earlier one wrote)
        for part in self._bindings_split(body):
            try:
                generated = elementwise.generate(part, f"fused_{len(self.raw)}",
                                                 budget=elementwise.MAX_TEMPS)
            except elementwise.KernelTooLarge:        # too big to compile: cut it
                for piece in elementwise.split_size(part):
                    for p in self._bindings_split(piece):
                        self._loop_part(e, p, elementwise.generate(p, f"fused_{len(self.raw)}"))
                continue
            self._loop_part(e, part, generated)

    def _bindings_split(self, body):
        try:
            return elementwise.split_bindings(body, elementwise.max_bindings(self.target))
        except ValueError as err:
            raise Unsupported(f"an elementwise kernel: {err}") from None

    def _loop_part(self, e, part, generated):
        """One dispatch of loop kernel e's body, or of a part of it."""
        launch, identity = generated
        ins = [self.root(x) for x in part.inputs]
        pe = e if part is e.params["body"] else e.replace(
            inputs=part.inputs, outputs=part.outputs, params=e.params.replace(body=part))
        self.add(launch, ins + list(part.outputs), pe, ins, list(part.outputs),
                 {(self.root(x), o) for o, xs in _inputs_of_outputs(part).items()
                  for x in xs if identity.get(x)})

    def row(self, e):
        """A row kernel (lowering/row_kernel.py): one dispatch, bindings inputs then outputs."""
        body = e.params["body"]
        ins = [self.root(x) for x in body.inputs]
        self.add(row_kernel.launch(e, self.target, f"row_{len(self.raw)}"),
                 ins + list(body.outputs), e, ins, list(body.outputs))

    def eqn(self, e):
        """The dispatches of one eqn (a view has none: it is its operand's buffer)."""
        if e.prim in VIEWS:
            return
        k = e.params.get("kind", "loop") if e.prim is fused_p else None
        try:
            if k in ("loop", "horizontal"):
                self.loop(e)
            elif k == "row":
                self.row(e)
            elif k is not None:
                self.fused_kernel(e)
            elif loops.lowers(e):
                loops.ScanLowering(self, e).lower()
            else:
                self.kernel(e)
        except Unsupported as u:
            u.eqn = u.eqn or e
            raise

    def kernel(self, e):
        contract = CONTRACTS.get(e.prim)
        if contract is None:
            raise Unsupported(f"no Vulkan kernel for '{e.prim.name}'")
        plan, roles = contract.plan(e, self.target)
        local = self.temp_refs(plan)
        ins = {x for x in e.inputs if isinstance(x, Var)}
        for launch, role_names in plan.steps:
            refs = [self.root(roles[r]) if r in roles else local[r] for r in role_names]
            temps = [r for r in refs if isinstance(r, tuple)]
            reads = [self.root(roles[r]) for r in role_names if r in roles and roles[r] in ins]
            writes = [roles[r] for r in role_names if r in roles and roles[r] in e.outputs]
            self.add(launch, refs, e, reads + temps, writes + temps)

    def fused_kernel(self, e):
        """A hand-written kernel with fused loads and stores (lowering/hooks.py)."""
        try:
            self._fused_kernel(e)
        except ValueError as err:      # an access pattern the hooks cannot generate
            raise Unsupported(f"fused {e.params.get('kind')} kernel: {err}") from None

    def _fused_kernel(self, e):
        body = e.params["body"]
        anc = [b for b in body.eqns if not b.prim.fusible]
        planned = None
        for contract in dict.fromkeys(CONTRACTS[a.prim] for a in anc if a.prim in CONTRACTS):
            planned = contract.group(anc, self.target, self.root, body)
            if planned is not None:
                break
        if planned is None:
            raise Unsupported("a fused kernel of " + ", ".join(a.prim.name for a in anc))
        plan, roles = planned
        for v in (*body.inputs, *body.outputs, *(o for b in body.eqns for o in b.outputs)):
            if not elementwise.supports(v.dtype):
                raise Unsupported(f"{v.dtype} values in a fused kernel")
        results = [o for a in anc for o in a.outputs]
        computed = {o for b in body.eqns for o in b.outputs}
        epilogue = _epilogue_outputs(body, results)
        readers = {x for b in body.eqns if b not in anc for x in b.inputs}
        local = self.temp_refs(plan)
        source = None
        for launch, role_names in plan.steps:
            hw = HookWriter(body, len(role_names))
            refs, reads, writes = [], [], []
            for i, r in enumerate(role_names):
                if r not in roles:
                    refs.append(local[r])
                    reads.append(local[r])
                    writes.append(local[r])
                    continue
                v = roles[r]
                if isinstance(v, Each):
                    if v[0] in results:
                        hw.store_many(i, v, [([y] if y in body.outputs else []) + epilogue[y]
                                             for y in v])
                    elif isinstance(v, Members):
                        hw.load_each(i, v)
                    else:
                        hw.load_many(i, v)
                    refs.append(_UNUSED)
                elif isinstance(v, Concat) or v in results:
                    vs = v if isinstance(v, Concat) else (v,)
                    if isinstance(v, Concat) or v not in body.outputs or epilogue[v] or \
                            v in readers:
                        parts, off = [], 0
                        for y in vs:
                            parts.append((y, off, ([y] if y in body.outputs else []) + epilogue[y]))
                            off += math.prod(y.shape)
                        hw.store(i, parts)
                        refs.append(_UNUSED)
                    else:
                        refs.append(v)
                        writes.append(v)
                elif v in computed and v in body.outputs:
                    # a view of a result that the kernel writes itself, in that view's place
                    # (lowering/attention_layouts.py: flash attention's o as [B, L, H, D])
                    refs.append(v)
                    writes.append(v)
                elif v in computed:
                    hw.load(i, v)
                    refs.append(_UNUSED)
                else:
                    refs.append(self.root(v))
                    reads.append(self.root(v))
            if hw:
                if source is None:
                    source = (KERNELS_DIR / launch.shader).read_text()
                hooks = launch.hooks + hw.text()     # the planner's own generated part first
                launch = dataclasses.replace(launch, shader=splice(source, hooks), hooks=hooks,
                                             base=launch.shader,
                                             bindings=len(role_names) + len(hw.extra))
                refs += [self.root(x) for x in hw.extra]
                reads += [self.root(x) for x in hw.extra if x not in hw.written]
                writes += list(hw.written)
            # in place only over what nothing but the store hook reads (never a kernel operand)
            plain = {r for r in refs[:len(role_names)] if r is not _UNUSED}
            inputs = {self.root(x) for x in hw.in_place_inputs()} - plain if hw else set()
            self.add(launch, refs, e, reads, writes, {(x, o) for x in inputs for o in writes})


def _inputs_of_outputs(body) -> dict:
    """{body output: the body inputs its value reads}. An output may be written over an input
    only where its own value reads it: on the H200 an output that did not (an iota) took the
    buffer of an input another output read, and the driver's compiler moved that read after
    the store (the two are separate bindings, one readonly): a wrong permutation, right on
    lavapipe (bench/perm_check.py)."""
    producer = {o: e for e in body.eqns for o in e.outputs}
    inputs = set(body.inputs)
    reads: dict = {}
    for e in body.eqns:   # in order: an eqn's operands are done before it
        got = set()
        for x in e.inputs:
            if x in inputs:
                got.add(x)
            elif x in producer:
                got |= reads.get(x, set())
        for o in e.outputs:
            reads[o] = got
    return {o: (reads.get(o, set()) | ({o} & inputs)) for o in body.outputs}


def _epilogue_outputs(body, results) -> dict:
    """{kernel result: the body outputs its store computes}: each output that is not a result
    goes with the result it is computed from (or, computed from none, with the first result of
    its size: the loss scaling next to a count update)."""
    producer = {o: b for b in body.eqns for o in b.outputs}
    out = {y: [] for y in results}

    def depends(v, seen):
        """The first result v is computed from, depth first (an explicit stack: an epilogue
        of 1,500 chained ops recursed past Python's 1,000 frames)."""
        todo = [v]
        while todo:
            v = todo.pop()
            if v in results:
                return v
            b = producer.get(v)
            if b is None or v in seen:
                continue
            seen.add(v)
            todo.extend(x for x in reversed(b.inputs) if isinstance(x, Var))
        return None

    for o in body.outputs:
        if o in results:
            continue
        y = depends(o, set())
        if y is None:
            y = next((r for r in results if math.prod(r.shape) == math.prod(o.shape)), None)
        if y is None:
            raise Unsupported(f"a fused output {o.type} that no kernel result stores")
        out[y].append(o)
    return out


def lower(program: Program, target=None, *, reuse: bool = True) -> Lowered:
    """The plan of `program` (a fused program); `reuse=False` gives every value its own buffer
    (VKGRAD_DISABLE_PASSES=memory)."""
    for v in list(program.inputs) + [o for o in program.outputs if isinstance(o, Var)]:
        if not elementwise.supports(v.dtype):
            raise Unsupported(f"{v.dtype} values (the Vulkan kernels compute in f32, i32, bool)")
    alias = {}                   # reshape/save output -> the value whose buffer it shares
    for e in _all_eqns(program):
        if e.prim in VIEWS:
            alias[e.out] = alias.get(e.inputs[0], e.inputs[0])
        elif loops.lowers(e):    # a scan's consts: its body reads the operands' own buffers
            nc = e.params["num_consts"]
            for v, x in zip(e.params["jaxpr"].inputs[:nc], e.inputs[:nc]):
                if isinstance(x, Var):
                    alias[v] = alias.get(x, x)
    root = lambda v: alias.get(v, v)
    # a loop body's consts are the program's: buffers for the whole call
    program_consts = [c for e in _all_eqns(program) if loops.lowers(e)
                      for c in e.params["jaxpr"].consts]
    memory_program = program.replace(consts=program.consts + tuple(program_consts))

    b = _Builder(target, root)
    for e in program.eqns:
        b.eqn(e)

    limits.check_plan(program, b.raw, b.temps, target)   # before any buffer exists
    exposed = [root(o) for o in program.outputs if isinstance(o, Var)]
    slots, slot_of = plan_memory(memory_program, b.raw, b.temps, exposed, reuse=reuse)
    steps = []
    for i, (launch, refs, e, reads, writes, in_place) in enumerate(b.raw):
        steps.append(Step(launch, tuple(slot_of[r] for r in refs), e,
                          tuple(slot_of[r] for r in reads), tuple(slot_of[r] for r in writes),
                          frozenset((slot_of[x], slot_of[o]) for x, o in in_place), i))
    input_slots = [slot_of[v] for v in program.inputs]
    output_slots = [None if isinstance(o, Literal) else slot_of[root(o)] for o in program.outputs]
    const_values = {slot_of[v]: arr for v, arr in memory_program.consts}
    saved = tuple((slot_of[v], v, src) for v, src in saved_values(program, root)
                  if v in slot_of)
    lowered = Lowered(program, steps, slots, input_slots, output_slots, const_values, saved,
                      loops=tuple(b.loops))
    limits.check_memory(lowered, target)                  # before any buffer exists
    return lowered


def _all_eqns(program: Program):
    """The program's eqns and, inside each scan, its body's, depth first."""
    for e in program.eqns:
        yield e
        if loops.lowers(e):
            yield from _all_eqns(e.params["jaxpr"])


def saved_values(program: Program, root) -> list:
    """(value, source line) of each forward value a backward computation reads from memory:
    what crosses from the forward to the backward of a training step."""
    phase, source = {}, {}
    for e in program.eqns:
        if e.prim in VIEWS:
            continue
        body = e.params["body"] if e.prim is fused_p else None
        inner = {o: b for b in body.eqns for o in b.outputs} if body is not None else {}
        for o in e.outputs:
            b = inner.get(o, e)
            phase[o], source[o] = b.phase, b.source
    out = {}
    for e in program.eqns:
        if e.prim in VIEWS:
            continue
        users = e.params["body"].eqns if e.prim is fused_p else (e,)
        top = {x for x in e.inputs if isinstance(x, Var)}
        for b in users:
            if b.phase != "bwd":
                continue
            for x in b.inputs:
                if isinstance(x, Var) and x in top and phase.get(root(x)) == "fwd":
                    out.setdefault(root(x), source.get(root(x)))
    return list(out.items())
