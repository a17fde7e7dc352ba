"""vg.runtime_stats(): counters of what the process holds, for spotting growth in long runs.

    {"buffers", "buffer_bytes", "staging_bytes", "pooled_buffers", "pooled_bytes",
     "pool_mark_bytes", "pool_mark_buffers", "programs", "executables", "sequences",
     "descriptor_sets", "pipelines", "in_flight", "jit_programs", "rss_bytes",
     "recordings", "recorded_ops", "allocations", "pool_misses", "copy_ins", "copy_outs",
     "submissions", "allocated_bytes", "staging_allocated_bytes", "loop_executions"}

Each count walks the live objects (vkgrad/runtime/stats.py says where each comes from);
`jit_programs` is the compiled programs held in the caches of the live jitted functions. The
device counts are those of the default device, and zeros when no device was opened (the numpy
backend opens none). docs/long_runs.md. The last ten count events since the process started
(`vkgrad.runtime.vulkan.counters`): sequences recorded, the ops recorded into them (a loop's
body once, whatever its trip count: kp patch 0012), device buffers allocated, pool misses
(a call needed a buffer the pool did not have), arguments copied into and results copied out
of a program's own slots (vkgrad/runtime/runners.py), submissions, the bytes of device
memory allocated and of host-visible staging memory (each byte zero-filled on the host when
allocated), and the secondary command buffers the recorded loops execute. In a training loop that gets a new batch every step,
the first three stop growing after the first calls.
"""

from __future__ import annotations

from vkgrad.execution import jit
from vkgrad.runtime import stats, vulkan

_DEVICE_KEYS = ("buffers", "buffer_bytes", "staging_bytes", "pooled_buffers", "pooled_bytes",
                "pool_mark_bytes", "pool_mark_buffers", "programs", "executables", "sequences",
                "descriptor_sets", "pipelines", "in_flight")
_EVENT_KEYS = ("recordings", "recorded_ops", "allocations", "pool_misses", "copy_ins",
               "copy_outs", "submissions", "allocated_bytes", "staging_allocated_bytes",
               "loop_executions")


def runtime_stats(device=None) -> dict:
    """The counters, for the default device (or `device`, an index) when it is open."""
    opened = vulkan._devices
    dev = None
    if opened:
        dev = opened.get(vulkan.default_device_index() if device is None else device)
    out = stats.device_stats(dev) if dev is not None else dict.fromkeys(_DEVICE_KEYS, 0)
    out["jit_programs"] = sum(len(j._cache) for j in list(jit.live))
    out["rss_bytes"] = stats.rss_bytes()
    out.update({k: vulkan.counters[k] for k in _EVENT_KEYS})
    return out
