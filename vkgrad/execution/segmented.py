"""A jitted program holding while loops, collectives or debug callbacks at its top level, on
Vulkan: the eqns between them run as compiled programs.

Each while loop runs as a host loop over ONE compiled program, its chunk: CHUNK iterations and
the predicate after them (primitives/control_flow.py, while_chunk). A chunk is a scan of masked
iterations (the body's result kept only while the predicate holds), replayed on the device in
one submission like any scan; the host reads the predicate back after each and stops when it is
false. So a loop of n iterations is max(1, ceil(n / CHUNK)) submissions, against 2n when the
host read the predicate after every iteration (its cond and body each a submission), at the
price of up to CHUNK - 1 masked iterations after the end (a Vulkan kernel cannot skip the
dispatches after it). The carries stay on the device between chunks; a small one comes back to
the host with the predicate. CHUNK = 1 is one round trip an iteration. bench/bench_while.py
measures the choice (docs/compiler.md, "Loops and conditionals", has the numbers).

Each collective (a psum over an MPI world of two or more: vkgrad/distributed.py; over one
member the optimizer has removed it) runs on the host: its operands read back, reduced on the
collectives thread while the next program runs, its results uploaded by the first program
that reads them (a large one split into buckets, DDP's: `_bucketed`). A debug callback
(vg.debug.print) or a pure callback (vg.pure_callback) is a host step the same way: its operands
read back, the callback called on the collectives thread, in program order, all done before the
call returns; a pure callback's results are uploaded by the first part that reads them.

Donated arguments (donate_argnums) are donated to the part that reads them last, which may
write its results over them as one jitted program does: the optimizer's part of a
data-parallel step updates the parameters and its state in place (`_segment`;
docs/distributed.md has the measured bytes).

A while loop in a scan body or a cond branch (through nested scans and conds) is bounded
(`bounded`): NESTED_BOUND masked iterations (a step), and a flag, one more output of the
program, saying whether every such loop was done after them (a cond's flag is its taken
branch's, so a loop in a branch not taken, which runs masked on the device too, cuts nothing).
Inside a submission nothing reads a predicate and no bound on the trip count is known, so the
host reads the flag after the call, and where a loop was cut short the call runs again with 4
times as many iterations (a new compile, kept for later calls). A while loop in another while
loop's body is not split: a program holding one still runs on the interpreter, counted
(vg.fallbacks()).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import time

import numpy as np

from vkgrad.dtypes import np_dtype
from vkgrad.ir.core import Literal, Program, Var
from vkgrad.ir.interpreter import apply as interpret
from vkgrad.pipeline import run_stages
from vkgrad.primitives.collective import REDUCERS
from vkgrad.primitives.control_flow import (cond, cond_p, scan, scan_p, trace_closed,
                                            while_chunk, while_p)
from vkgrad.primitives.lax import convert, maximum, reduce_max
from vkgrad.primitives.debug import HOST_CALLBACKS
from vkgrad.runtime.inflight import HostResult
from vkgrad.runtime.pool import Owned
from vkgrad.runtime.runners import VulkanRunner
from vkgrad.tracer.array import Array
from vkgrad.tracer.core import bind_eqn, eval_program

# iterations a submission: on lavapipe (bench/bench_while.py) 16 runs 1000 iterations 1.4x as
# fast as a round trip an iteration did and 10 as fast (within its noise), where 64 runs 10
# iterations at a quarter of the speed; docs/compiler.md, "Loops and conditionals", has the table
CHUNK = 16
# A while loop in a scan body first runs as this many masked iterations per step, 4 times as
# many after a call where that was not enough (the call then runs again)
NESTED_BOUND = 16


def splits(program: Program) -> bool:
    """Whether the program holds a while loop, a collective or a debug callback at its top
    level, or a while loop in a scan body or a cond branch (this runner's cases)."""
    return any(_splits_at(e) for e in program.eqns) or nests_while(program)


def nests_while(program: Program) -> bool:
    """Whether a while loop sits in a scan body or a cond branch of the program (through
    nested scans and conds)."""
    return any(_nests_while(e) for e in program.eqns)


def _nests_while(e) -> bool:
    """Whether e is a scan or a cond with a while loop in its body or a branch."""
    subs = ((e.params["jaxpr"],) if e.prim is scan_p else
            e.params["branches"] if e.prim is cond_p else ())
    return any(_holds_while(b) for b in subs)


def _holds_while(body: Program) -> bool:
    return any(e.prim is while_p or _nests_while(e) for e in body.eqns)


def bounded(program: Program, k: int) -> Program:
    """The program with each while loop in a scan body or a cond branch (through nested scans
    and conds) run as k masked iterations (while_chunk: a scan on the device like any other), and one more output, an
    f32[] that is 1 where some such loop was not done after its k (its predicate still true
    after them) and 0 where the results are exact (f32: the reduction kernel's type)."""
    return _bounded_program(program, k, nested=False)


def _bounded_program(program: Program, k: int, nested: bool = True) -> Program:
    """program bounded as _eval_bounded does, its flag its last output (0 where it has none)."""
    def fun(*args):
        outs, cut = _eval_bounded(program, args, k, nested)
        return outs + [convert(0, "f32") if cut is None else cut]
    return trace_closed(fun, [v.type for v in program.inputs], program.name)[0]


def _eval_bounded(program: Program, args, k: int, nested: bool = True):
    """program's eqns bound into the current trace, the while loops in its scan bodies and
    cond branches (and in it, where it is one: `nested`) as k masked iterations: (outputs, f32[] whether one was not
    done after them, or None: none here). A top-level while stays one (run by chunks)."""
    env = dict(zip(program.inputs, args))
    env.update(program.consts)
    read = lambda x: x.array() if isinstance(x, Literal) else env[x]
    cut = None
    for e in program.eqns:
        ins, c = [read(x) for x in e.inputs], None
        if e.prim is while_p and nested:
            *outs, more = eval_program(while_chunk(e, k), ins)
            c = convert(more, "f32")
        elif e.prim is scan_p and _nests_while(e):
            outs, c = _bounded_scan(e, ins, k)
        elif _nests_while(e):    # a cond: each branch bounded, its flag one more output
            *outs, c = cond(ins[0], [_bounded_program(b, k) for b in e.params["branches"]],
                            ins[1:])
        else:
            outs = bind_eqn(e.prim, ins, e.params, source=e.source, phase=e.phase, of=e.of)
            outs = outs if e.prim.multiple_results else [outs]
        env.update(zip(e.outputs, outs))
        if c is not None:
            cut = c if cut is None else maximum(cut, c)
    return [read(o) for o in program.outputs], cut


def _bounded_scan(e, ins, k: int):
    """A scan whose body holds a while loop: the body bounded, its cut flag one more stacked
    output, reduced over the steps."""
    p = e.params
    body, nc, nk = p["jaxpr"], p["num_consts"], p["num_carry"]

    carry, ys = scan(_bounded_program(body, k), ins[:nc], ins[nc:nc + nk], ins[nc + nk:],
                     p["length"],
                     p["reverse"], p["unroll"])
    return carry + ys[:-1], reduce_max(ys[-1], (0,)) if p["length"] else None


def _splits_at(e) -> bool:
    return e.prim is while_p or e.prim in HOST_CALLBACKS or e.prim in REDUCERS


class SegmentedRunner:
    lowered = None      # no one plan: vg.profile and vg.check_kernels say so

    def __init__(self, device, program: Program, options):
        self.device = device
        # the whole program's donated inputs; each part is compiled with the inputs it reads
        # last donated (`_compile_parts`). None where a call may run again (a nested while
        # cut short): its inputs must survive the first run
        self.donated = None if nests_while(program) else \
            {program.inputs[i] for i in options.donated}
        self.options = dataclasses.replace(options, donated=frozenset())
        self.compile_times: dict = {}
        self.host_seconds = 0.0     # spent in host steps: operands read back, reduced (bench)
        # while loops in scan bodies: `bound` masked iterations each, and the program's last
        # output says whether that was enough (else `run` runs it again with 4 times as many)
        self.source, self.bound = program, NESTED_BOUND if nests_while(program) else None
        self.reruns = 0             # calls run again with a larger bound
        self._compile_parts(program if self.bound is None else bounded(program, self.bound))

    def _compile_parts(self, program: Program) -> None:
        """The steps of the program: its parts between while loops and host steps compiled,
        each part with the inputs it is the last to read donated (_segment)."""
        options = self.options
        self.program = program
        self.consts = dict(program.consts)      # Var -> the array traced in
        # ("run", runner, inputs, outputs, donated inputs, values read after it) |
        # ("while", eqn, chunk) | ("host", eqn)
        self.steps = []
        eqns = _bucketed(program.eqns)
        program = dataclasses.replace(program, eqns=tuple(eqns))
        needed = _needed_after(program)
        run: list = []
        for i, e in enumerate(eqns):
            if not _splits_at(e):
                run.append(e)
                continue
            self._segment(run, needed[i - 1] if i else set(), options)
            run = []
            self.steps.append(("host", e) if e.prim is not while_p else
                              ("while", e, self._runner(while_chunk(e, CHUNK), options)))
        self._segment(run, needed[len(eqns) - 1], options)

    def _runner(self, program: Program, options) -> VulkanRunner:
        stages: dict = {}
        run_stages(program, "plan", options, stages, self.compile_times)
        return VulkanRunner(self.device, stages["plan"])

    def _segment(self, eqns, live: set, options) -> None:
        """eqns as one compiled part (`live`: the values read after it). The whole program's
        donated arguments that no later step reads are donated to it: the part may write its
        results over them, as one jitted program writes over its donated arguments
        (vkgrad/lowering/donation.py): the optimizer's part writes the parameters and its
        state in place, so a step holds one copy of them, not two."""
        if not eqns:
            return
        defined = {o for e in eqns for o in e.outputs}
        inputs, consts = [], {}
        for e in eqns:
            for x in e.inputs:
                if not isinstance(x, Var) or x in defined or x in inputs:
                    continue
                if x in self.consts:
                    consts[x] = self.consts[x]
                else:
                    inputs.append(x)
        outputs = [v for e in eqns for v in e.outputs if v in live]
        # the donated arguments first: the donation plan gives each donated input, in order,
        # the first result of its size, so the parameters' results take the parameters' own
        # buffers (as in one program), and the next call binds the same buffers
        if self.donated:
            inputs.sort(key=lambda x: x not in self.donated)
        donors = () if self.donated is None else tuple(
            j for j, x in enumerate(inputs) if x in self.donated and x not in live)
        sub = Program(f"{self.program.name}_{len(self.steps)}", tuple(inputs), tuple(outputs),
                      tuple(eqns), consts=tuple(consts.items()))
        options = dataclasses.replace(options, donated=frozenset(donors))
        self.steps.append(("run", self._runner(sub, options), inputs, outputs, donors, live))

    def run(self, inputs, *, donate=True, timestamps=False) -> list:
        outs = self._run(inputs, donate)
        if self.bound is None:
            return outs
        while float(_host(outs[-1], self.program.outputs[-1].type)):   # a while was cut short
            self.bound *= 4
            self.reruns += 1
            for step in self.steps:   # the parts' recorded sequences, freed now, not by the GC
                if step[0] != "host":
                    step[-1 if step[0] == "while" else 1].release()
            self._compile_parts(bounded(self.source, self.bound))
            outs = self._run(inputs, donate)
        return outs[:-1]

    def _run(self, inputs, donate) -> list:
        env = dict(self.consts)
        env.update(zip(self.program.inputs, inputs))
        jobs = []

        def value(x):
            if isinstance(x, Literal):
                return x.value
            v = env[x]
            if isinstance(v, _Reducing):   # a collective's result: wait for its all-reduce
                t0 = time.perf_counter()
                v = env[x] = v.result()
                self.host_seconds += time.perf_counter() - t0
            return v

        for step in self.steps:
            if step[0] == "run":
                _, runner, ins, outs, donors, later = step
                args = [value(v) for v in ins]
                give = donate and bool(donors) and _may_overwrite(env, later, args, donors)
                env.update(zip(outs, _device_values(runner.run(args, donate=give))))
                continue
            if step[0] == "host":    # read back now; reduce on the host while the GPU goes on
                e, t0 = step[1], time.perf_counter()
                ins = self._read_back([value(x) for x in e.inputs], [x.type for x in e.inputs])
                job = _COLLECTIVES.submit(interpret, e.prim, ins, e.params,
                                          [o.type for o in e.outputs])
                env.update((o, _Reducing(job, j)) for j, o in enumerate(e.outputs))
                jobs.append(job)
                self.host_seconds += time.perf_counter() - t0
                continue
            _, e, chunk = step
            args = [value(x) for x in e.inputs]
            n = len(args) - len(e.outputs)
            consts, carry = args[:n], args[n:]
            pred_type = e.params["cond_jaxpr"].outputs[0].type
            while True:
                *carry, pred = _device_values(chunk.run(consts + carry, donate=False))
                if not bool(_host(pred, pred_type)):
                    break
            env.update(zip(e.outputs, carry))
        outs = [value(o) for o in self.program.outputs]
        # the parts' buffers back to the pool, last made first: the pool (last in, first out)
        # then hands the next call's parts the same buffers in the same order, and their
        # recorded sequences replay as they are (given in another order, a part records
        # again and copies its results through slots from then on: runtime/runners.py)
        for x in reversed(list(env)):
            del env[x]
        for job in jobs:   # every collective done before the caller's next MPI call
            job.result()
        return outs

    def _read_back(self, values, types) -> list:
        """The values as numpy arrays of their types, the device buffers among them read in ONE
        transfer submission (a step's gradients are dozens of buffers: one each would be a
        submission each)."""
        owned = [v for v in values if isinstance(v, Owned)]
        for o in owned:
            o.wait()
        if owned:
            self.device.submit([("download", [o.buffer for o in owned])])
        return [np.asarray(v.buffer.read_staging()[:t.size]).reshape(t.shape)
                if isinstance(v, Owned) else _host(v, t) for v, t in zip(values, types)]


# One thread runs every collective, in program order (so in the same order on every rank, as
# MPI needs), while the calling thread submits the programs after it.
_COLLECTIVES = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="vkgrad-collectives")

# A collective over many operands is split into buckets of about this many bytes, in the order
# the program computes them (DDP's default bucket_cap_mb, 25 MB): a bucket's all-reduce then
# runs while the program computes the next buckets.
BUCKET_BYTES = 25 << 20


class _Reducing:
    """Result j of a collective running on _COLLECTIVES."""
    __slots__ = ("job", "j")

    def __init__(self, job, j):
        self.job, self.j = job, j

    def result(self):
        return self.job.result()[self.j]


def _bucketed(eqns) -> list:
    """The eqns with each collective over more than BUCKET_BYTES of operands split into
    buckets, in the order their operands are computed, each bucket placed right after the eqn
    that computes its last operand (its results are read only where the whole one's were)."""
    made = {o: i for i, e in enumerate(eqns) for o in e.outputs}
    placed = []     # (position, eqn): an eqn's own index; a bucket's just after its producer
    for i, e in enumerate(eqns):
        if e.prim not in REDUCERS:
            placed.append((i, e))
            continue
        at = [made.get(x, -1) if isinstance(x, Var) else -1 for x in e.inputs]
        buckets, size = [[]], 0
        for j in sorted(range(len(e.inputs)), key=at.__getitem__):
            if size >= BUCKET_BYTES:
                buckets, size = buckets + [[]], 0
            buckets[-1].append(j)
            x = e.inputs[j]
            size += math.prod(x.shape) * np.dtype(np_dtype(x.dtype)).itemsize
        for b in buckets:
            last = max(at[j] for j in b)
            placed.append((last + 0.5, e.replace(inputs=tuple(e.inputs[j] for j in b),
                                                  outputs=tuple(e.outputs[j] for j in b))))
    return [e for _, e in sorted(placed, key=lambda pe: pe[0])]


def _may_overwrite(env, later, args, donors) -> bool:
    """Whether a part may write over its donated arguments' buffers this call: no value a
    later step reads (`later`) holds one of them (two values may share a buffer: an argument
    passed twice, a result that is an argument), nor any Array but the donated one (`users`).
    The part's runner checks the rest (the same buffer twice among its own arguments)."""
    owned = [args[j] for j in donors if type(args[j]) is Owned]
    if not owned:
        return True
    live = {id(env[x]) for x in later if type(env.get(x)) is Owned}
    return all(o.users <= 1 and id(o) not in live for o in owned)


def _device_values(outs) -> list:
    """Results as the next program's inputs: a small result read back with its submission
    (HostResult) as its numpy value."""
    return [o.result() if isinstance(o, HostResult) else o for o in outs]


def _host(x, type_):
    """x as a numpy array of type_'s shape and dtype (a small result comes back flat; an input
    may be a Python scalar)."""
    if isinstance(x, HostResult):
        x = x.result()
    if isinstance(x, np.ndarray) or np.isscalar(x):
        return np.asarray(x, np_dtype(type_.dtype)).reshape(type_.shape)
    return np.asarray(Array(type_, x))     # a device buffer: read it


def _needed_after(program: Program) -> list:
    """For each eqn index i, the values read after eqn i (by later eqns or as outputs)."""
    live = {o for o in program.outputs if isinstance(o, Var)}
    out = [set() for _ in program.eqns]
    for i in range(len(program.eqns) - 1, -1, -1):
        out[i] = set(live)
        live |= {x for x in program.eqns[i].inputs if isinstance(x, Var)}
    return out
