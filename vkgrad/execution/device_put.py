"""vg.device_put: host data onto a Vulkan device, as Arrays, once."""

from __future__ import annotations

import numpy as np

from vkgrad.dtypes import np_dtype
from vkgrad.execution.array import Array
from vkgrad.execution.fastpath import intern
from vkgrad.lowering import limits
from vkgrad.runtime import get_device, list_devices
from vkgrad.runtime.pool import pool_of
from vkgrad.tracer import core
from vkgrad.tracer.pytree import tree_map


def device_put(x, device=None):
    """An Array holding `x` on the (default) Vulkan device: uploaded now, once (one submission).
    Pytrees are mapped leaf by leaf."""
    dev = get_device(device)
    pool = pool_of(dev)

    def put(leaf):
        if isinstance(leaf, Array) and leaf._owned is not None:
            return leaf
        aval = intern(core.abstract_leaf(leaf, "device_put's argument"))
        limits.check(aval, dev.info, "device_put's argument:", core.user_source())
        host = np.asarray(leaf, dtype=np_dtype(aval.dtype))
        owned = pool.owned(max(1, host.size), aval.dtype)
        owned.buffer.upload(host.reshape(-1) if host.size else np.zeros(1, host.dtype))
        return Array(aval, owned, host=host)

    return tree_map(put, x)


def devices() -> list:
    """The Vulkan devices (index, name, type, limits), as `python -m vkgrad devices` lists them;
    `VKGRAD_DEVICE=<index>` picks the default."""
    return list(list_devices())
