"""vkgrad's runtime: Vulkan devices, SPIR-V compilation, buffers and recorded executables."""

from .device import DeviceInfo, default_device_index, list_devices
from .errors import DeviceError, ShaderCompileError
from .shaders import compile_file, compile_glsl
from .vulkan import (Buffer, Device, Dispatch, Executable, Kernel, counters, get_device,
                     opened_devices, pack_words)

__all__ = ["Buffer", "Device", "DeviceError", "DeviceInfo", "Dispatch", "Executable", "Kernel",
           "ShaderCompileError", "compile_file", "compile_glsl", "counters", "default_device_index",
           "get_device", "list_devices", "opened_devices", "pack_words"]
