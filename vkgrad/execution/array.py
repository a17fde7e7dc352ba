"""vkgrad.Array: a concrete array that lives on a backend, resident between calls; and `call`,
which runs a compiled program on Arrays and host data and returns Arrays.

On Vulkan an Array is a view (shape, dtype) of a device buffer (an `Owned`, shared by the Arrays
that view it); its host copy is made only when someone reads it (np.asarray, .item(), printing)
and kept. Small results of a jitted call (the loss) are copied to the host inside the call's own
submission, so reading them costs nothing more. On the numpy backend an Array just holds its
numpy value. Arrays are immutable.

Calls are asynchronous (docs/jit.md): an Array is ready when the submission that computes it is
done. Reading it waits for that submission only; `block_until_ready` waits without reading.

vnp operations on Arrays run where the Arrays live (`_eager_apply`; the trace core asks the
array's class): on a device, as a compiled one-eqn program (vkgrad/execution/eager.py).
"""

from __future__ import annotations

import itertools

import numpy as np

from vkgrad.dtypes import dtype_name, np_dtype, type_str
from vkgrad.errors import ArgumentError
from vkgrad.execution import eager
from vkgrad.execution.fastpath import intern
from vkgrad.ir.core import TensorType
from vkgrad.ir.interpreter import apply as interpret, run_program
from vkgrad.runtime.inflight import HostResult
from vkgrad.runtime.pool import Owned
from vkgrad.tracer.core import ArrayOps, user_source
from vkgrad.tracer.pytree import tree_leaves


class DeletedArrayError(ArgumentError):
    """An Array was read after a jitted call consumed (donated) its buffer, or after delete()."""


class Array(ArrayOps):
    __slots__ = ("_aval", "_owned", "_host", "_future", "_deleted", "__weakref__")
    __array_priority__ = 100   # ndarray (op) Array defers to Array's operators

    def __init__(self, aval: TensorType, owned: Owned | None = None, host=None, future=None):
        self._aval = aval
        self._owned = owned
        self._host = None
        self._future = future     # a HostResult: host data once its submission is done
        self._deleted = False
        if owned is not None:
            owned.users += 1
        if host is not None:
            self._set_host(host)

    def _set_host(self, host) -> None:
        # a device buffer holds at least one element: an empty result's is one too many
        h = np.asarray(host).reshape(-1)[: self._aval.size].reshape(self._aval.shape)
        h = h.astype(np_dtype(self._aval.dtype), copy=False)
        h.flags.writeable = False   # np.asarray(a) must not let anyone change an immutable array
        self._host = h

    @property
    def aval(self) -> TensorType:
        return self._aval

    @property
    def buffer(self):
        """The device buffer (None for an Array that lives only on the host)."""
        self._check()
        return self._owned.buffer if self._owned is not None else None

    def _check(self) -> None:
        if self._deleted:
            raise DeletedArrayError(
                f"this {type_str(self._aval.shape, self._aval.dtype)} Array was donated to a jitted "
                "call (donate_argnums) or deleted, and its buffer now holds something else; use "
                "the call's result instead", source=user_source())

    def _value(self) -> np.ndarray:
        self._check()
        if self._host is None:
            if self._future is not None:
                self._set_host(self._future.result())
                self._future = None
            else:
                self._owned.wait()
                self._set_host(self._owned.buffer.download()[: self.size])
        return self._host

    # --- reading
    def __array__(self, dtype=None, copy=None):
        v = self._value()
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        return v.copy() if copy else v

    def numpy(self) -> np.ndarray:
        return np.array(self._value())

    def item(self):
        return self._value().item()

    def tolist(self):
        return self._value().tolist()

    def __float__(self):
        return float(self._value())

    def __int__(self):
        return int(self._value())

    def __index__(self):
        return int(self._value())

    def __bool__(self):
        return bool(self._value())

    def __complex__(self):
        return complex(self._value())

    def __format__(self, spec):
        return format(self._value(), spec) if self.ndim == 0 else format(str(self), spec)

    def __repr__(self) -> str:
        if self._deleted:
            return f"Array(<deleted>, {type_str(self._aval.shape, self._aval.dtype)})"
        return "Array(" + np.array2string(self._value(), separator=", ", prefix="Array(") + \
            f", dtype={np_dtype(self._aval.dtype)})"

    def __str__(self) -> str:
        return str(self._value())

    # --- lifetime
    def block_until_ready(self) -> "Array":
        """Wait until the call that computes this Array is done (its value is not read)."""
        self._check()
        if self._future is not None:
            self._set_host(self._future.result())
            self._future = None
        elif self._owned is not None:
            self._owned.wait()
        return self

    def is_deleted(self) -> bool:
        return self._deleted

    def delete(self) -> None:
        self._deleted = True
        if self._owned is not None:
            self._owned.users -= 1
        self._owned = None
        self._host = self._future = None

    def __del__(self):
        if self._owned is not None:
            self._owned.users -= 1

    # --- operations on concrete values (the trace core calls these; see tracer/core.py)
    @staticmethod
    def _eager_apply(prim, values, params, out_types) -> list:
        """One vnp operation outside any trace: on the device of the Arrays among `values`, as a
        compiled one-eqn program; on the interpreter when none is on a device."""
        if not _on_device(values):
            outs = interpret(prim, [np.asarray(v) for v in values], params, out_types)
            return [Array(intern(t), host=o) for t, o in zip(out_types, outs)]
        types = [v.aval if isinstance(v, ArrayOps) else TensorType(v.shape, dtype_name(v.dtype))
                 for v in values]
        return call(eager.compiled_eqn(prim, params, tuple(types), tuple(out_types)), values)

    @staticmethod
    def _eager_program(program, values) -> list:
        """A whole program outside any trace: ONE compiled submission on the device of the
        Arrays among `values`, or the interpreter when none is on a device."""
        if not _on_device(values):
            return run_program(program, *[np.asarray(v) for v in values])
        return call(eager.compiled_program(program), values)


_OWNED, _NONE = itertools.repeat("_owned"), itertools.repeat(None)


def _on_device(values) -> bool:
    return any(isinstance(v, Array) and v._owned is not None for v in values)


def call(compiled, leaves, *, donated=(), timestamps=False) -> list:
    """Run `compiled` on `leaves` (Arrays, numpy data, scalars): an Array already on the
    runner's device is bound as is, anything else is host data; each donated Array is consumed.
    Returns one Array per program output, without waiting for the device."""
    runner = compiled.runner
    if runner.device is None:
        inputs = [np.asarray(x) for x in leaves]
    else:   # an Array's device buffer (the runner checks its device), else host data
        inputs = list(map(getattr, leaves, _OWNED, _NONE))
        if None in inputs:   # host data, a host-only Array, a deleted one (which raises)
            inputs = [np.asarray(x) if o is None else o for x, o in zip(leaves, inputs)]
    outs = runner.run(inputs, donate=bool(donated), timestamps=timestamps)
    for i in donated:
        if type(leaves[i]) is Array:
            leaves[i].delete()
    return [Array(aval, x) if type(x) is Owned else
            Array(aval, future=x) if type(x) is HostResult else Array(aval, host=x)
            for aval, x in zip(compiled.out_avals, outs)]


def block_until_ready(tree):
    """Wait until every Array in `tree` (a pytree) is computed; returns `tree`, as in JAX."""
    for leaf in tree_leaves(tree):
        if isinstance(leaf, Array):
            leaf.block_until_ready()
    return tree
