"""vg.jit: a traced program compiled to Vulkan kernels, run as ONE submission per call.

    step = vg.jit(fun, static_argnums=(), donate_argnums=(), backend=None)
    out = step(*args)                      # pytree of vg.Array, resident on the device
    step.lower(*args).as_text(stage="lowered")

Pipeline (each stage printable, each executable by the numpy interpreter):
    trace -> optimize (simplify, transpose folding, CSE, DCE) -> canonicalize -> fuse
          -> lower (kernels + memory plan) -> one recorded Kompute sequence, replayed.

Compiled programs are cached on (argument structure, shapes and dtypes, static values,
donation, backend); VKGRAD_LOG_COMPILES=1 logs each compile and what changed in the key.

A call binds its arguments' device buffers directly (an Array from an earlier call is never
copied or uploaded again), uploads host arrays, and writes outputs into pooled buffers, or, for
a donated argument, into the argument's own buffer when the memory plan shows that is safe. Each
distinct set of buffers is recorded into a sequence once and replayed: a training loop with
donated parameters replays one sequence; without donation it alternates between two.

A program the kernels cannot run falls back WHOLE to the interpreter (vg.fallbacks() counts the
reasons; VKGRAD_STRICT=1 makes it an error).
"""

from __future__ import annotations

import collections
import functools
import math
import os
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from vkgrad.array import Array, BufferPool, Owned
from vkgrad.errors import ArgumentError, VkgradError
from vkgrad.ir.core import Literal, TensorType, np_dtype, type_str
from vkgrad.ir.interpreter import run_program
from vkgrad.ir.passes import optimize
from vkgrad.ir.passes.fuse import canonicalize_for_lowering, fuse
from vkgrad.ir.verifier import checked
from vkgrad.lowering.launch import dispatch, kernel_of
from vkgrad.lowering.lower import Lowered, Unsupported, lower
from vkgrad.tracer import core
from vkgrad.tracer.pytree import tree_flatten, tree_unflatten
from vkgrad.tracer.transforms import _fun_name, _normalize_argnums, _trace

BACKENDS = ("vulkan", "numpy")
# Results up to this many elements are copied to the host inside the call's own submission:
# reading a loss costs no second submission (about 15 us on the H200, docs/runtime.md).
EAGER_DOWNLOAD_ELEMENTS = 4096
# Recorded buffer sets kept per compiled program (a loop needs one or two; one per batch when
# a data set lives on the device as separate Arrays).
MAX_VARIANTS = 16

_fallbacks: collections.Counter = collections.Counter()
_warned_no_device = False


class StrictModeError(VkgradError):
    """VKGRAD_STRICT=1 and a program would have fallen back to the interpreter."""


def fallbacks() -> dict:
    """How many compiled programs fell back to the numpy interpreter, by reason."""
    return dict(_fallbacks)


def default_backend() -> str:
    global _warned_no_device
    env = os.environ.get("VKGRAD_BACKEND", "").strip().lower()
    if env:
        if env not in BACKENDS:
            raise ArgumentError(f"VKGRAD_BACKEND={env!r}: choose one of {', '.join(BACKENDS)}")
        return env
    try:
        from vkgrad.runtime import get_device
        get_device()
        return "vulkan"
    except VkgradError as e:
        if not _warned_no_device:
            warnings.warn(f"vkgrad: no Vulkan device ({e}); running on the numpy interpreter",
                          stacklevel=3)
            _warned_no_device = True
        return "numpy"


def _log(msg: str) -> None:
    if os.environ.get("VKGRAD_LOG_COMPILES", "") not in ("", "0"):
        print(f"vkgrad: {msg}", file=sys.stderr)


# ----------------------------------------------------------------------------- jit

def jit(fun=None, *, static_argnums=(), donate_argnums=(), backend=None):
    """Compile `fun` for the default (or given) backend; see the module docstring."""
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 donate_argnums=donate_argnums, backend=backend)
    return Jitted(fun, static_argnums, donate_argnums, backend)


@dataclass(frozen=True)
class _Key:
    structure: object      # treedefs of the dynamic arguments
    avals: tuple           # TensorType per leaf
    static: tuple          # static argument values
    donated: tuple         # donated leaf indices
    backend: str

    def describe_change(self, old: "_Key") -> str:
        if old.backend != self.backend:
            return f"backend {old.backend} -> {self.backend}"
        if old.structure != self.structure:
            return "argument structure changed"
        if old.static != self.static:
            return f"static arguments {old.static!r} -> {self.static!r}"
        if len(old.avals) != len(self.avals):
            return f"{len(old.avals)} -> {len(self.avals)} array arguments"
        diffs = [f"leaf {i}: {a} -> {b}" for i, (a, b) in enumerate(zip(old.avals, self.avals))
                 if a != b]
        if diffs:
            return "shapes/dtypes changed: " + "; ".join(diffs[:4]) + (" ..." if len(diffs) > 4 else "")
        return "donation changed"


class Jitted:
    def __init__(self, fun, static_argnums, donate_argnums, backend):
        if backend is not None and backend not in BACKENDS:
            raise ArgumentError(f"backend={backend!r}: choose one of {', '.join(BACKENDS)}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.static_argnums = static_argnums
        self.donate_argnums = donate_argnums
        self.backend = backend
        self._cache: dict = {}
        self._last_key: _Key | None = None
        self._argnums: dict = {}   # number of arguments -> (static, donated) positions
        self._where = f"an argument of {_fun_name(fun)}"
        self.compiles = 0

    def __repr__(self):
        return f"<vkgrad.jit of {_fun_name(self.fun)}>"

    # --- the cache key and the arguments' leaves
    def _prepare(self, args, kwargs):
        fun = self.fun
        if kwargs:   # keyword arguments are dynamic too: pass them as one more (pytree) argument
            fun = lambda *a: self.fun(*a[:-1], **a[-1])
            args = args + (kwargs,)
        nums = self._argnums.get(len(args))
        if nums is None:
            static = set(_normalize_argnums(self.static_argnums, len(args), "static_argnums")) \
                if self.static_argnums != () else set()
            donate = set(_normalize_argnums(self.donate_argnums, len(args), "donate_argnums")) \
                if self.donate_argnums != () else set()
            if static & donate:
                raise ArgumentError("an argument cannot be both static and donated")
            nums = self._argnums[len(args)] = (static, donate)
        static, donate = nums
        leaves, trees, donated, statics = [], [], [], []
        for i, a in enumerate(args):
            if i in static:
                try:
                    hash(a)
                except TypeError:
                    raise ArgumentError(f"static argument {i} of {_fun_name(self.fun)} is a "
                                        f"{type(a).__name__}, which is not hashable: static "
                                        "values are part of the compile cache key") from None
                statics.append((i, a))
                continue
            ls, tree = tree_flatten(a)
            if i in donate:
                donated += range(len(leaves), len(leaves) + len(ls))
            trees.append((i, tree))
            leaves += ls
        avals = tuple(x._aval if type(x) is Array else core.abstract_leaf(x, self._where)
                      for x in leaves)
        key = _Key(tuple(trees), avals, tuple(statics), tuple(donated),
                   self.backend or default_backend())
        return fun, args, key, leaves

    def _compiled(self, args, kwargs):
        fun, args, key, leaves = self._prepare(args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            why = "first call" if self._last_key is None else key.describe_change(self._last_key)
            _log(f"compiling {_fun_name(self.fun)} for {key.backend} ({why})")
            traced = _trace(fun, args, self.static_argnums)
            entry = self._cache[key] = Compiled(traced.program, traced.out_tree, key.backend,
                                                set(key.donated))
            self.compiles += 1
        self._last_key = key
        return entry, leaves

    def __call__(self, *args, **kwargs):
        if core.current_trace() is not None:   # inside another transform: inline
            return self.fun(*args, **kwargs)
        entry, leaves = self._compiled(args, kwargs)
        return entry(leaves)

    def lower(self, *args, **kwargs) -> "Compiled":
        """The compiled program for these arguments (compiling it if needed): .as_text(stage),
        .stats(), .compile()."""
        return self._compiled(args, kwargs)[0]


class Compiled:
    """One compiled program: its stages, and how to run it on its backend."""

    def __init__(self, program, out_tree, backend: str, donated: set):
        self.out_tree = out_tree
        self.traced = program
        self.optimized = optimize(program, final=True)
        name = program.name
        self.fused = None
        self.lowered: Lowered | None = None
        self.fallback_reason = None
        self.runner = None
        if backend == "vulkan":
            try:
                from vkgrad.runtime import get_device
                device = get_device()
                self.fused = checked(fuse.apply(canonicalize_for_lowering.apply(self.optimized)),
                                     "pass fuse")
                self.lowered = lower(self.fused, device.info)
                self.runner = VulkanRunner(device, self.lowered, donated)
            except Unsupported as u:
                self.fallback_reason = u.reason
                _fallbacks[u.reason] += 1
                if os.environ.get("VKGRAD_STRICT", "") not in ("", "0"):
                    raise StrictModeError(f"{name} cannot run on Vulkan: {u.reason} "
                                          "(VKGRAD_STRICT=1 forbids the interpreter fallback)")
                _log(f"{name} falls back to the numpy interpreter: {u.reason}")
        if self.runner is None:
            self.runner = NumpyRunner(self.optimized, donated)

    def __call__(self, leaves):
        return tree_unflatten(self.out_tree, self.runner(leaves))

    def compile(self) -> "Compiled":
        return self

    def as_text(self, stage: str = "lowered") -> str:
        texts = {"traced": lambda: str(self.traced), "grad": lambda: str(self.optimized),
                 "optimized": lambda: str(self.optimized),
                 "fused": lambda: str(self.fused) if self.fused else None,
                 "lowered": lambda: self.lowered.text() if self.lowered else None}
        if stage not in texts:
            raise ArgumentError(f"stage={stage!r}: choose one of {', '.join(texts)}")
        text = texts[stage]()
        if text is None:
            return f"# {stage}: not lowered to Vulkan ({self.fallback_reason or 'numpy backend'})\n"
        return text

    def stats(self) -> dict:
        st = {"backend": "vulkan" if self.lowered else "numpy",
              "traced_eqns": len(self.traced.eqns), "optimized_eqns": len(self.optimized.eqns),
              "fallback": self.fallback_reason}
        if self.lowered:
            lw = self.lowered
            st.update(dispatches=len(lw.steps),
                      buffers=len(lw.slots),
                      scratch_bytes=sum(s.size * 4 for s in lw.slots if s.kind == "scratch"),
                      # dispatches per primitive ("fused" = generated elementwise kernels)
                      kernels=dict(collections.Counter(s.eqn.prim.name for s in lw.steps)))
        return st


# ----------------------------------------------------------------------------- runners

class NumpyRunner:
    """The interpreter behind the same call interface (fallback and backend="numpy")."""

    def __init__(self, program, donated):
        self.program, self.donated = program, donated

    def __call__(self, leaves):
        vals = []
        for i, x in enumerate(leaves):
            vals.append(np.asarray(x))
            if i in self.donated and isinstance(x, Array):
                x.delete()
        outs = run_program(self.program, *vals)
        return [Array(o.type, host=v) for o, v in zip(self.program.outputs, outs)]


_pools: dict = {}


def pool_of(device) -> BufferPool:
    if device not in _pools:
        _pools[device] = BufferPool(device)
    return _pools[device]


class VulkanRunner:
    def __init__(self, device, lowered: Lowered, donated: set):
        self.device, self.lowered = device, lowered
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
            kernel_of(device, st.launch)
        self.donation = plan_donation(lowered, donated)
        self.donated = donated
        # Small results (a loss) live in buffers of this program and come back to the host
        # inside the call's submission: the returned Array is host data, so no live Array pins
        # a device buffer and every call binds the same buffers (one recorded sequence).
        self.host_outputs = set()
        for slot in dict.fromkeys(lowered.output_slots):
            s = lowered.slots[slot] if slot is not None else None
            if s and s.kind == "output" and s.size <= EAGER_DOWNLOAD_ELEMENTS \
                    and slot not in self.donation:
                self.fixed[slot] = device.buffer(s.size, np_dtype(s.dtype), "device")
                self.host_outputs.add(slot)
        self.small_downloads = [self.fixed[s] for s in sorted(self.host_outputs)]
        self.variants: collections.OrderedDict = collections.OrderedDict()
        self.timestamps = False

    def bind(self, leaves, donate=True):
        """Buffers for every external slot: arguments, uploads, outputs."""
        lw, pool = self.lowered, self.pool
        binding, uploads, owned_in = {}, [], []
        for i, (x, slot) in enumerate(zip(leaves, lw.input_slots)):
            s = lw.slots[slot]
            if isinstance(x, Array) and x._owned is not None and not x._deleted \
                    and x._owned.buffer.device is self.device:
                owned = x._owned
            else:
                host = np.asarray(x)
                owned = Owned(pool.take(s.size, s.dtype), pool)
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
                out_owned[slot] = Owned(pool.take(s.size, s.dtype), pool)
            binding[slot] = out_owned[slot].buffer
        return binding, uploads, owned_in, out_owned

    def executable(self, binding, timestamps=False):
        from vkgrad.runtime import Executable
        key = (tuple(binding.get(i) for i in range(len(self.lowered.slots))), timestamps)
        ex = self.variants.get(key)
        if ex is None:
            get = lambda s: binding[s] if s in binding else self.fixed[s]
            dispatches = [dispatch(self.device, st.launch, [get(s) for s in st.slots])
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

    def __call__(self, leaves, timestamps=False, donate=True):
        lw = self.lowered
        binding, uploads, owned_in, out_owned = self.bind(leaves, donate)
        ex = self.executable(binding, timestamps)
        small = self.small_downloads
        ex.run(uploads=uploads, downloads=small)
        self.last_run = ex
        for i in (self.donated if donate else ()):
            if isinstance(leaves[i], Array):
                leaves[i]._consume()
        outs = []
        for o, slot in zip(lw.program.outputs, lw.output_slots):
            if slot is None:
                outs.append(Array(TensorType((), o.dtype), host=o.array()))
                continue
            aval = TensorType(o.shape, o.dtype)
            if slot in self.host_outputs:
                outs.append(Array(aval, host=self.fixed[slot].read_staging()[: math.prod(o.shape)]))
                continue
            if slot in self.fixed:   # a const returned as is
                outs.append(Array(aval, host=lw.const_values[slot]))
                continue
            owned = out_owned.get(slot) or owned_in[lw.input_slots.index(slot)]
            outs.append(Array(aval, owned))
        return outs


def plan_donation(lowered: Lowered, donated: set) -> dict:
    """output slot -> donated input index whose buffer the output may overwrite: the output's
    first write comes after the input's last read, or in that same dispatch when it reads the
    input only at the thread's own element (an elementwise update in place). A writer that
    comes too early is moved after the last reader when nothing in between touches what it
    reads or writes (lowered.steps is reordered in place; kernels of one fusion height are
    independent, so this is common: the Adam step count is updated after the parameters)."""
    plan, taken = {}, set()
    steps = lowered.steps
    for i in sorted(donated):
        si = lowered.input_slots[i]
        if si in lowered.output_slots:
            continue
        for so in dict.fromkeys(lowered.output_slots):
            if so is None or so in taken or lowered.slots[so].kind != "output":
                continue
            if (lowered.slots[so].size, lowered.slots[so].dtype) != \
                    (lowered.slots[si].size, lowered.slots[si].dtype):
                continue
            last_read = max((k for k, st in enumerate(steps) if si in st.reads), default=-1)
            w = next((k for k, st in enumerate(steps) if so in st.writes), None)
            if w is None:
                continue
            if w < last_read and _can_move_after(steps, w, last_read):
                steps.insert(last_read, steps.pop(w))
                w = last_read
            if w > last_read or (w == last_read and si in steps[w].in_place_ok):
                plan[so] = i
                taken.add(so)
                break
    return plan


def _can_move_after(steps, w, r) -> bool:
    """Can steps[w] run after steps[w+1..r] instead of before them?"""
    mine = steps[w]
    for st in steps[w + 1: r + 1]:
        if set(mine.writes) & (set(st.reads) | set(st.writes)) or set(mine.reads) & set(st.writes):
            return False
    return True


# ----------------------------------------------------------------------------- eager ops

_eager_ops: dict = {}
_eager_programs: collections.OrderedDict = collections.OrderedDict()


def _on_device(values) -> bool:
    return any(isinstance(v, Array) and v._owned is not None for v in values)


def eager_apply(prim, values, params, out_types):
    """One vnp operation on concrete values outside any trace. On device Arrays it runs on
    their device (a one-eqn jitted program, cached per primitive and params); otherwise on the
    numpy interpreter."""
    from vkgrad.ir import interpreter
    if not _on_device(values):
        host = any(isinstance(v, Array) for v in values)
        outs = interpreter.apply(prim, [np.asarray(v) for v in values], params, out_types)
        return [Array(t, host=o) for t, o in zip(out_types, outs)] if host else outs
    key = (prim, params)
    j = _eager_ops.get(key)
    if j is None:
        j = _eager_ops[key] = jit(lambda *xs: prim.bind(*xs, **params), backend="vulkan")
    out = j(*values)
    return list(out) if prim.multiple_results else [out]


def eager_program(program, args):
    """A whole program evaluated outside any trace (e.g. the joint program of an eager
    vg.grad): on device Arrays, ONE compiled submission; otherwise the interpreter."""
    if not _on_device(args):
        return run_program(program, *[np.asarray(a) for a in args])
    entry = _eager_programs.get(id(program))
    if entry is None or entry[0] is not program:
        leaves, tree = tree_flatten(list(program.outputs))
        entry = (program, Compiled(program, tree, "vulkan", set()))
        _eager_programs[id(program)] = entry
        if len(_eager_programs) > 16:
            _eager_programs.popitem(last=False)
    return entry[1].runner(list(args))


core.eager_backend = eager_apply
core.eager_program_backend = eager_program


# ----------------------------------------------------------------------------- profile

@dataclass
class ProfileRow:
    kernel: str
    primitives: str
    shapes: str
    us: float
    percent: float


class Profile:
    """Per-kernel GPU time of one compiled program (vg.profile)."""

    def __init__(self, rows, total_us, submission_us):
        self.rows, self.total_us, self.submission_us = rows, total_us, submission_us

    def __str__(self):
        w = max([len(r.primitives) for r in self.rows] + [10])
        lines = [f"{'kernel':<16} {'primitives':<{min(w, 48)}} {'shapes':<24} {'GPU us':>9} {'%':>6}"]
        for r in self.rows:
            prims = r.primitives if len(r.primitives) <= 48 else r.primitives[:45] + "..."
            lines.append(f"{r.kernel:<16} {prims:<{min(w, 48)}} {r.shapes:<24} {r.us:9.1f} "
                         f"{r.percent:6.1f}")
        lines.append(f"{'total':<16} {'':<{min(w, 48)}} {'':<24} {self.total_us:9.1f} {100.0:6.1f}")
        lines.append(f"one call, wall time of the submission: {self.submission_us:.1f} us")
        return "\n".join(lines)

    __repr__ = __str__


def _describe(eqn) -> tuple[str, str]:
    if eqn.prim.name == "fused":
        body = eqn.params["body"]
        prims = ",".join(dict.fromkeys(e.prim.name for e in body.eqns))
    else:
        flags = [k for k, v in eqn.params.items() if v is True]
        prims = eqn.prim.name + (f"[{','.join(flags)}]" if flags else "")
    shapes = " ".join(type_str(o.shape, o.dtype) for o in eqn.outputs)
    return prims, shapes


def profile(step, *args, runs: int = 10, **kwargs) -> Profile:
    """Run a jitted function `runs` times with GPU timestamps (donation off, so the arguments
    stay valid) and return the per-kernel table: kernel, primitives, shapes, median GPU us, %."""
    import time
    if not isinstance(step, Jitted):
        step = jit(step)
    entry, leaves = step._compiled(args, kwargs)
    runner = entry.runner
    if not isinstance(runner, VulkanRunner):
        raise VkgradError("vg.profile times Vulkan kernels, but this program runs on the numpy "
                          f"interpreter ({entry.fallback_reason or 'numpy backend'})")
    runner(leaves, timestamps=True, donate=False)   # warm up: record, compile, first touch
    per_kernel, walls = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        runner(leaves, timestamps=True, donate=False)
        walls.append((time.perf_counter() - t0) * 1e6)
        timings = runner.last_run.last_timings_us
        # [uploads] dispatches [download]: the dispatches sit between the transfers
        trailing = 1 if timings[-1][0] == "download" else 0
        first = len(timings) - len(runner.lowered.steps) - trailing
        per_kernel.append([us for _, us in timings[first:first + len(runner.lowered.steps)]])
    med = np.median(np.asarray(per_kernel), axis=0)
    total = float(med.sum())
    rows = []
    for st, us in zip(runner.lowered.steps, med):
        prims, shapes = _describe(st.eqn)
        rows.append(ProfileRow(st.launch.name, prims, shapes, float(us),
                               100.0 * float(us) / total if total else 0.0))
    return Profile(rows, total, float(np.median(walls)))


def device_put(x, device=None):
    """An Array holding `x` on the (default) Vulkan device: uploaded now, once (one submission).
    Pytrees are mapped leaf by leaf."""
    from vkgrad.runtime import get_device
    from vkgrad.tracer.pytree import tree_map
    dev = get_device(device)
    pool = pool_of(dev)

    def put(leaf):
        if isinstance(leaf, Array) and leaf._owned is not None:
            return leaf
        aval = core.abstract_leaf(leaf, "device_put's argument")
        host = np.asarray(leaf, dtype=np_dtype(aval.dtype))
        owned = Owned(pool.take(max(1, host.size), aval.dtype), pool)
        owned.buffer.upload(host.reshape(-1) if host.size else np.zeros(1, host.dtype))
        return Array(aval, owned, host=host)

    return tree_map(put, x)
