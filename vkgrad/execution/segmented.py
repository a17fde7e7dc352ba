"""A jitted program holding while loops at its top level, on Vulkan: the eqns between loops run
as compiled programs, and each while loop as a host loop over ONE compiled program, its chunk:
CHUNK iterations and the predicate after them (primitives/control_flow.py, while_chunk). A
chunk is a scan of masked iterations (the body's result kept only while the predicate holds),
replayed on the device in one submission like any scan; the host reads the predicate back
after each and stops when it is false. So a loop of n iterations is max(1, ceil(n / CHUNK))
submissions, against 2n when the host read the predicate after every iteration (its cond and
body each a submission), at the price of up to CHUNK - 1 masked iterations after the end (a
Vulkan kernel cannot skip the dispatches after it). The carries stay on the device between
chunks; a small one comes back to the host with the predicate. CHUNK = 1 is one round trip an
iteration. bench/bench_while.py measures the choice (docs/compiler.md, "Loops and
conditionals", has the numbers).

Loops nested in a scan body, a cond branch or another loop are not split: a program holding
one still runs on the interpreter, counted (vg.fallbacks()). A chunk cannot run them: inside
a submission nothing reads the predicate, and a bound on the trip count is not known.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vkgrad.ir.core import Literal, Program, Var
from vkgrad.pipeline import run_stages
from vkgrad.primitives.control_flow import while_chunk, while_p
from vkgrad.runtime.inflight import HostResult
from vkgrad.runtime.runners import VulkanRunner
from vkgrad.tracer.array import Array

# iterations a submission: on lavapipe (bench/bench_while.py) 16 runs 1000 iterations 1.4x as
# fast as a round trip an iteration did and 10 as fast (within its noise), where 64 runs 10
# iterations at a quarter of the speed; docs/compiler.md, "Loops and conditionals", has the table
CHUNK = 16


def splits(program: Program) -> bool:
    """Whether the program holds a while loop at its top level (this runner's case)."""
    return any(e.prim is while_p for e in program.eqns)


class SegmentedRunner:
    lowered = None      # no one plan: vg.profile and vg.check_kernels say so

    def __init__(self, device, program: Program, options):
        self.device, self.program = device, program
        self.consts = dict(program.consts)      # Var -> the array traced in
        # each part is a program of its own: the whole program's donations do not apply
        options = dataclasses.replace(options, donated=frozenset())
        self.steps = []             # ("run", runner, inputs, outputs) | ("while", eqn, chunk)
        self.compile_times: dict = {}
        needed = _needed_after(program)
        run: list = []
        for i, e in enumerate(program.eqns):
            if e.prim is not while_p:
                run.append(e)
                continue
            self._segment(run, needed[i - 1] if i else set(), options)
            run = []
            self.steps.append(("while", e, self._runner(while_chunk(e, CHUNK), options)))
        self._segment(run, needed[len(program.eqns) - 1], options)

    def _runner(self, program: Program, options) -> VulkanRunner:
        stages: dict = {}
        run_stages(program, "plan", options, stages, self.compile_times)
        return VulkanRunner(self.device, stages["plan"])

    def _segment(self, eqns, live: set, options) -> None:
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
        sub = Program(f"{self.program.name}_{len(self.steps)}", tuple(inputs), tuple(outputs),
                      tuple(eqns), consts=tuple(consts.items()))
        self.steps.append(("run", self._runner(sub, options), inputs, outputs))

    def run(self, inputs, *, donate=True, timestamps=False) -> list:
        env = dict(self.consts)
        env.update(zip(self.program.inputs, inputs))
        value = lambda x: x.value if isinstance(x, Literal) else env[x]   # noqa: E731
        for step in self.steps:
            if step[0] == "run":
                _, runner, ins, outs = step
                env.update(zip(outs, _device_values(
                    runner.run([env[v] for v in ins], donate=False))))
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
        return [value(o) for o in self.program.outputs]


def _device_values(outs) -> list:
    """Results as the next program's inputs: a small result read back with its submission
    (HostResult) as its numpy value."""
    return [o.result() if isinstance(o, HostResult) else o for o in outs]


def _host(x, type_):
    if isinstance(x, HostResult):
        return np.asarray(x.result())
    if isinstance(x, np.ndarray) or np.isscalar(x):
        return np.asarray(x)
    return np.asarray(Array(type_, x))     # a device buffer: read it


def _needed_after(program: Program) -> list:
    """For each eqn index i, the values read after eqn i (by later eqns or as outputs)."""
    live = {o for o in program.outputs if isinstance(o, Var)}
    out = [set() for _ in program.eqns]
    for i in range(len(program.eqns) - 1, -1, -1):
        out[i] = set(live)
        live |= {x for x in program.eqns[i].inputs if isinstance(x, Var)}
    return out
