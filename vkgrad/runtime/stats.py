"""What the runtime holds right now, counted by walking the live objects (not estimated).

`device_stats(device)` for one device: its buffers and their bytes (device memory; a "device"
buffer also has a host-visible staging copy of the same size), the free ones in its pool, the
programs (runners) on it, their executables, recorded sequences and descriptor sets, and its
pipelines. `rss_bytes()`: the process's resident memory, from /proc/self/statm.

Where each count comes from (kp 0.9.0 with vkgrad's patches, third_party/kompute/patches/):
- a pipeline is a kp Algorithm; it lives while the device's pipeline cache or a dispatch of a
  live executable holds it. Each Algorithm also owns one descriptor pool and set (kp allocates
  them for the placeholder bindings it is built with).
- each dispatch of an executable is an OpAlgoDispatch with its own descriptor pool and set
  (patch 0005), shared by every sequence the executable records;
- each recorded (uploads, downloads, slot copies) choice of an executable is one kp Sequence
  (one command buffer and one fence), plus the device's own sequence for one-off transfers;
  each slot-copy dispatch of an executable (`extra`) has its own descriptor set.

`vulkan.counters` counts events since the process started (sequences recorded, buffers
allocated, pool misses, arguments copied into a program's slots, submissions, transfers).
"""

from __future__ import annotations

import os

from .pool import pool_of


def rss_bytes() -> int:
    """Resident memory of this process (Linux: /proc/self/statm), or 0 where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def device_stats(device) -> dict:
    buffers = list(device._buffers)
    pool = pool_of(device)
    executables = list(device._executables)
    live_kernels = {id(d.kernel) for ex in executables for d in ex.dispatches}
    pipelines = live_kernels | {id(k) for cache in (device._kernels, device._by_launch)
                                for k in cache.values()}
    dispatch_sets = (len({id(op) for ex in executables for op in ex._ops})   # ops are shared
                     + sum(len(ex._extra_ops) for ex in executables))
    return {
        "buffers": len(buffers),
        "buffer_bytes": sum(b.nbytes for b in buffers),
        "staging_bytes": sum(b.nbytes for b in buffers if b.kind == "device"),
        "pooled_buffers": len(pool.order),
        "pooled_bytes": pool.free_bytes,
        "pool_mark_bytes": pool.mark()[0],
        "pool_mark_buffers": pool.mark()[1],
        "programs": len(pool.runners),
        "executables": len(executables),
        "sequences": 1 + sum(len(ex._recorded) for ex in executables),
        "descriptor_sets": dispatch_sets + len(pipelines),
        "pipelines": len(pipelines),
        "in_flight": len(device.inflight),
    }
