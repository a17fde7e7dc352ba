"""vkgrad.Array: a concrete array that lives on a backend, resident between calls.

On Vulkan an Array is a view (shape, dtype) of a device buffer; its host copy is made only when
someone reads it (np.asarray, .item(), printing) and kept. Small results of a jitted call (the
loss) are copied to the host inside the call's own submission, so reading them costs nothing
more. On the numpy backend an Array just holds its numpy value.

Arrays are immutable. A buffer can be shared by several Arrays (a reshape, an output that is an
input); it returns to its device's pool when the last of them is gone, and the next call that
needs a buffer of that size takes it from there (so a training loop reuses the same few buffers,
and its recorded sequences with them).
"""

from __future__ import annotations

import numpy as np

from vkgrad.errors import ArgumentError
from vkgrad.ir.core import TensorType, np_dtype, type_str
from vkgrad.tracer.core import ArrayOps, user_source


class DeletedArrayError(ArgumentError):
    """An Array was read after a jitted call consumed (donated) its buffer, or after delete()."""


class Owned:
    """Holds a device buffer for the Arrays that share it; gives it back to the pool when the
    last of them is gone. `users` counts the live Arrays on it: a donated buffer may be
    overwritten only when the donated Array is its only user."""
    __slots__ = ("buffer", "pool", "users", "__weakref__")

    def __init__(self, buffer, pool):
        self.buffer, self.pool, self.users = buffer, pool, 0

    def __del__(self):
        try:
            self.pool.put(self.buffer)
        except Exception:   # interpreter shutdown: the pool may be gone already
            pass


class BufferPool:
    """Free device buffers by (size, dtype), last in first out."""

    def __init__(self, device):
        self.device = device
        self.free: dict = {}

    def take(self, size: int, dtype: str):
        """A buffer for `size` elements of IR dtype `dtype` (bool is stored as uint32)."""
        from vkgrad.runtime.vulkan import device_dtype
        stack = self.free.get((size, device_dtype(np_dtype(dtype))))
        if stack:
            return stack.pop()
        return self.device.buffer(size, np_dtype(dtype), "device")

    def put(self, buffer) -> None:
        self.free.setdefault((buffer.size, buffer.dtype), []).append(buffer)


class Array(ArrayOps):
    __slots__ = ("_aval", "_owned", "_host", "_deleted", "__weakref__")
    __array_priority__ = 100   # ndarray (op) Array defers to Array's operators

    def __init__(self, aval: TensorType, owned: Owned | None = None, host=None):
        self._aval = aval
        self._owned = owned
        self._host = None
        self._deleted = False
        if owned is not None:
            owned.users += 1
        if host is not None:
            self._set_host(host)

    def _set_host(self, host) -> None:
        h = np.asarray(host).reshape(self._aval.shape).astype(np_dtype(self._aval.dtype), copy=False)
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
        """Calls run to completion before they return (one fence wait), so this is a no-op kept
        for JAX compatibility."""
        self._check()
        return self

    def is_deleted(self) -> bool:
        return self._deleted

    def delete(self) -> None:
        self._deleted = True
        if self._owned is not None:
            self._owned.users -= 1
        self._owned = None
        self._host = None

    def __del__(self):
        if self._owned is not None:
            self._owned.users -= 1

    def _consume(self) -> Owned | None:
        """Donation: hand the buffer over and become unusable."""
        owned = self._owned
        self.delete()
        return owned
