"""vg.config: JAX's configuration for what vkgrad follows of it, the 64-bit switch.

    vg.config.update("enable_x64", True)     # or "jax_enable_x64", or VKGRAD_ENABLE_X64=1
    vg.config.x64_enabled                    # True
    with vg.enable_x64(False): ...           # for one block, in this thread (jax.enable_x64)

The dtype policy is JAX's: with 64 bits off (the default) float64 data (numpy's default float)
becomes float32, and a float64 asked for by name (`dtype=np.float64`, `.astype("float64")`) is
float32 with JAX's UserWarning ("Explicitly requested dtype float64 requested in zeros is not
available, and will be truncated to dtype float32. ..."). With x64 on, float64 stays float64:
the interpreter computes in it, and a jitted program holding it runs on the interpreter (no
Vulkan kernel computes in float64; vg.FallbackWarning says so). Integers are int32 either way
(no int64 kernels or interpreter dtype): an int64 value beyond int32 is an IntegerOverflowError,
never a silent wrap, and an explicitly requested int64 warns that it is truncated.
"""

from __future__ import annotations

import os
import threading
import warnings
from contextlib import contextmanager

from vkgrad.errors import ArgumentError

_OPTIONS = {"enable_x64": "enable_x64", "jax_enable_x64": "enable_x64"}


class _Local(threading.local):
    def __init__(self):
        self.x64: list = []   # the enable_x64 context managers' values, innermost last


class Config:
    """The options (JAX's names, with or without the `jax_` prefix) and their values."""

    def __init__(self):
        self._enable_x64 = os.environ.get("VKGRAD_ENABLE_X64", "0").lower() in ("1", "true")
        self._local = _Local()

    def update(self, name: str, value) -> None:
        """Set option `name` (JAX's `jax.config.update`)."""
        option = _OPTIONS.get(name)
        if option is None:
            raise ArgumentError(f"vg.config has no option {name!r}; it has "
                                f"{sorted(set(_OPTIONS.values()))}")
        setattr(self, "_" + option, bool(value))

    @property
    def x64_enabled(self) -> bool:
        """Whether float64 is computed in float64 (else it is truncated to float32)."""
        local = self._local.x64
        return local[-1] if local else self._enable_x64

    jax_enable_x64 = x64_enabled

    def __repr__(self) -> str:
        return f"vg.config(enable_x64={self.x64_enabled})"


config = Config()


@contextmanager
def enable_x64(value: bool = True):
    """x64 on (or off) for the block, in this thread only (JAX's `with jax.enable_x64(True)`)."""
    stack = config._local.x64
    stack.append(bool(value))
    try:
        yield
    finally:
        stack.pop()


_GOTCHA = ("To enable more dtypes, set vg.config.update('enable_x64', True) or the "
           "VKGRAD_ENABLE_X64=1 shell environment variable (JAX's jax_enable_x64). See "
           "docs/numpy.md, \"dtypes\", for more.")


def warn_truncated(requested: str, truncated: str, where: str) -> None:
    """JAX's warning for a 64-bit dtype asked for by name that vkgrad computes narrower."""
    warnings.warn(f"Explicitly requested dtype {requested} requested in {where} is not "
                  f"available, and will be truncated to dtype {truncated}. {_GOTCHA}",
                  UserWarning, stacklevel=4)
