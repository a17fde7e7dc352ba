"""vg.device_put: host data onto a Vulkan device, as Arrays, once; under the numpy backend, a
host-backed Array (nothing to upload to)."""

from __future__ import annotations

import gc
import platform as platform_module
import sys

import numpy as np

import vkgrad
from vkgrad.dtypes import np_dtype
from vkgrad.errors import ArgumentError, VkgradError
from vkgrad.execution.array import Array
from vkgrad.execution.compiled import default_backend
from vkgrad.execution.fastpath import intern
from vkgrad.lowering import limits
from vkgrad.runtime import get_device, list_devices, opened_devices
from vkgrad.runtime.pool import pool_of
from vkgrad.tracer import core
from vkgrad.tracer.array import HOST
from vkgrad.tracer.pytree import tree_map


def device_put(x, device=None):
    """An Array holding `x` on the (default) Vulkan device: uploaded now, once (one submission).
    Pytrees are mapped leaf by leaf. Without a `device`, it follows the default backend
    (vg.default_backend()): on "numpy" (VKGRAD_BACKEND=numpy, or a machine whose only Vulkan
    device is lavapipe) the Array is host-backed, so eager ops and transforms on it run on the
    interpreter instead of one Vulkan submission per op (issue 21 measured an eager grad 5x
    slower through lavapipe), and jitted numpy calls take it as is; naming a device uploads."""
    if device is None and default_backend() == "numpy":
        return tree_map(_host_array, x)
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


def _host_array(leaf):
    if isinstance(leaf, Array):
        return leaf
    aval = intern(core.abstract_leaf(leaf, "device_put's argument"))
    return Array(aval, host=np.asarray(leaf, dtype=np_dtype(aval.dtype)))


def devices(backend: str | None = None) -> list:
    """The Vulkan devices (index, name, type, limits), as `python -m vkgrad devices` lists them;
    `VKGRAD_DEVICE=<index>` picks the default. The same objects as a device Array's
    `x.devices()`; `backend="numpy"` (or JAX's "cpu") gives the host's, HOST."""
    if backend in ("numpy", "cpu"):
        return [HOST]
    if backend not in (None, "vulkan"):
        raise ArgumentError(f"unknown backend {backend!r}: vkgrad's are 'vulkan' and 'numpy'",
                            source=core.user_source())
    return list(list_devices())


def device_count(backend: str | None = None) -> int:
    """The number of devices vg.devices(backend) lists (jax.device_count)."""
    return len(devices(backend))


def local_devices(process_index: int | None = None, backend: str | None = None,
                  host_id: int | None = None) -> list:
    """This process' devices: vg.devices(backend) (jax.local_devices); every device vkgrad
    sees is local (vg.distributed gives each process its own)."""
    return devices(backend)


def local_device_count(backend: str | None = None) -> int:
    return len(local_devices(backend=backend))


def device_get(x):
    """x with every Array leaf as a numpy array (jax.device_get); other leaves as they are."""
    return tree_map(lambda leaf: np.asarray(leaf) if isinstance(leaf, core.ArrayOps) and
                    not isinstance(leaf, core.Tracer) else leaf, x)


def copy_to_host_async(x) -> None:
    """x.copy_to_host_async() for every Array of the pytree x (vkgrad's copy is synchronous:
    vg.Array.copy_to_host_async)."""
    tree_map(lambda leaf: leaf.copy_to_host_async() if isinstance(leaf, Array) else None, x)


def live_arrays(platform: str | None = None) -> list:
    """The vg.Arrays alive now that hold values (not deleted or donated), as jax.live_arrays;
    platform "vulkan" or "numpy" ("cpu") keeps those on a device or on the host."""
    if platform not in (None, "vulkan", "numpy", "cpu"):
        raise ArgumentError(f"live_arrays: unknown platform {platform!r}: vkgrad's are "
                            "'vulkan' and 'numpy'", source=core.user_source())
    out = [a for a in gc.get_objects() if isinstance(a, Array) and not a.is_deleted()]
    if platform is None:
        return out
    on_host = platform in ("numpy", "cpu")
    return [a for a in out if (a._owned is None) == on_host]


def effects_barrier() -> None:
    """Wait until every submitted call on every opened device is done (jax.effects_barrier);
    an error stays with the call's results."""
    for dev in opened_devices():
        dev.inflight.drain()


def print_environment_info(return_string: bool = False):
    """vkgrad's, Python's and numpy's versions and the Vulkan devices, printed or returned
    (jax.print_environment_info)."""
    try:
        devs = "; ".join(f"{d.index}: {d.name} ({d.type})" for d in devices())
    except VkgradError as e:
        devs = f"none ({e})"
    text = (f"vkgrad:    {vkgrad.__version__}\nnumpy:     {np.__version__}\n"
            f"python:    {sys.version}\nplatform:  {platform_module.platform()}\n"
            f"backend:   {default_backend()}\ndevices:   {devs}\n")
    if return_string:
        return text
    print(text, end="")
    return None
