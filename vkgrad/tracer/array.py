"""vkgrad.Array: every concrete value vkgrad gives a user, as JAX's jax.Array is.

An Array is an abstract value (`aval`: shape, dtype) and where its data lives:
* host-backed: a read-only numpy array (the interpreter's results, `vnp.asarray` of host data,
  an eager vnp operation on them);
* device-backed: a view of a device buffer (an `Owned` of the runtime's pool, shared by the
  Arrays that view it), made by the execution layer (vkgrad/execution/array.py: jitted calls,
  vg.device_put, eager operations on device Arrays). Its host copy is made only when someone
  reads it (np.asarray, .item(), printing) and kept; small results of a jitted call come with a
  `future` (a HostResult) that holds their host data once the call's submission is done.

Where an Array lives is `x.device` (JAX's name): a Vulkan device, the same object as its entry
in vg.devices(), or HOST, the host memory the interpreter computes in; `x.devices()` is the set
of it and `x.sharding` a SingleDeviceSharding of it (one device holds all of every Array).

Arrays are immutable: `x[i] = v` is JAX's TypeError; `x.at[i].set(v)` returns a new Array.
Calls are asynchronous (docs/jit.md): an Array is ready when the submission that computes it is
done; reading it waits for that submission only, and `block_until_ready` waits without reading.

Operations on Arrays outside any trace run where the Arrays live (the trace core asks the
concrete array class: `_eager_apply`, `_eager_program`): on the interpreter for host Arrays, on
the device through the execution layer's `DeviceOps` (registered with `register_device`) when
one of them is on a device. This module is in the trace core's layer so that `import vkgrad`,
the interpreter and the transforms give Arrays without loading the runtime.
"""

from __future__ import annotations

import operator

import numpy as np

from vkgrad.dtypes import np_dtype, type_str
from vkgrad.errors import ArgumentError
from vkgrad.ir.core import TensorType
from vkgrad.ir import interpreter
from vkgrad.tracer import core
from vkgrad.tracer.core import ArrayOps, user_source
from vkgrad.tracer.pytree import tree_leaves

_interned: dict = {}


def intern(aval: TensorType) -> TensorType:
    """One TensorType object per distinct type, so a jitted call's guard compares avals by
    identity (vkgrad/execution/fastpath.py)."""
    return _interned.setdefault(aval, aval)


class HostDevice:
    """Where a host-backed Array lives: host memory, computed in by the numpy interpreter (JAX's
    CPU device, as its `platform` says)."""
    id = 0
    platform = "cpu"
    device_kind = "host (the numpy interpreter)"

    def __repr__(self) -> str:
        return "HostDevice(id=0)"

    def __str__(self) -> str:
        return "cpu:0"


HOST = HostDevice()


class SingleDeviceSharding:
    """JAX's jax.sharding.SingleDeviceSharding: all of an Array on one device, so it is fully
    replicated (no other copy differs) and fully addressable (this process holds it)."""
    __slots__ = ("_device", "memory_kind")
    is_fully_replicated = True
    is_fully_addressable = True
    num_devices = 1

    def __init__(self, device, *, memory_kind: str = "device"):
        self._device, self.memory_kind = device, memory_kind

    @property
    def device_set(self) -> set:
        return {self._device}

    def __eq__(self, other) -> bool:
        return (isinstance(other, SingleDeviceSharding) and other._device == self._device
                and other.memory_kind == self.memory_kind)

    def __hash__(self) -> int:
        return hash((self._device, self.memory_kind))

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"


# How many Arrays were made on a device buffer that another live Array views: a jitted call
# that repeats the last one's arguments takes its donations as safe while this stays the same
# (vkgrad/runtime/runners.py, _Repeat).
shares = [0]


class DeletedArrayError(ArgumentError):
    """An Array was read after a jitted call consumed (donated) its buffer, or after delete()."""


class Array(ArrayOps):
    __slots__ = ("_aval", "_owned", "_host", "_future", "_deleted", "__weakref__")
    __array_priority__ = 100   # ndarray (op) Array defers to Array's operators

    def __init__(self, aval: TensorType, owned=None, host=None, future=None):
        self._aval = aval
        self._owned = owned
        self._host = None
        self._future = future     # a HostResult: host data once its submission is done
        self._deleted = False
        if owned is not None:
            if owned.users:   # a second view of one buffer: donating either needs a check
                shares[0] += 1
            owned.users += 1
        if host is not None:
            self._set_host(host)

    @classmethod
    def from_host(cls, aval: TensorType, host: np.ndarray) -> "Array":
        """A host-backed Array taking `host` (of aval's shape and dtype, owned by no one else:
        an interpreter result) as is: the eager path's constructor, without __init__'s checks."""
        a = object.__new__(cls)
        a._aval, a._owned, a._future, a._deleted = aval, None, None, False
        host.flags.writeable = False
        a._host = host
        return a

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

    @property
    def device(self):
        """The device holding this Array: a Vulkan device (as vg.devices() lists it) or HOST."""
        self._check()
        return HOST if self._owned is None else _device[0].device_of(self._owned)

    def devices(self) -> set:
        """The set of devices holding this Array (one), as JAX's Array.devices()."""
        return {self.device}

    @property
    def sharding(self) -> SingleDeviceSharding:
        return SingleDeviceSharding(self.device)

    def _check(self) -> None:
        if self._deleted:
            raise DeletedArrayError(
                f"this {type_str(self._aval.shape, self._aval.dtype)} Array was donated to a "
                "jitted call (donate_argnums) or deleted, and its buffer now holds something "
                "else; use the call's result instead", source=user_source())

    def _value(self) -> np.ndarray:
        if self._host is None:
            self._check()
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

    def item(self, *args):
        return self._value().item(*args)

    def tolist(self):
        return self._value().tolist()

    def __iter__(self):   # rows from the host copy: an eager getitem per row would be slow
        if not self.shape:
            raise ArgumentError("iteration over a 0-d array", source=user_source())
        aval = intern(TensorType(self.shape[1:], self._aval.dtype))
        return (Array.from_host(aval, np.array(row)) for row in self._value())

    def copy(self) -> "Array":
        """The same values (an Array is immutable, so sharing them is a copy)."""
        return self

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

    def __format__(self, spec):   # '' is str(), as Python's rule is (a 0-d f32 prints as f32)
        if not spec:
            return str(self)
        return format(self._value(), spec) if self.ndim == 0 else format(str(self), spec)

    def __repr__(self) -> str:
        if self._deleted:
            return f"Array(<deleted>, {type_str(self._aval.shape, self._aval.dtype)})"
        return "Array(" + np.array2string(self._value(), separator=", ", prefix="Array(") + \
            f", dtype={np_dtype(self._aval.dtype)})"

    def __str__(self) -> str:
        return str(self._value())

    def __reduce__(self):   # pickles (and deep-copies) as its values
        return (_from_numpy, (np.asarray(self._value()),))

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

    def copy_to_host_async(self) -> None:
        """Bring the values to the host (JAX's Array.copy_to_host_async). vkgrad's download is
        not asynchronous: this waits for the call that computes the Array and copies now, so
        later reads (np.asarray, print) take the copy."""
        self._value()

    def is_deleted(self) -> bool:
        return self._deleted

    def delete(self) -> None:
        delete_all((self,))

    def __del__(self):
        if self._owned is not None:
            self._owned.users -= 1

    # --- operations on concrete values (the trace core calls these; see tracer/core.py)
    @staticmethod
    def _eager_apply(prim, values, params, out_types) -> list:
        """One vnp operation outside any trace: on the device of the Arrays among `values` (the
        execution layer's DeviceOps), else on the interpreter."""
        if _on_device(values):
            return _device[0].apply(prim, values, params, out_types)
        outs = interpreter.apply(prim, [np.asarray(v) for v in values], params, out_types)
        return [Array.from_host(intern(t), o) for t, o in zip(out_types, outs)]

    @staticmethod
    def _eager_program(program, values) -> list:
        """A whole program outside any trace: ONE compiled submission on the device of the
        Arrays among `values`, or the interpreter when none is on a device."""
        if _on_device(values):
            return _device[0].program(program, values)
        outs = interpreter.run_program(program, *[np.asarray(v) for v in values])
        return [Array.from_host(intern(o.type), h) for o, h in zip(program.outputs, outs)]


# The runtime's writers of many objects' slots at once (kp patch 0014: kp.new_slotted,
# set_slots, add_to_slots), registered when a device opens; without them, the loops in Python
_slots: list = [None]
_FRESH = {"_host": None, "_future": None, "_deleted": False}
_GONE = {"_deleted": True, "_owned": None, "_host": None, "_future": None}


def register_slot_writer(writer) -> None:
    """`writer.new_slotted(cls, n, columns, constants)`, `writer.set_slots(objects,
    constants)` and `writer.add_to_slots(objects, name, delta)`: what `views` and `delete_all`
    use instead of a Python call per Array (a jitted training step makes and deletes one per
    parameter and optimizer-state leaf every call)."""
    _slots[0] = writer


def views(avals, owned) -> list:
    """One device-backed Array per (aval, Owned), as Array(aval, owned) makes it."""
    w = _slots[0]
    if w is None:
        return list(map(Array, avals, owned))
    owned = list(owned)
    arrays = w.new_slotted(Array, len(owned), {"_aval": list(avals), "_owned": owned}, _FRESH)
    shares[0] += w.add_to_slots(owned, "users", 1)   # second views, as in Array.__init__
    return arrays


def delete_all(arrays, distinct: bool = False) -> None:
    """Delete each of `arrays` (Array.delete, one loop: a jitted call consumes every donated
    Array of a training step's parameters and optimizer state). `distinct`: the caller knows
    no Array is in `arrays` twice (else each is deleted once, as the loop does)."""
    w = _slots[0]
    if w is None:
        for a in arrays:
            a._deleted = True
            owned = a._owned
            if owned is not None:
                owned.users -= 1
                a._owned = None
            a._host = a._future = None
        return
    arrays = list(arrays)
    if not distinct:
        arrays = list(dict(zip(map(id, arrays), arrays)).values())   # each once, as the loop does
    w.add_to_slots(list(map(_owned_of, arrays)), "users", -1)     # (None skipped)
    w.set_slots(arrays, _GONE)


_owned_of = operator.attrgetter("_owned")


def _on_device(values) -> bool:
    return any(type(v) is Array and v._owned is not None for v in values)


def _from_numpy(value: np.ndarray) -> Array:
    return Array(intern(TensorType(value.shape, core.dtype_name(value.dtype))), host=value)


def host_array(x) -> Array:
    """A host-backed Array of `x` (numpy data or a Python scalar, already in a dtype vkgrad
    computes in), copied: changing `x` later does not change the Array."""
    h = np.array(x, copy=True)
    return Array.from_host(intern(TensorType(h.shape, core.dtype_name(h.dtype))), h)


def block_until_ready(tree):
    """Wait until every Array in `tree` (a pytree) is computed; returns `tree`, as in JAX."""
    for leaf in tree_leaves(tree):
        if isinstance(leaf, Array):
            leaf.block_until_ready()
    return tree


_device: list = [None]   # the execution layer's DeviceOps (apply, program), once it is loaded


def register_device(ops) -> None:
    """The execution layer's eager operations on device Arrays: `ops.apply(prim, values, params,
    out_types)` and `ops.program(program, values)`, each returning Arrays, and
    `ops.device_of(owned)`, the device a buffer is on."""
    _device[0] = ops


core.register_array(Array)
