"""The numpy reference interpreter: the executable meaning of every primitive.

`impls[prim](*arrays, **params)` is the primitive's numpy implementation (registered beside the
primitive's definition in primitives.py). `run_program(program, *arrays)` runs a whole program;
`apply(prim, values, params, out_types)` runs one primitive and checks its result against the
shape rule's types, so an implementation that disagrees with its shape rule is caught at once.
Every later stage (constant folding, the Vulkan kernels) is checked against this.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from vkgrad.errors import IRError, MissingRuleError, VkgradError
from vkgrad.ir.core import Literal, Program, TensorType, Var, np_dtype
from vkgrad.dtypes import HALF_DTYPES

impls: dict = {}   # Primitive -> fn(*np.ndarray, **params) -> np.ndarray (or list if multiple)


_F32 = np.dtype(np.float32)
_HALVES = frozenset(np_dtype(d) for d in HALF_DTYPES)


def _widened(x):
    """A 16-bit float operand as f32: every primitive computes on them in f32 (exact: f32
    holds every f16 and bf16 value) and its result is rounded to the 16-bit dtype once, so a
    sum or matmul accumulates in f32, as JAX does on GPUs and as vkgrad's kernels do."""
    return x.astype(_F32) if getattr(x, "dtype", None) in _HALVES else x


def apply(prim, values, params, out_types: list[TensorType]) -> list[np.ndarray]:
    """Evaluate one primitive on numpy values; results cast to, and checked against, out_types
    (16-bit float operands computed in f32, `_widened`)."""
    values = [_widened(v) for v in values]
    impl: Callable | None = impls.get(prim)
    if impl is None:
        raise MissingRuleError(f"primitive '{prim.name}' has no numpy implementation",
                               primitive=prim.name, stage="interpretation")
    with np.errstate(all="ignore"):   # inf/nan follow IEEE like the GPU; no numpy warnings
        try:
            res = impl(*values, **params)
        except VkgradError:
            raise
        except Exception as e:   # an implementation bug: say which primitive, never bare
            raise IRError(f"numpy implementation of '{prim.name}' failed: "
                          f"{type(e).__name__}: {e}", primitive=prim.name,
                          stage="interpretation") from e
    res = list(res) if prim.multiple_results else [res]
    out = []
    for r, t in zip(res, out_types):
        r = np.asarray(r)
        if r.shape != tuple(t.shape):
            raise IRError(f"numpy implementation of '{prim.name}' returned shape {r.shape}, "
                          f"its shape rule says {t}", primitive=prim.name,
                          stage="interpretation")
        # A fresh, writable, contiguous array: broadcast views must not leak to users. (A
        # 16-bit result overflows to inf as IEEE rounding says: no numpy warning.)
        with np.errstate(over="ignore"):
            out.append(np.array(r, dtype=np_dtype(t.dtype), copy=True))
    return out


def run_program(program: Program, *args) -> list[np.ndarray]:
    """Run `program` on numpy arrays (one per input); returns the list of outputs."""
    if len(args) != len(program.inputs):
        raise IRError(f"program {program.name} takes {len(program.inputs)} inputs, "
                      f"got {len(args)}")
    env: dict[Var, np.ndarray] = {}
    for v, a in zip(program.inputs, args):
        a = np.asarray(a)
        if a.shape != v.shape:
            raise IRError(f"program {program.name}: input of type {v.type} got an array "
                          f"of shape {a.shape}")
        env[v] = a.astype(np_dtype(v.dtype), copy=False)
    for v, a in program.consts:
        env[v] = a

    def read(x):
        return x.array() if isinstance(x, Literal) else env[x]

    for eqn in program.eqns:
        try:
            outs = apply(eqn.prim, [read(x) for x in eqn.inputs], eqn.params,
                         [o.type for o in eqn.outputs])
        except VkgradError as e:
            raise e.with_context(source=eqn.source)
        env.update(zip(eqn.outputs, outs))
    return [np.array(read(o)) for o in program.outputs]
