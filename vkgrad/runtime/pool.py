"""Device buffers shared by Arrays, and the pool they return to.

An `Owned` holds one device buffer for the Arrays that share it (a reshape, an output that is
an input); `users` counts those live Arrays, so a donated buffer is overwritten only when the
donated Array is its only user. When the last of them is gone, and no pending submission uses
it, the buffer goes back to its device's `BufferPool`, and the next call that needs a buffer of
that size takes it from there (so a training loop reuses the same few buffers, and its recorded
sequences with them).
"""

from __future__ import annotations

from vkgrad.dtypes import np_dtype
from vkgrad.runtime.vulkan import device_dtype


class Owned:
    """`writer`: the last submission that writes the buffer (reading it waits for that one).
    Every pending submission that uses the buffer holds its Owned, so the buffer returns to the
    pool only after the last of them is done (vkgrad/runtime/inflight.py)."""

    __slots__ = ("buffer", "pool", "users", "writer", "__weakref__")

    def __init__(self, buffer, pool):
        self.buffer, self.pool, self.users, self.writer = buffer, pool, 0, None

    def wait(self) -> None:
        """Wait until the submission that writes this buffer is done."""
        if self.writer is not None:
            self.writer.wait()

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
        stack = self.free.get((size, device_dtype(np_dtype(dtype))))
        if stack:
            return stack.pop()
        return self.device.buffer(size, np_dtype(dtype), "device")

    def owned(self, size: int, dtype: str) -> Owned:
        return Owned(self.take(size, dtype), self)

    def put(self, buffer) -> None:
        self.free.setdefault((buffer.size, buffer.dtype), []).append(buffer)


_pools: dict = {}


def pool_of(device) -> BufferPool:
    """The buffer pool of `device` (one per device and process)."""
    if device not in _pools:
        _pools[device] = BufferPool(device)
    return _pools[device]
