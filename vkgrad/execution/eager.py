"""Eager execution on device Arrays: what a vnp operation, or a whole program evaluated outside
any trace (the joint program of an eager `vg.grad`), compiles to when its arguments live on a
Vulkan device. One compiled program per primitive, params and argument types (or per program),
cached; vkgrad.Array runs them through the DeviceOps that vkgrad/execution/array.py registers
(`Array._eager_apply`, `Array._eager_program` in vkgrad/tracer/array.py).
"""

from __future__ import annotations

from vkgrad.ir.core import Eqn, Program, Var
from vkgrad.execution.compiled import Compiled
from vkgrad.lru import LRU
from vkgrad.tracer.pytree import tree_flatten

MAX_CACHED = 256

_eqns = LRU(MAX_CACHED)
_programs = LRU(MAX_CACHED)


def _remember(cache, key, make):
    entry = cache.get(key)
    return cache.put(key, make()) if entry is None else entry


def compiled_eqn(prim, params, in_types, out_types) -> Compiled:
    """One primitive applied to arguments of `in_types`, compiled for the Vulkan device."""
    def make():
        ins = [Var(t.shape, t.dtype) for t in in_types]
        outs = [Var(t.shape, t.dtype) for t in out_types]
        program = Program(prim.name, ins, outs, [Eqn(prim, ins, params, outs)])
        return Compiled(program, tree_flatten(outs)[1], "vulkan", ())
    return _remember(_eqns, (prim, params, tuple(in_types)), make)


def compiled_program(program: Program) -> Compiled:
    """A whole program, compiled for the Vulkan device (ONE submission per run)."""
    def make():
        return (program, Compiled(program, tree_flatten(list(program.outputs))[1], "vulkan", ()))
    entry = _remember(_programs, id(program), make)
    if entry[0] is not program:   # an id reused by a new program: compile that one
        _programs.pop(id(program))
        entry = _remember(_programs, id(program), make)
    return entry[1]
