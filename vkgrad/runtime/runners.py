"""Runners: a compiled program's way to run, behind one interface for both backends.

    runner.run(inputs, *, donate=True, timestamps=False) -> outputs

`inputs` holds, per program input, either an `Owned` device buffer (an Array already on this
runner's device: bound directly, never copied or uploaded again) or host data (a numpy array,
uploaded in the call's own submission). `outputs` holds, per program output, an `Owned` (a
result that stays on the device) or a numpy array (small results, literals, consts: host data).
`runner.device` is the device it runs on (None for the interpreter).

VulkanRunner: ONE recorded Kompute sequence per distinct set of bound buffers, replayed. Outputs
go to pooled buffers, or, for a donated input, into the input's own buffer when the donation
plan (vkgrad/lowering/donation.py) shows that is safe. A training loop with donated parameters
replays one sequence; without donation it alternates between two.
"""

from __future__ import annotations

import collections
import math

import numpy as np

from vkgrad.dtypes import np_dtype
from vkgrad.ir.core import Literal
from vkgrad.ir.interpreter import run_program
from vkgrad.lowering.donation import plan_donation
from vkgrad.lowering.lower import Lowered
from vkgrad.runtime.pool import Owned, pool_of
from vkgrad.runtime.shaders import compile_all
from vkgrad.runtime.vulkan import Executable

# Results up to this many elements are copied to the host inside the call's own submission:
# reading a loss costs no second submission (about 15 us on the H200, docs/runtime.md).
EAGER_DOWNLOAD_ELEMENTS = 4096
# Recorded buffer sets kept per compiled program (a loop needs one or two; one per batch when
# a data set lives on the device as separate Arrays).
MAX_VARIANTS = 16


class NumpyRunner:
    """The interpreter behind the same interface (the numpy backend, and the fallback)."""

    device = None

    def __init__(self, program):
        self.program = program

    def run(self, inputs, *, donate=True, timestamps=False) -> list:
        return run_program(self.program, *[np.asarray(x) for x in inputs])


class VulkanRunner:
    def __init__(self, device, lowered: Lowered, donated):
        self.device = device
        self.lowered, self.donation = plan_donation(lowered, donated)
        lowered = self.lowered
        self.pool = pool_of(device)
        self.fixed = {}            # slot -> Buffer owned by this program (consts, scratch)
        for i, s in enumerate(lowered.slots):
            if s.kind == "scratch":
                self.fixed[i] = device.buffer(s.size, np_dtype(s.dtype), "scratch")
            elif s.kind == "const":
                self.fixed[i] = device.buffer(s.size, np_dtype(s.dtype), "device")
                self.fixed[i].upload(lowered.const_values[i].reshape(-1))
        # Compile every kernel now, not on the first call's critical path (in parallel).
        compile_all(st.launch for st in lowered.steps)
        for st in lowered.steps:
            device.pipeline(st.launch)
        # Small results (a loss) live in buffers of this program and come back to the host
        # inside the call's submission: the result is host data, so no live Array pins a
        # device buffer and every call binds the same buffers (one recorded sequence).
        self.host_outputs = set()
        for slot in dict.fromkeys(lowered.output_slots):
            s = lowered.slots[slot] if slot is not None else None
            if s and s.kind == "output" and s.size <= EAGER_DOWNLOAD_ELEMENTS \
                    and slot not in self.donation:
                self.fixed[slot] = device.buffer(s.size, np_dtype(s.dtype), "device")
                self.host_outputs.add(slot)
        self.small_downloads = [self.fixed[s] for s in sorted(self.host_outputs)]
        self.variants: collections.OrderedDict = collections.OrderedDict()
        self.last_run: Executable | None = None

    def _bind(self, inputs, donate):
        """Buffers for every external slot: arguments, uploads, outputs."""
        lw, pool = self.lowered, self.pool
        binding, uploads, owned_in = {}, [], []
        for x, slot in zip(inputs, lw.input_slots):
            if isinstance(x, Owned) and x.buffer.device is self.device:
                owned = x
            else:
                host = np.asarray(x)
                owned = pool.owned(lw.slots[slot].size, lw.slots[slot].dtype)
                uploads.append((owned.buffer, host.reshape(-1) if host.size else
                                np.zeros(1, host.dtype)))
            owned_in.append(owned)
            binding[slot] = owned.buffer
        shared = collections.Counter(id(o) for o in owned_in)
        out_owned = {}
        for slot in lw.output_slots:
            if slot is None or slot in binding or slot in self.fixed or slot in out_owned:
                continue
            i = self.donation.get(slot) if donate else None
            # overwrite a donated buffer only if nothing else can still read it
            if i is not None and shared[id(owned_in[i])] == 1 and owned_in[i].users <= 1:
                out_owned[slot] = owned_in[i]        # write the result over the donated input
            else:
                s = lw.slots[slot]
                out_owned[slot] = pool.owned(s.size, s.dtype)
            binding[slot] = out_owned[slot].buffer
        return binding, uploads, owned_in, out_owned

    def _executable(self, binding, timestamps) -> Executable:
        key = (tuple(binding.get(i) for i in range(len(self.lowered.slots))), timestamps)
        ex = self.variants.get(key)
        if ex is None:
            get = lambda s: binding[s] if s in binding else self.fixed[s]
            dispatches = [self.device.dispatch(st.launch, [get(s) for s in st.slots])
                          for st in self.lowered.steps]
            ex = Executable(self.device, dispatches, timestamps=timestamps,
                            name=self.lowered.program.name)
            self.variants[key] = ex
            if len(self.variants) > MAX_VARIANTS:
                _, old = self.variants.popitem(last=False)
                old.release()
        else:
            self.variants.move_to_end(key)
        return ex

    def run(self, inputs, *, donate=True, timestamps=False) -> list:
        lw = self.lowered
        binding, uploads, owned_in, out_owned = self._bind(inputs, donate)
        ex = self._executable(binding, timestamps)
        ex.run(uploads=uploads, downloads=self.small_downloads)
        self.last_run = ex
        outs = []
        for o, slot in zip(lw.program.outputs, lw.output_slots):
            if slot is None:                              # a literal
                outs.append(np.asarray(o.array() if isinstance(o, Literal) else o))
            elif slot in self.host_outputs:
                outs.append(self.fixed[slot].read_staging()[: math.prod(o.shape)])
            elif slot in self.fixed:                      # a const returned as is
                outs.append(lw.const_values[slot])
            else:
                outs.append(out_owned.get(slot) or owned_in[lw.input_slots.index(slot)])
        return outs
