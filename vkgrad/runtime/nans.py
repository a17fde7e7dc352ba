"""NaN hunting: `vg.debug_nans(True)` or VKGRAD_DEBUG_NANS=1 (as JAX's `jax_debug_nans`).

On: every call of a jitted program checks its float results for NaN/Inf. On Vulkan, one small
kernel per float result (nan_check.comp: one workgroup counting non-finite elements into one
word) is appended to the call's own recorded sequence, and the words come back with the call's
small results: no second submission, no download of the results. The runner keeps a host copy
of the call's arguments (a donated argument's buffer is overwritten by the call). When a word is
not zero, `hunt` re-runs the program eqn by eqn on the numpy interpreter from those copies and
finds the first eqn whose inputs are finite and whose outputs are not: the `NaNError` (a
`FloatingPointError`) names its primitive, whether it is in the forward or the backward part,
its shapes and the user's file:line. Fused kernels are entered: their bodies are the optimized
program's eqns, each with its own source line.

Off (the default): no extra kernel is recorded and nothing is copied; a call reads one flag.
"""

from __future__ import annotations

import os

import numpy as np

from vkgrad.dtypes import bfloat16, storage_words, type_str
from vkgrad.ir.core import Literal, Program
from vkgrad.ir.interpreter import apply
from vkgrad.lowering.launch import Launch
from vkgrad.primitives.compiler import fused_p
from vkgrad.runtime.errors import NaNError

_on = [None]   # resolved on first use, so the environment variable is read when it matters


def enabled() -> bool:
    if _on[0] is None:
        _on[0] = os.environ.get("VKGRAD_DEBUG_NANS", "") not in ("", "0")
    return _on[0]


def debug_nans(on: bool = True) -> bool:
    """Check every jitted call's float results for NaN/Inf and, on one, raise a
    FloatingPointError naming the first eqn that made it (see the module docstring). Returns
    the previous setting; VKGRAD_DEBUG_NANS=1 turns it on from the start."""
    old = enabled()
    _on[0] = bool(on)
    return old


debug_infs = debug_nans   # jax.debug_infs: the one check above finds Inf as well as NaN


# the exponent bits of each element of a 32-bit word (all ones: inf or NaN), low and high half
_EXPONENTS = {"f32": (0x7f800000, 0x7f800000), "f16": (0x7c00, 0x7c000000),
              "bf16": (0x7f80, 0x7f800000)}


def check_launches(slots, lowered) -> list:
    """One nan_check dispatch per slot (binding the slot, then the flags buffer)."""
    return [Launch("nan_check", "nan_check.comp", 2, (1, 1, 1),
                   push=(storage_words(lowered.slots[s].size, lowered.slots[s].dtype), i,
                         *_EXPONENTS[lowered.slots[s].dtype]))
            for i, s in enumerate(slots)]


def checked_slots(lowered) -> list:
    """The float result buffers a call checks."""
    return sorted(s for s in set(lowered.output_slots) - {None}
                  if lowered.slots[s].dtype in _EXPONENTS and lowered.slots[s].kind != "const")


def finite(x) -> bool:
    x = np.asarray(x)
    return not _floating(x) or bool(np.isfinite(x).all())


def _floating(x) -> bool:
    return x.dtype.kind == "f" or x.dtype == bfloat16


def hunt(program: Program, args, what: str) -> NaNError:
    """The error for a call of `program` on `args` (host copies) whose results hold NaN/Inf;
    `what` says where they were seen."""
    head = f"{program.name}: {what} (debug_nans)"
    for k, a in enumerate(args):
        if not finite(a):
            return NaNError(f"{head}; argument {k} ({type_str(np.shape(a), program.inputs[k].dtype)}) "
                            "already holds NaN/Inf")
    try:
        _walk(program, list(args))
    except _Found as f:
        e, xs, outs = f.args
        part = "backward" if e.phase == "bwd" else "forward"
        ins = ", ".join(repr(x.item()) if isinstance(v, Literal) else type_str(x.shape, v.dtype)
                        for v, x in zip(e.inputs, xs))
        res = ", ".join(type_str(o.shape, o.dtype) for o in e.outputs)
        bad = sum(int((~np.isfinite(o)).sum()) for o in outs if _floating(o))
        where = f" in the derivative of {e.of}" if e.of else ""
        at = f" at {e.source}" if e.source else ""
        return NaNError(f"{head}; the first eqn to make one from finite inputs is "
                        f"{e.prim.name}{where}{at}: {e.prim.name}({ins}) -> {res} in the {part} "
                        f"part, {bad} non-finite element(s)",
                        primitive=e.prim.name, source=e.source)
    return NaNError(f"{head}; the numpy interpreter computes finite values from the same "
                    "arguments, so a kernel disagrees with it: vg.check_kernels(fun, *args) "
                    "shows which")


class _Found(Exception):
    pass


def _walk(program: Program, args) -> list:
    """Run `program` eqn by eqn (entering fused bodies); raise _Found(eqn, inputs, outputs) at
    the first eqn whose inputs are finite and whose outputs are not."""
    env = dict(zip(program.inputs, (np.asarray(a) for a in args)))
    env.update(program.consts)

    def read(x):
        return x.array() if isinstance(x, Literal) else env[x]

    for e in program.eqns:
        xs = [read(x) for x in e.inputs]
        if e.prim is fused_p:
            outs = _walk(e.params["body"], xs)
        else:
            outs = apply(e.prim, xs, e.params, [o.type for o in e.outputs])
            if all(map(finite, xs)) and not all(map(finite, outs)):
                raise _Found(e, xs, outs)
        env.update(zip(e.outputs, outs))
    return [read(o) for o in program.outputs]
