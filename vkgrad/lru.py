"""One least-recently-used cache for every bounded cache in vkgrad (compiled programs per jitted
function, pipelines, SPIR-V in memory, recorded variants, eager kernels): a dict that keeps its
`maxsize` most recently used entries and hands each entry it drops to `on_evict`.
Not locked: a cache shared between threads is guarded by its owner."""

from __future__ import annotations

import collections
from typing import Callable


class LRU:
    def __init__(self, maxsize: int, on_evict: Callable | None = None):
        self.maxsize = maxsize
        self.on_evict = on_evict
        self._d: collections.OrderedDict = collections.OrderedDict()

    def get(self, key, default=None):
        """The entry of `key` (now the most recently used), or `default`."""
        try:
            self._d.move_to_end(key)
        except KeyError:
            return default
        return self._d[key]

    def put(self, key, value):
        """Store `value` as the most recently used entry; drop the oldest beyond maxsize."""
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.maxsize:
            _, old = self._d.popitem(last=False)
            if self.on_evict is not None:
                self.on_evict(old)
        return value

    def pop(self, key, default=None):
        return self._d.pop(key, default)

    def pop_newest(self):
        """Remove and return the most recently used value."""
        return self._d.popitem(last=True)[1]

    def __iter__(self):
        return iter(self._d)

    def __contains__(self, key) -> bool:
        return key in self._d

    def __len__(self) -> int:
        return len(self._d)

    def values(self):
        return self._d.values()

    def items(self):
        return self._d.items()

    def clear(self) -> None:
        self._d.clear()
