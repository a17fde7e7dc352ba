"""Errors of the Vulkan runtime, in the user's terms: what is wrong and what to do."""

from ..errors import VkgradError


class DeviceError(VkgradError):
    """No usable Vulkan device, a bad device index, or a device operation that failed."""


class ShaderCompileError(VkgradError):
    """glslangValidator rejected a shader; the message shows its errors with the source lines."""
