"""vkgrad's exceptions (placeholder; the compiler core fills this in)."""


class VkgradError(Exception):
    """Base class of every error vkgrad raises on purpose."""
