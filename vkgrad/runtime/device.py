"""Which Vulkan devices exist, and which one vkgrad uses.

Default: the first discrete GPU, else the first integrated (or virtual) GPU, else the CPU device
(lavapipe); under vg.distributed, the local rank's one of them (rank % their number). `VKGRAD_DEVICE=<index>` overrides, with indices as `python -m vkgrad devices` prints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

from vkgrad import config
from vkgrad.target import CooperativeShape

from .errors import DeviceError

_INSTALL_HINT = ("install a Vulkan driver: `apt-get install libvulkan1 mesa-vulkan-drivers` gives "
                 "lavapipe, a Vulkan device on the CPU; a GPU needs its vendor's driver")

# vk::to_string(VkPhysicalDeviceType) -> our name, in order of preference for the default.
_TYPES = {"DiscreteGpu": "discrete GPU", "IntegratedGpu": "integrated GPU",
          "VirtualGpu": "virtual GPU", "Cpu": "CPU", "Other": "other"}


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    type: str                 # one of _TYPES' values
    api_version: tuple
    timestamp_period_ns: float
    max_shared_memory: int
    max_workgroup_invocations: int
    max_storage_buffer_range: int
    max_storage_buffers: int      # per shader stage: the most buffers one kernel may bind
    timestamps: bool
    device_local_bytes: int = 0   # the largest device-local memory heap (0: not known)
    # shaderSignedZeroInfNanPreserveFloat32 (kp patch 0009): shaders may ask to keep NaN/Inf
    nan_preserve: bool = False
    # shaderDenormPreserveFloat32 (kp patch 0009): shaders may ask to keep subnormals
    denorm_preserve: bool = False
    # the features a Manager enables on it (kp patch 0010: storage_buffer_16bit_access,
    # shader_float16, shader_int8, vulkan_memory_model, cooperative_matrix, ...): name -> bool
    features: tuple = ()
    # the cooperative-matrix shapes it runs (VK_KHR_cooperative_matrix), as CooperativeShape
    cooperative_matrix: tuple = ()
    subgroup_size: int | None = None   # VkPhysicalDeviceSubgroupProperties (kp patch 0010)

    # JAX's Device names: what x.devices() and x.sharding show (vkgrad/tracer/array.py)
    @property
    def id(self) -> int:
        return self.index

    platform = "vulkan"

    @property
    def device_kind(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"VulkanDevice(id={self.index}, name={self.name!r})"

    def __str__(self) -> str:
        return f"vulkan:{self.index}"


def kp_module():
    """Import Kompute's `kp`, turning each way it can be missing into a DeviceError."""
    try:
        import kp
    except ImportError as e:
        if "libvulkan" in str(e):
            raise DeviceError(f"the Vulkan loader (libvulkan.so.1) is missing: {_INSTALL_HINT}") from None
        raise DeviceError("Kompute's Python module `kp` is not installed in this environment: run "
                          "`make setup` (scripts/build_kp.sh builds it with vkgrad's patches)") from None
    if not hasattr(kp, "list_physical_devices"):
        raise DeviceError("this `kp` is an unpatched Kompute build: vkgrad needs its own (it orders "
                          "dependent dispatches); run `make setup` to build it")
    if not hasattr(kp.Sequence, "record_loop"):
        raise DeviceError("this `kp` was built before vkgrad's kp patch 0012 (a loop's body "
                          "recorded once); run `make setup` to build it again")
    return kp


@lru_cache(maxsize=1)
def list_devices() -> tuple[DeviceInfo, ...]:
    kp = kp_module()
    try:
        props = kp.list_physical_devices()
    except RuntimeError as e:
        raise DeviceError(f"no Vulkan driver could be loaded ({e}): {_INSTALL_HINT}") from None
    if not props:
        raise DeviceError(f"Vulkan is installed but reports no device: {_INSTALL_HINT}")
    return tuple(
        DeviceInfo(index=i, name=p["device_name"], type=_TYPES.get(p["device_type"], "other"),
                   api_version=tuple(p["api_version"]), timestamp_period_ns=p["timestamp_period_ns"],
                   max_shared_memory=p["max_compute_shared_memory_size"],
                   max_workgroup_invocations=p["max_work_group_invocations"],
                   max_storage_buffer_range=p["max_storage_buffer_range"],
                   max_storage_buffers=p["max_storage_buffers_per_stage"],
                   timestamps=p["timestamps_supported"],
                   device_local_bytes=p.get("device_local_bytes", 0),
                   nan_preserve=p.get("shader_signed_zero_inf_nan_preserve_float32", False),
                   denorm_preserve=p.get("shader_denorm_preserve_float32", False),
                   features=tuple(sorted(p.get("features", {}).items())),
                   cooperative_matrix=tuple(CooperativeShape(**c) for c in
                                            p.get("cooperative_matrix_shapes", ())),
                   subgroup_size=p.get("subgroup_size"))
        for i, p in enumerate(props))


_local_rank = [0]


def set_local_rank(rank: int) -> None:
    """This process' index among the processes of its machine (vg.distributed.init): it picks
    which of the preferred devices is the default, one per process."""
    _local_rank[0] = int(rank)


def default_device_index() -> int:
    devices = list_devices()
    if config.switches.default_device is not None:   # with vg.default_device(...)
        return check_index(config.switches.default_device, devices, source="default_device")
    env = os.environ.get("VKGRAD_DEVICE")
    if env is not None and env.strip() != "":
        return check_index(env, devices, source="VKGRAD_DEVICE")
    return preferred_index(devices, _local_rank[0])


def preferred_index(devices, local_rank: int = 0) -> int:
    """The devices of the most preferred type present (discrete GPUs first), the local rank's
    one of them (round robin)."""
    for wanted in _TYPES.values():
        of_type = [d.index for d in devices if d.type == wanted]
        if of_type:
            return of_type[local_rank % len(of_type)]
    return 0


def check_index(index, devices=None, source="device index") -> int:
    devices = devices or list_devices()
    names = "; ".join(f"{d.index}: {d.name} ({d.type})" for d in devices)
    try:
        i = int(index)
    except (TypeError, ValueError):
        raise DeviceError(f"{source}={index!r} is not a device index; the devices are {names}") from None
    if not 0 <= i < len(devices):
        raise DeviceError(f"{source}={i} is out of range: this machine has {len(devices)} Vulkan "
                          f"device(s): {names}")
    return i
