"""Runners: a compiled program's way to run, behind one interface for both backends.

    runner.run(inputs, *, donate=True, timestamps=False) -> outputs

`inputs` holds, per program input, either an `Owned` device buffer (an Array already on this
runner's device: bound directly, never copied or uploaded again) or host data (a numpy array,
uploaded in the call's own submission). `outputs` holds, per program output, an `Owned` (a
result that stays on the device), a `HostResult` (a small result, host data once the call's
submission is done) or a numpy array (literals, consts). `runner.device` is the device it runs on
(None for the interpreter).

VulkanRunner.run submits and returns without waiting (vkgrad/runtime/inflight.py); a buffer it
binds stays out of the pool until the submission is done. ONE recorded Kompute sequence per
distinct set of bound buffers, replayed (with a second or third copy only when the first is
still running). Outputs go to pooled buffers, or, for a donated input, into the input's own
buffer when the donation plan (vkgrad/lowering/donation.py) shows that is safe. A training loop
with donated parameters replays one sequence per submission in flight.
"""

from __future__ import annotations

import collections
import os

import numpy as np

from vkgrad.dtypes import np_dtype
from vkgrad.ir.core import Literal
from vkgrad.ir.interpreter import run_program
from vkgrad.lowering.donation import plan_donation
from vkgrad.lowering.lower import Lowered
from vkgrad.runtime.errors import NaNError
from vkgrad.runtime.inflight import HostResult, max_in_flight
from vkgrad.runtime.pool import Owned, pool_of
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
        # Compile every kernel now, not on the first call's critical path.
        for st in lowered.steps:
            device.pipeline(st.launch)
        # Small results (a loss) come back to the host inside the call's submission: the
        # result is host data, so no live Array pins a device buffer. Each recorded copy of the
        # program has its own buffers for them (a copy runs once at a time), so every call
        # binds the same buffers and one sequence per copy is replayed.
        self.host_outputs = sorted(
            slot for slot in set(lowered.output_slots) - {None}
            if lowered.slots[slot].kind == "output" and slot not in self.donation
            and lowered.slots[slot].size <= EAGER_DOWNLOAD_ELEMENTS)
        self.check_nans = os.environ.get("VKGRAD_DEBUG_NANS", "") not in ("", "0")
        self.variants: collections.OrderedDict = collections.OrderedDict()
        self.last_run: Executable | None = None
        self.last_submission = None

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
            if slot is None or slot in binding or slot in self.fixed or slot in out_owned \
                    or slot in self.host_outputs:
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

    def _executable(self, binding, timestamps) -> "_Copy":
        """A recorded copy of the program for these buffers that is not running (up to one per
        submission in flight, so a loop that binds the same buffers every call never waits)."""
        key = (tuple(binding.get(i) for i in range(len(self.lowered.slots))), timestamps)
        copies = self.variants.get(key)
        if copies is None:
            copies = self.variants[key] = []
            if len(self.variants) > MAX_VARIANTS:
                for old in self.variants.popitem(last=False)[1]:
                    old.ex.release()
        else:
            self.variants.move_to_end(key)
        for c in copies:
            if not c.ex.busy():
                return c
        if len(copies) >= max(1, max_in_flight()):
            return copies[0]   # its submit waits for its previous run
        host = {s: self.device.buffer(self.lowered.slots[s].size,
                                      np_dtype(self.lowered.slots[s].dtype), "device")
                for s in self.host_outputs}
        bufs = {**self.fixed, **host, **binding}
        dispatches = [self.device.dispatch(st.launch, [bufs[s] for s in st.slots])
                      for st in self.lowered.steps]
        copies.append(_Copy(Executable(self.device, dispatches, timestamps=timestamps,
                                       name=self.lowered.program.name), host))
        return copies[-1]

    def run(self, inputs, *, donate=True, timestamps=False) -> list:
        lw = self.lowered
        self.device.inflight.make_room()
        binding, uploads, owned_in, out_owned = self._bind(inputs, donate)
        copy = self._executable(binding, timestamps)
        results = {s: HostResult() for s in self.host_outputs}
        sub = copy.ex.submit(uploads, copy.downloads, keep=(owned_in, out_owned),
                             on_done=lambda: self._read_results(copy.host, results))
        for r in results.values():
            r.submission = sub
        for o in out_owned.values():
            o.writer = sub
        self.last_run, self.last_submission = copy.ex, sub
        outs = []
        for o, slot in zip(lw.program.outputs, lw.output_slots):
            if slot is None:                              # a literal
                outs.append(np.asarray(o.array() if isinstance(o, Literal) else o))
            elif slot in results:
                outs.append(results[slot])
            elif slot in self.fixed:                      # a const returned as is
                outs.append(lw.const_values[slot])
            else:
                outs.append(out_owned.get(slot) or owned_in[lw.input_slots.index(slot)])
        return outs

    def _read_results(self, host, results) -> None:
        """When the submission is done: its small results, from staging memory to the host."""
        for slot, r in results.items():
            r.value = host[slot].read_staging()
            if self.check_nans and r.value.dtype.kind == "f" and np.isnan(r.value).any():
                raise NaNError(f"{self.lowered.program.name} returned NaN in a result of "
                               f"{r.value.size} element(s) (VKGRAD_DEBUG_NANS=1)")
        for r in results.values():
            r.submission = None    # resolved: reading it needs no wait


class _Copy:
    __slots__ = ("ex", "host", "downloads")

    def __init__(self, ex, host):
        self.ex, self.host, self.downloads = ex, host, list(host.values())
