"""The Vulkan backend: buffers, kernels and executables on one device, through patched Kompute.

A `Kernel` is one compiled pipeline (a SPIR-V module plus specialization constants), built once
per process and device. A `Dispatch` runs a kernel on some buffers with a workgroup count and
push constants. An `Executable` is an ordered list of dispatches recorded ONCE into a Kompute
sequence and replayed: one submission per run. Which inputs to upload and which outputs to
download can change between runs; each distinct choice is recorded once and then replayed.

Measured (docs/runtime.md): a submission costs about 570 us on an H200 through stock kp 0.9.0,
whatever it holds, so everything a training step does goes into one sequence.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import functools
import hashlib
import time
import threading
import weakref
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .device import DeviceInfo, check_index, default_device_index, kp_module, list_devices
from .errors import DeviceError
from .hazards import schedule, written_bindings
from .inflight import InFlight
from .shaders import compile_file, compile_glsl, compile_many
from .shaders import stats as shader_stats
from vkgrad.dtypes import bfloat16
from vkgrad.lowering.loops import recorded_runs, replay_order
from vkgrad.lru import LRU
from vkgrad.target import Target
from vkgrad.tracer.array import register_slot_writer

# What tests count: submissions per call, uploads after the first call, pipelines built,
# sequences recorded and the ops recorded into them (a loop's body once, whatever its trip
# count: kp patch 0012), buffers allocated (each is two Vulkan memory allocations for a
# "device" buffer, ~4 ms on the H200), pool misses and arguments copied into a program's own
# slots.
counters = {"submissions": 0, "uploads": 0, "upload_bytes": 0, "downloads": 0,
            "download_bytes": 0, "pipelines": 0, "recordings": 0, "recorded_ops": 0,
            "allocations": 0, "pool_misses": 0, "copy_ins": 0, "copy_outs": 0,
            "barriers_left_out": 0,   # ops recorded without a barrier (runtime/hazards.py)
            # bytes of device memory and of host-visible staging memory allocated (kp copies
            # zeros into a new staging buffer: each of its bytes is written on the host)
            "allocated_bytes": 0, "staging_allocated_bytes": 0,
            # secondary command buffers executed by the recorded sequences (a loop's body is
            # executed trip-count / copies times: record_loop below)
            "loop_executions": 0}

# A loop's body is recorded this many times into its secondary command buffer (at most its
# trip count), which the sequence executes trip-count // copies times, and the rest of the
# trip count from a second secondary holding the body once: each execution is an entry of one
# vkCmdExecuteCommands, whose cost the driver may pay per entry when it records
# (bench/bench_control_flow.py's copiesK rows set it; 1 until a GPU shows more pays).
LOOP_COPIES = 1

# Pipelines the device keeps for reuse once no live program uses them (least recently used
# first out). A shape is part of a generated kernel's source, so a jitted function called with
# a new shape every call builds new pipelines every call; a pipeline a live program still
# dispatches stays alive through that program (kp's OpAlgoDispatch holds it) whatever this says.
# docs/long_runs.md.
MAX_PIPELINES = 256

# Storage dtypes on the device. bool lives as uint32 (GLSL has no 1-byte storage by default);
# float16 and bfloat16 two to a uint32 word (kernels_glsl/half.glsl), which needs no device
# feature: kp 0.9.0's tensors have no 16-bit type, and the words are numpy views of the data.
_HALVES = {np.dtype(np.float16), bfloat16}
_DEVICE_DTYPES = {np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.uint32), *_HALVES}


def device_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.dtype(np.uint32)
    if dt not in _DEVICE_DTYPES:
        raise DeviceError(f"{dt} arrays cannot live on a Vulkan device here; vkgrad stores float32, "
                          "int32, uint32, float16 and bfloat16 (two to a word) and bool (as "
                          "uint32)")
    return dt


def _words(size: int, dtype: np.dtype) -> int:
    """32-bit words holding `size` elements of device dtype `dtype`."""
    return (size + 1) // 2 if dtype in _HALVES else size


def pack_words(values) -> np.ndarray:
    """Push or specialization constants as 32-bit words: ints as int32/uint32, floats as float32."""
    words = np.zeros(len(values), np.uint32)
    for i, v in enumerate(values):
        if isinstance(v, (np.floating, float)):
            words[i] = np.float32(v).view(np.uint32)
        elif isinstance(v, (bool, int, np.integer)):
            v = int(v)
            if not -2**31 <= v < 2**32:
                raise DeviceError(f"constant {v} does not fit in 32 bits")
            words[i] = v & 0xFFFFFFFF
        else:
            raise DeviceError(f"constant {v!r} is not a number")
    return words


class Buffer:
    """A device-resident storage buffer of `size` elements (`words` 32-bit words: 16-bit
    floats are packed two to a word; the staging view shows them as elements).

    kind "device": device-local memory with a host-visible staging copy, for what crosses to or
    from the host (inputs, parameters, outputs); kind "scratch": device memory only, for
    intermediates.
    """

    __slots__ = ("device", "tensor", "size", "words", "dtype", "kind", "_staging", "_address",
                 "__weakref__")

    def __init__(self, device: "Device", size: int, dtype, kind: str = "device"):
        kp = kp_module()
        self.device, self.size, self.dtype, self.kind = device, int(size), device_dtype(dtype), kind
        self.words = _words(self.size, self.dtype)
        word = np.dtype(np.uint32) if self.dtype in _HALVES else self.dtype
        nbytes = max(self.words, 1) * 4
        if nbytes > device.info.max_storage_buffer_range:
            raise DeviceError(
                f"a buffer of {nbytes} bytes is larger than {device.info.name} can bind "
                f"(maxStorageBufferRange = {device.info.max_storage_buffer_range} bytes)")
        ttype = kp.TensorTypes.device if kind == "device" else kp.TensorTypes.storage
        # kp copies the array into the staging memory; its contents are not uploaded.
        self.tensor = device.manager.tensor_t(np.zeros(max(self.words, 1), word), ttype)
        # kp keeps the staging memory mapped while the tensor lives: one numpy view of it (of
        # its 16-bit halves as elements, for the 16-bit floats)
        self._staging = None
        if kind == "device":
            data = self.tensor.data()
            self._staging = (data[: self.words] if word == self.dtype else
                             data.view(np.uint16)[: self.size].view(self.dtype))
        self._address = None
        device._buffers.add(self)
        counters["allocations"] += 1
        counters["allocated_bytes"] += nbytes
        if kind == "device":
            counters["staging_allocated_bytes"] += nbytes

    @property
    def address(self) -> int:
        """The buffer's device address (kp patch 0008; only where `device.addresses`)."""
        if self._address is None:
            self._address = self.tensor.device_address()
        return self._address

    @property
    def nbytes(self) -> int:
        return self.words * 4

    def write_staging(self, array) -> None:
        """Copy host data into the staging memory; an upload op moves it to the device."""
        src = np.ascontiguousarray(array).reshape(-1)
        if src.size != self.size:
            raise DeviceError(f"cannot upload {src.size} elements into a buffer of {self.size}")
        np.copyto(self._staging, src, casting="unsafe")

    def read_staging(self) -> np.ndarray:
        """A copy of the staging memory, valid after a download op ran."""
        return self._staging.copy()

    def upload(self, array) -> None:
        """Immediate upload: one submission of its own (executables batch theirs instead)."""
        self.write_staging(array)
        self.device.submit([("upload", [self])])

    def download(self) -> np.ndarray:
        self.device.submit([("download", [self])])
        return self.read_staging()


@dataclass(frozen=True)
class Kernel:
    """One compute pipeline: SPIR-V + specialization constants, with its binding and push sizes
    and the bindings it may write (from its SPIR-V: runtime/hazards.py)."""
    name: str
    algorithm: object
    bindings: int
    push_words: int
    writes: frozenset | None = None    # None: any binding may be written


@dataclass(frozen=True)
class Dispatch:
    kernel: Kernel
    buffers: tuple
    groups: tuple
    push: tuple = ()   # numbers: ints travel as int32/uint32 words, floats as float32

    def __post_init__(self):
        if len(self.buffers) != self.kernel.bindings:
            raise DeviceError(f"kernel {self.kernel.name} binds {self.kernel.bindings} buffers, "
                              f"the dispatch gives {len(self.buffers)}")
        if len(self.push) != self.kernel.push_words:
            raise DeviceError(f"kernel {self.kernel.name} takes {self.kernel.push_words} push "
                              f"constants, the dispatch gives {len(self.push)}")
        if len(self.groups) != 3 or min(self.groups) < 1:
            raise DeviceError(f"kernel {self.kernel.name}: workgroup count {self.groups} must be "
                              "three positive numbers")


class Device:
    """One Vulkan device: a Kompute manager, the pipelines built on it, buffer allocation."""

    def __init__(self, info: DeviceInfo):
        kp = kp_module()
        self.info = info
        self.target = Target.from_device(info)   # what every compile for it plans for
        # vg.Array's bulk construction and deletion, and the runners' writer marks, through
        # kp's slot writers where this kp has them (patch 0014)
        self.set_slots = getattr(kp, "set_slots", None)
        if hasattr(kp, "new_slotted"):
            register_slot_writer(kp)
        # shaders declare SignedZeroInfNanPreserve and DenormPreserve where the device honours
        # them (ieee.glsl)
        self.defines = tuple((name, 1) for name, on in (
            ("VKGRAD_NAN_PRESERVE", self.target.nan_preserve),
            ("VKGRAD_DENORM_PRESERVE", self.target.denorm_preserve)) if on)
        try:
            self.manager = kp.Manager(info.index)
        except RuntimeError as e:
            raise DeviceError(f"could not open Vulkan device {info.index} ({info.name}): {e}") from None
        # pipelines by what builds them, and by what decides a launch's pipeline (both least
        # recently used first out, MAX_PIPELINES each)
        self._kernels = LRU(MAX_PIPELINES)     # kernel key -> Kernel
        self._by_launch = LRU(MAX_PIPELINES)   # launch key -> Kernel
        self._buffers: "weakref.WeakSet[Buffer]" = weakref.WeakSet()   # live, for runtime_stats
        self._transfer = self.manager.sequence()
        # Pipelines are created against placeholder bindings; every dispatch binds its own
        # buffers (kp patch 0005), so one pipeline serves all dispatches of a shader.
        self._placeholder = self.manager.tensor_t(np.zeros(1, np.float32), kp.TensorTypes.storage)
        # Whether shaders can read a buffer through its device address (kp patch 0008 enables
        # bufferDeviceAddress where the device has it): then a program copies a new argument
        # buffer into its own slot instead of being recorded again (runners.py).
        self.addresses = bool(getattr(self._placeholder, "device_address", lambda: 0)())
        self._copy_slot = None
        self._executables: "weakref.WeakSet[Executable]" = weakref.WeakSet()
        # submissions pending on this device's queue
        self.inflight = InFlight(self.target.wait_spin_us)
        # one thread at a time binds, records and submits (calls from several threads: the
        # shared transfer sequence, recorded copies and the queue are not thread-safe)
        self.lock = threading.RLock()

    def __repr__(self):
        return f"<vkgrad Device {self.info.index}: {self.info.name} ({self.info.type})>"

    def buffer(self, size: int, dtype=np.float32, kind: str = "device") -> Buffer:
        return Buffer(self, size, dtype, kind)

    def kernel(self, spirv: bytes, *, bindings: int, push_words: int = 0, spec=(),
               name: str = "kernel") -> Kernel:
        key = _kernel_key(spirv, bindings, push_words, spec)
        k = self._kernels.get(key)
        if k is None:
            k = self._add_kernel(key, name, self._algorithm(spirv, bindings, push_words, spec),
                                 spirv)
        return k

    def _algorithm(self, spirv: bytes, bindings: int, push_words: int, spec):
        """A new pipeline (kp's Algorithm): the driver compiles the SPIR-V here."""
        return self.manager.algorithm([self._placeholder] * bindings, spirv, (1, 1, 1),
                                      pack_words(spec), np.zeros(push_words, np.uint32))

    def _add_kernel(self, key, name, algorithm, spirv: bytes) -> Kernel:
        counters["pipelines"] += 1
        _, bindings, push_words, _ = key
        return self._kernels.put(key, Kernel(name, algorithm, bindings, push_words,
                                             written_bindings(spirv, bindings)))

    def pipeline(self, launch) -> Kernel:
        """The pipeline of a lowering `Launch` (vkgrad/lowering/launch.py): its SPIR-V and its
        pipeline are each built once and cached. A launch seen before is one dict lookup (a
        program recorded again for new argument buffers looks up every one of its kernels:
        through the SPIR-V cache that took 3 ms per 10 kernels)."""
        key = _launch_key(launch)
        k = self._by_launch.get(key)
        if k is None:
            k = self._remember(key, self.kernel(
                _spirv(_shader_of(launch, self.defines)), bindings=launch.bindings,
                push_words=len(launch.push), spec=launch.spec, name=launch.name))
        return k

    def _remember(self, launch_key, k: Kernel) -> Kernel:
        return self._by_launch.put(launch_key, k)

    def pipelines(self, launches) -> dict:
        """The pipelines of many launches: their shaders compiled in parallel first (cached
        ones are read from the SPIR-V cache), then the new pipelines built on as many threads
        (kp patch 0007 lets the driver's compiles run without the GIL: on the H200 a pipeline
        took ~185 ms, 7.4 s for the transformer block step's 40 one after another). Returns
        seconds per stage and counts, for VKGRAD_LOG_COMPILES."""
        t0 = time.perf_counter()
        before = dict(shader_stats)
        jobs = {_shader_of(launch, self.defines): (_spirv, (_shader_of(launch, self.defines),))
                for launch in launches}
        compile_many(jobs.values())
        t1 = time.perf_counter()
        pipelines = counters["pipelines"]
        todo: dict = {}     # kernel key -> [(launch key, launch)], for pipelines not yet built
        for launch in launches:
            lkey = _launch_key(launch)
            if lkey in self._by_launch:
                continue
            spirv = _spirv(_shader_of(launch, self.defines))   # from memory now
            key = _kernel_key(spirv, launch.bindings, len(launch.push), launch.spec)
            if key in self._kernels:
                self._remember(lkey, self._kernels.get(key))
            else:
                todo.setdefault(key, []).append((lkey, launch, spirv))

        if todo and self.target.drain_before_compile:   # vkgrad/target.py says why
            self.inflight.drain()

        def build(uses):
            _, launch, spirv = uses[0]
            return self._algorithm(spirv, launch.bindings, len(launch.push), launch.spec)

        threads = min(self.target.pipeline_threads, len(todo))
        if threads > 1:
            with concurrent.futures.ThreadPoolExecutor(threads) as pool:
                algorithms = list(pool.map(build, todo.values()))
        else:
            algorithms = [build(uses) for uses in todo.values()]
        for (key, uses), algorithm in zip(todo.items(), algorithms):
            k = self._add_kernel(key, uses[0][1].name, algorithm, uses[0][2])
            for lkey, _, _ in uses:
                self._remember(lkey, k)
        return {"shaders": t1 - t0, "pipelines": time.perf_counter() - t1,
                "kernels": len(jobs),
                "compiled": shader_stats["compiled"] - before["compiled"],
                "from_disk": shader_stats["disk_hits"] - before["disk_hits"],
                "new_pipelines": counters["pipelines"] - pipelines}

    def copy_slot(self, table: Buffer, entry: int, slot: Buffer, out: bool) -> Dispatch:
        """A dispatch copying the buffer whose address is `table`'s entry `entry` (two words,
        low first) into `slot`, or with `out`, `slot` into it (kernels_glsl/copy_slot.comp)."""
        if self._copy_slot is None:
            if self.target.drain_before_compile:   # as pipelines() does: vkgrad/target.py
                self.inflight.drain()
            self._copy_slot = self.kernel(compile_file("copy_slot.comp"), bindings=2,
                                          push_words=3, name="copy_slot")
        groups = min(-(-slot.words // 256), 1024)
        return Dispatch(self._copy_slot, (table, slot), (groups, 1, 1),
                        (entry, slot.words, int(out)))

    def dispatch(self, launch, buffers) -> Dispatch:
        """A Dispatch of `launch` on `buffers` (one per binding, in order)."""
        return Dispatch(self.pipeline(launch), tuple(buffers),
                        tuple(int(g) for g in launch.groups), tuple(launch.push))

    def submit(self, ops) -> None:
        """Run a few transfer ops now, in one submission (not for the hot path)."""
        kp = kp_module()
        with self.lock:
            seq = self._transfer
            seq.clear()
            for kind, buffers in ops:
                seq.record(_transfer_op(kp, kind, buffers))
            _count(ops)
            seq.eval()   # in queue order: after every pending submission

    def destroy(self) -> None:
        try:
            self.inflight.wait_all()
        except Exception:   # at exit: an error nobody waited for has no one to go to
            pass
        for ex in list(self._executables):
            ex.release()
        self._kernels.clear()
        self._by_launch.clear()
        self.manager.destroy()


def _kernel_key(spirv: bytes, bindings: int, push_words: int, spec) -> tuple:
    return hashlib.sha256(spirv).digest(), bindings, push_words, pack_words(spec).tobytes()


def _launch_key(launch) -> tuple:
    """What decides a launch's pipeline (hashable)."""
    return _shader_of(launch), launch.bindings, len(launch.push), launch.spec


def _shader_of(launch, device_defines=()) -> tuple:
    """What decides a launch's SPIR-V (hashable): file or source, the defines (the launch's and
    the device's), the name."""
    defines = dict(device_defines)
    defines.update(launch.defines)
    return (launch.is_file, launch.shader, tuple(sorted(defines.items())), launch.name,
            launch.spirv_env)


def _spirv(shader) -> bytes:
    is_file, text, defines, name, env = shader
    return (compile_file(text, dict(defines), target_env=env) if is_file
            else compile_glsl(text, dict(defines), name=name, target_env=env))


def _transfer_op(kp, kind, buffers):
    tensors = [b.tensor for b in buffers]
    if kind == "upload":
        return kp.OpTensorSyncDevice(tensors)
    if kind == "download":
        return kp.OpTensorSyncLocal(tensors)
    raise ValueError(kind)


def _count(ops) -> None:
    for name, n in _counts(ops):
        counters[name] += n


def _counts(ops) -> list:
    """What one submission of `ops` adds to `counters`."""
    out = [("submissions", 1)]
    for kind, buffers in ops:
        if kind in ("upload", "download"):
            out += [(kind + "s", len(buffers)), (kind + "_bytes", sum(b.nbytes for b in buffers))]
    return out


class Executable:
    """Dispatches recorded once into one sequence and replayed: one submission per run.

    submit(uploads=[(buffer, array)], downloads=[buffer], keep, on_done, pre=(i,), post=(i,))
    writes the uploads into staging memory, submits [uploads, extra[i] for i in pre,
    dispatches, extra[i] for i in post, downloads] (`add_extra` adds a dispatch a run may put
    around the program; `loops`, (first, end, count) each: dispatches[first:end] run count
    times in a row, recorded once) and returns the `Submission` at once; when it is done,
    `buffer.read_staging()` holds each download. run(...) is submit and wait. Each distinct
    (uploads, downloads, pre, post) choice is recorded once, the first time it is used. An
    executable runs once at a time: a submit while its previous run is pending waits for that
    run first (the choices share the staging memory and descriptor sets).
    """

    def __init__(self, device: Device, dispatches: Sequence[Dispatch], *, timestamps: bool = False,
                 name: str = "program", like: "Executable | None" = None, loops=()):
        kp = kp_module()
        self.device, self.name = device, name
        self.dispatches = list(dispatches)
        # loops (first, end, count): dispatches[first:end] run count times in a row
        # (vkgrad/lowering/loops.py); the recording is runs of them, each loop's body recorded
        # once and executed count times (kp patch 0012)
        self.loops = tuple(loops)
        self._runs = recorded_runs(len(self.dispatches), self.loops)
        self.timestamps = timestamps and device.info.timestamps
        # each run (between loops, or a loop's body) as (dispatch index, barrier before it) in
        # the order recorded: levels of independent dispatches with one barrier each
        # (runtime/hazards.py; a body's first op keeps its barrier, which orders an iteration
        # after the previous one); with timestamps, program order and every barrier (each
        # kernel's time its own)
        self._schedules = [
            [(i, True) for i in indices] if self.timestamps else
            [(indices[k], b) for k, b in schedule([self.dispatches[i] for i in indices])]
            for indices, _ in self._runs]
        # `like`: an executable of the same program on other buffers, whose ops (each with its
        # descriptor set) serve again where a dispatch binds the same buffers (new arguments
        # change the few dispatches that read them)
        same = ({i: op for i, (d, op) in enumerate(zip(like.dispatches, like._ops))
                 if i < len(self.dispatches) and d == self.dispatches[i]}
                if like is not None and like._ops else {})
        self._ops = [same.get(i) or kp.OpAlgoDispatch(d.kernel.algorithm,
                                                      [b.tensor for b in d.buffers],
                                                      d.groups, pack_words(d.push))
                     for i, d in enumerate(self.dispatches)]
        # dispatches a run may put before or after the program (slot copies, runners.py)
        self.extra: list[Dispatch] = []
        self._extra_ops: list = []
        self._recorded: dict[tuple, _Recorded] = {}
        self.last = None   # the latest Submission
        self.last_timings_us: list | None = None
        # [start, end) of the program's dispatches in last_timings_us, between the transfers
        # and slot copies before it and those after it (runners.py's pre and post)
        self.last_program_span: tuple | None = None
        device._executables.add(self)

    def submit(self, uploads=(), downloads=(), keep=(), on_done=None, pre=(), post=()):
        key = (*[b for b, _ in uploads], None, *downloads, pre, post)
        rec = self._recorded.get(key)
        if rec is None:
            transfers = [("upload", [b for b, _ in uploads])] if uploads else []
            tail = [("download", list(downloads))] if downloads else []
            rec = self._recorded[key] = self._record(transfers, tail, pre, post)
        if self.last is not None and not self.last.done:
            self.last.wait()   # one run at a time: its staging memory is about to be written
        for buf, array in uploads:
            buf.write_staging(array)
        for name, n in rec.counts:
            counters[name] += n
        if self.timestamps:
            on_done = _then(lambda: self._read_timestamps(rec), on_done)
        rec.submission = self.last = self.device.inflight.submit(rec.seq, self.name, keep,
                                                                 on_done)
        return rec.submission

    def add_extra(self, d: Dispatch) -> int:
        """Add a dispatch that a run may put before (`pre`) or after (`post`) the program;
        returns its index."""
        self.extra.append(d)
        self._extra_ops.append(kp_module().OpAlgoDispatch(
            d.kernel.algorithm, [b.tensor for b in d.buffers], d.groups, pack_words(d.push)))
        return len(self.extra) - 1

    def run(self, uploads=(), downloads=()) -> None:
        """Submit and wait."""
        self.submit(uploads, downloads).wait()

    @functools.cached_property
    def order(self) -> list | None:
        """The dispatches' indices in the order they run (each loop's body once per
        iteration), as timestamps label them; None: each once, in order."""
        return replay_order(len(self.dispatches), self.loops) if self.loops else None

    def loop_bodies(self) -> list:
        """Each loop's body as it is recorded (loops of more than one step): (trip count,
        [(kernel name, whether a barrier is recorded before it)]), in the order recorded: what
        every iteration costs."""
        return [(count, [(self.dispatches[i].kernel.name, barrier) for i, barrier in order])
                for (_, count), order in zip(self._runs, self._schedules) if count > 1]

    def busy(self) -> bool:
        """Whether a submission of this executable is still pending (they complete in order,
        so the last one says)."""
        return self.last is not None and not self.last.done

    def _read_timestamps(self, rec) -> None:
        ticks = np.asarray(rec.seq.get_timestamps(), np.float64)
        us = np.diff(ticks) * self.device.info.timestamp_period_ns / 1000.0
        self.last_timings_us = list(zip(rec.labels, us.tolist()))
        self.last_program_span = rec.span

    def _record(self, transfers, tail, pre=(), post=()) -> "_Recorded":
        """One sequence of [transfers, extra[pre], the program, extra[post], tail]: the ops
        around the program and its runs between loops recorded one by one, each loop's body by
        one record_loop (kp patch 0012: recorded once, executed count times; with timestamps,
        whose queries each op writes once, recorded count times by kp's C++)."""
        kp = kp_module()
        head = [_transfer_op(kp, kind, buffers) for kind, buffers in transfers]
        head += [self._extra_ops[i] for i in pre]
        end = [self._extra_ops[i] for i in post]
        end += [_transfer_op(kp, kind, buffers) for kind, buffers in tail]
        labels, span = None, None
        if self.timestamps:
            order = self.order or range(len(self._ops))
            start = len(transfers) + len(pre)
            span = (start, start + len(order))    # the program's own ops among the timings
            labels = ([kind for kind, _ in transfers] + [self.extra[i].kernel.name for i in pre]
                      + [self.dispatches[i].kernel.name for i in order]
                      + [self.extra[i].kernel.name for i in post] + [kind for kind, _ in tail])
        seq = self.device.manager.sequence(0, len(labels) if labels else 0)
        ops = list(head)
        recorded = len(head) + len(end)
        for op in head:
            seq.record(op)
        left_out = 0
        for (indices, count), order in zip(self._runs, self._schedules):
            body = [self._ops[i] for i in indices]
            ops += body
            recorded += len(body)
            left_out += sum(not barrier for _, barrier in order)
            if count == 1:
                for i, barrier in order:
                    seq.record(self._ops[i], barrier)
            else:
                recorded += len(body) * (record_loop(
                    seq, [self._ops[i] for i, _ in order], count,
                    [barrier for _, barrier in order]) - 1)
        for op in end:
            seq.record(op)
        ops += end
        counters["recordings"] += 1
        counters["recorded_ops"] += recorded
        counters["barriers_left_out"] += left_out
        return _Recorded(seq, labels, ops, transfers + tail, span)

    def release(self) -> None:
        """Free the recorded sequences (their ops hold descriptor sets), once they are done."""
        for rec in self._recorded.values():
            if rec.submission is not None and not rec.submission.done:
                self.device.inflight.wait(rec.submission)
            rec.seq.destroy()
        self._recorded.clear()
        self._ops.clear()
        self._extra_ops.clear()


def record_loop(seq, ops, count: int, barriers) -> int:
    """Record a loop's body (`ops`, each with its barrier or not) to run `count` times: copied
    k = min(LOOP_COPIES, count) times into a secondary command buffer executed count // k
    times, and the rest from one holding it once (kp patch 0012; each copy's first op keeps its
    barrier, which orders an iteration after the previous one). Returns how many copies of the
    body it recorded."""
    k = min(LOOP_COPIES, count)
    q, r = divmod(count, k)
    barriers = [True, *barriers[1:]]
    seq.record_loop(ops * k, q, True, barriers * k)
    if r:
        seq.record_loop(ops, r, True, barriers)
    counters["loop_executions"] += q + r
    return k + (r > 0)


class _Recorded:
    __slots__ = ("seq", "labels", "ops", "counts", "submission", "span")

    def __init__(self, seq, labels, ops, transfers, span=None):
        self.seq, self.labels, self.ops, self.counts = seq, labels, ops, _counts(transfers)
        self.submission = None
        self.span = span   # with timestamps: [start, end) of the program's ops in labels


def _then(first, second):
    if second is None:
        return first
    return lambda: (first(), second())


_devices: dict[int, Device] = {}


def get_device(index=None) -> Device:
    """The Device for `index` (default: default_device_index()), opened once per process."""
    i = default_device_index() if index is None else check_index(index)
    if i not in _devices:
        _devices[i] = Device(list_devices()[i])
    return _devices[i]


def opened_devices() -> list:
    """The Devices this process has opened (get_device), by index."""
    return [_devices[i] for i in sorted(_devices)]


@atexit.register
def _close_devices() -> None:
    # Destroy sequences, pipelines and buffers while the VkDevice still exists, instead of in
    # whatever order the interpreter tears objects down.
    for d in list(_devices.values()):
        d.destroy()
    _devices.clear()
