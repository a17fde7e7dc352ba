"""Errors of the Vulkan runtime, in the user's terms: what is wrong and what to do."""

from ..errors import VkgradError


class DeviceError(VkgradError):
    """No usable Vulkan device, a bad device index, or a device operation that failed."""


class ShaderCompileError(VkgradError):
    """glslangValidator rejected a shader; the message shows its errors with the source lines."""


class NaNError(VkgradError, FloatingPointError):
    """debug_nans is on (vg.debug_nans, VKGRAD_DEBUG_NANS=1) and a call's float result holds
    NaN/Inf; names the first eqn that made one (vkgrad/runtime/nans.py). On Vulkan it is
    raised by the wait that completes the call's submission."""
