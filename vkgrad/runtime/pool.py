"""Device buffers shared by Arrays and programs, and the pool they return to.

An `Owned` holds one device buffer for the Arrays that share it (a reshape, an output that is
an input); `users` counts those live Arrays, so a donated buffer is overwritten only when the
donated Array is its only user. When the last of them is gone, and no pending submission uses
it, the buffer goes back to its device's `BufferPool`, and the next call that needs a buffer of
that size takes it from there (so a training loop reuses the same few buffers, and its recorded
sequences with them). A compiled program's own scratch buffers (its intermediates, a scan's
stacked residuals) are Owned by its runner and come back when the runner is gone, so compiling
a program like one before it allocates nothing: a 10,000-step GRU's gradient holds GBs of
stacked residuals, and allocating device memory costs time by the byte on some drivers. Free
buffers above the pool's high-water mark go back to Vulkan.
"""

from __future__ import annotations

import weakref

from vkgrad.dtypes import np_dtype
from vkgrad.runtime.vulkan import counters, device_dtype

# The pool's high-water mark (BufferPool.mark): free buffers stay pooled up to max(KEEP_BYTES,
# twice the most bytes of pooled buffers one recent call bound) in bytes and max(KEEP_BUFFERS,
# twice the most buffers one recent call bound) in number, "recent" being the last
# RECENT_CALLS to 2 * RECENT_CALLS calls; the rest go back to Vulkan. The count matters as
# much as the bytes: a buffer is two memory allocations (device and staging), and many drivers
# allow 4096 (maxMemoryAllocationCount). docs/long_runs.md.
KEEP_BYTES = 64 << 20
KEEP_BUFFERS = 64
RECENT_CALLS = 100


# How many watched Owned have died: a runner that remembers the last call's arguments by id
# (vkgrad/runtime/runners.py, _Repeat) watches them, and trusts an id while this stays the same
# (an id is reused only after its object is gone).
watched_deaths = [0]


class Owned:
    """`writer`: the last submission that writes the buffer (reading it waits for that one).
    Every pending submission that uses the buffer holds its Owned, so the buffer returns to the
    pool only after the last of them is done (vkgrad/runtime/inflight.py). `watched`: a runner
    remembers it by id (watched_deaths)."""

    __slots__ = ("buffer", "pool", "users", "writer", "watched", "__weakref__")

    def __init__(self, buffer, pool):
        self.buffer, self.pool, self.users, self.writer = buffer, pool, 0, None
        self.watched = False

    def wait(self) -> None:
        """Wait until the submission that writes this buffer is done."""
        if self.writer is not None:
            self.writer.wait()

    def __del__(self):
        if self.watched:
            watched_deaths[0] += 1
        try:
            self.pool.put(self.buffer)
        except Exception:   # interpreter shutdown: the pool may be gone already
            pass


class BufferPool:
    """Free device buffers by (size, dtype), last in first out, up to a high-water mark.

    The mark (above): twice the footprint of the largest recent call, where a call's footprint
    is the bytes and number of the pooled buffers it binds (arguments and results), and at
    least KEEP_BYTES and KEEP_BUFFERS. At the start of each call
    (`note_call`), free buffers above the mark are released, least recently returned first:
    a training loop keeps the few buffers it cycles through, while the buffers of a large
    one-off computation go back to Vulkan once the loop has run for a while without them.
    A released buffer is freed when nothing else holds it: the runners that recorded
    sequences binding it drop those (`forget`), so those hold it no longer either. A runner
    not called for a whole window of RECENT_CALLS calls drops its recorded copies that have
    argument slots of their own (`release_slots`).
    """

    def __init__(self, device):
        self.device = device
        self.free: dict = {}
        self.order: dict = {}          # free buffer -> None, least recently returned first
        self.free_bytes = 0
        self.runners = weakref.WeakSet()   # who to tell when a buffer is released
        self._calls, self._peak, self._last_peak = 0, (0, 0), (0, 0)
        self.windows = 0               # windows of RECENT_CALLS calls so far

    def take(self, size: int, dtype: str, kind: str = "device"):
        """A buffer for `size` elements of IR dtype `dtype` (bool is stored as uint32), of
        `kind` (vulkan.Buffer's: "device" with a staging copy, "scratch" without)."""
        return self.take_keyed((size, device_dtype(np_dtype(dtype)), kind), size, dtype)

    @staticmethod
    def key(size: int, dtype: str, kind: str = "device") -> tuple:
        """What `take_keyed` takes for a buffer like take(size, dtype, kind)'s (computed once
        by a runner: a call takes its pooled result buffers by these)."""
        return (size, device_dtype(np_dtype(dtype)), kind)

    def take_keyed(self, key: tuple, size: int, dtype: str):
        """take(size, dtype, key[2]) with its key (`BufferPool.key`) computed already."""
        stack = self.free.get(key)
        if stack:
            buffer = stack.pop()
            del self.order[buffer]
            self.free_bytes -= buffer.nbytes
            return buffer
        counters["pool_misses"] += 1
        return self.device.buffer(size, np_dtype(dtype), key[2])

    def owned(self, size: int, dtype: str, kind: str = "device") -> Owned:
        return Owned(self.take(size, dtype, kind), self)

    def owned_keyed(self, key: tuple, size: int, dtype: str) -> Owned:
        return Owned(self.take_keyed(key, size, dtype), self)

    def put(self, buffer) -> None:
        self.free.setdefault((buffer.size, buffer.dtype, buffer.kind), []).append(buffer)
        self.order[buffer] = None
        self.free_bytes += buffer.nbytes

    def mark(self) -> tuple[int, int]:
        """The bytes and the number of free buffers the pool keeps."""
        return (max(KEEP_BYTES, 2 * max(self._peak[0], self._last_peak[0])),
                max(KEEP_BUFFERS, 2 * max(self._peak[1], self._last_peak[1])))

    def note_call(self, footprint: tuple[int, int]) -> None:
        """A call binding `footprint` = (bytes, buffers) of pooled buffers starts: remember
        it, and release free buffers above the mark."""
        peak = self._peak
        if footprint[0] > peak[0] or footprint[1] > peak[1]:
            self._peak = (max(footprint[0], peak[0]), max(footprint[1], peak[1]))
        self._calls += 1
        if self._calls >= RECENT_CALLS:
            self._calls, self._last_peak, self._peak = 0, self._peak, (0, 0)
            self.windows += 1
            # a program not called for a whole window gives back its recorded copies' own
            # buffers (argument slots: a one-off computation's arguments, like its pooled
            # buffers, go back to Vulkan once the loop has run a while without them)
            for runner in list(self.runners):
                if runner.last_window < self.windows - 1:
                    runner.release_slots()
        if self.free_bytes > KEEP_BYTES or len(self.order) > KEEP_BUFFERS:
            self.trim()

    def trim(self) -> int:
        """Release free buffers above the mark, least recently returned first; returns the
        bytes released."""
        (max_bytes, max_count), released = self.mark(), []
        count = len(self.order)
        for buffer in list(self.order):   # a snapshot: a put from a finalizer may come
            if self.free_bytes <= max_bytes and count <= max_count:
                break
            count -= 1
            released.append(buffer)
            self.free_bytes -= buffer.nbytes
        for buffer in released:
            del self.order[buffer]
            key = (buffer.size, buffer.dtype, buffer.kind)
            self.free[key].remove(buffer)
            if not self.free[key]:
                del self.free[key]     # sizes no one asks for again leave no trace
        if released:
            gone = set(released)
            for runner in list(self.runners):
                runner.forget(gone)
        return sum(b.nbytes for b in released)


_pools: dict = {}


def pool_of(device) -> BufferPool:
    """The buffer pool of `device` (one per device and process)."""
    if device not in _pools:
        _pools[device] = BufferPool(device)
    return _pools[device]
