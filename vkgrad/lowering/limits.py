"""Sizes a Vulkan device cannot hold, refused at plan time in the user's terms.

One storage buffer may be at most `maxStorageBufferRange` bytes (128 MiB on lavapipe; Kompute's
sizes are 32-bit, so never more than 4 GiB). A value larger than that would fail, or crash the
driver, when its buffer is allocated or bound; `check_plan` refuses it while planning, before
any buffer exists, naming the value's type and the user's line, so the process and the device
stay usable.
"""

from __future__ import annotations

import os

from vkgrad.errors import VkgradError
from vkgrad.ir.core import Var
from vkgrad.lowering.memory import value_bytes


class BufferSizeError(VkgradError, MemoryError):
    """An array larger than one Vulkan buffer of the device may be."""


class DeviceMemoryError(VkgradError, MemoryError):
    """A program whose buffers together need more memory than the device has."""


def check(type_, target, what: str, source: str | None = None) -> None:
    """BufferSizeError if a value of `type_` does not fit one buffer of the device `target`."""
    limit = getattr(target, "max_storage_buffer_range", None)
    nbytes = value_bytes(type_)
    if limit and nbytes > limit:
        raise BufferSizeError(
            f"{what} {type_} needs {_size(nbytes)} in one buffer, and {target.name} allows at most "
            f"{_size(limit)} per buffer (maxStorageBufferRange): make it smaller (a smaller "
            f"batch, or split it in chunks), or {numpy_advice()}", source=source)


def numpy_advice() -> str:
    """How to run on the interpreter instead, without advising what is already set: under
    VKGRAD_BACKEND=numpy, only a call that asked for Vulkan itself (backend="vulkan", or a
    device named) reaches a Vulkan limit."""
    if os.environ.get("VKGRAD_BACKEND", "").strip().lower() == "numpy":
        return ('run this call on the numpy interpreter: VKGRAD_BACKEND=numpy is set, but the '
                'call asked for Vulkan (backend="vulkan" in vg.jit, or a device given to '
                'vg.device_put); leave that out')
    return "run on the numpy interpreter (VKGRAD_BACKEND=numpy)"


def check_plan(program, raw, temps: dict, target) -> None:
    """Every value the dispatches `raw` bind (lower.py's _Builder.raw), and every input and
    constant, fits one buffer."""
    if target is None:
        return
    names = program.arg_names
    for i, v in enumerate(program.inputs):
        check(v.type, target, f"argument {names[i] if i < len(names) else i}:")
    for v, _ in program.consts:
        check(v.type, target, "a captured constant:")
    for launch, refs, e, *_ in raw:
        body = e.params.get("body")
        inner = {o: b for b in body.eqns for o in b.outputs} if body is not None else {}
        for r in refs:
            if isinstance(r, Var):
                made = inner.get(r, e)
                check(r.type, target, f"the result of {made.prim.name}:", made.source)
            elif r in temps:
                check(temps[r].type, target, f"a temporary of kernel {launch.name}:", e.source)


def check_memory(lowered, target) -> None:
    """DeviceMemoryError if the buffers of one call of `lowered` (every buffer of a call
    exists for all of it: arguments, results, constants, scratch) need more than the device's
    largest device-local memory heap, naming the largest values and their lines."""
    limit = getattr(target, "device_local_bytes", 0)
    parts = lowered.memory()
    peak = parts["peak"]
    if not limit or peak <= limit:
        return
    biggest = sorted(((s.nbytes, v) for s in lowered.slots for v, _, _ in s.values[:1]
                      if isinstance(v, Var)), key=lambda t: -t[0])[:3]
    named = "; ".join(f"{v.type} {_amount(n)}" + _line_of(lowered, v) for n, v in biggest)
    raise DeviceMemoryError(
        f"{lowered.program.name} needs {_amount(peak)} of device memory at once (arguments "
        f"{_amount(parts['arguments'])}, results {_amount(parts['outputs'])}, scratch "
        f"{_amount(parts['scratch'])}), and {target.name} has {_amount(limit)} (its largest "
        f"device-local heap); the largest buffers: {named}. Make the batch smaller, donate "
        f"arguments the step replaces (donate_argnums), or {numpy_advice()}")


def _line_of(lowered, v) -> str:
    for st in lowered.steps:
        body = st.eqn.params.get("body")
        for e in (body.eqns if body is not None else (st.eqn,)):
            if v in e.outputs and e.source:
                return f" (at {e.source})"
    return ""


def _amount(nbytes: int) -> str:
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.0f} MiB ({nbytes} bytes)"
