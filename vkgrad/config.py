"""vg.config: JAX's configuration for what vkgrad follows of it, the 64-bit switch.

    vg.config.update("enable_x64", True)     # or "jax_enable_x64", or VKGRAD_ENABLE_X64=1
    vg.config.x64_enabled                    # True
    with vg.enable_x64(False): ...           # for one block, in this thread (jax.enable_x64)

This module is vg.config itself (JAX's jax.config is an object; a module with `update` and
PEP 562 attributes reads the same).

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
import sys
import threading
import warnings
from contextlib import contextmanager

from vkgrad.errors import ArgumentError

_OPTIONS = {"enable_x64": "enable_x64", "jax_enable_x64": "enable_x64"}


class _State(threading.local):
    """The enable_x64 context managers' values in this thread, innermost last."""

    def __init__(self):
        self.x64: list = []


_values = {"enable_x64": os.environ.get("VKGRAD_ENABLE_X64", "0").lower() in ("1", "true")}
_local = _State()


def env_reader(name: str):
    """A function() -> the environment variable `name` as a str ("" when unset), for what a
    jitted call reads every time (VKGRAD_BACKEND, VKGRAD_DEVICE, VKGRAD_DISABLE_PASSES).
    os.environ.get of an unset name raises and catches a KeyError inside it: 1.5 us each on
    the development machine, warm. On POSIX, os.environ keeps its values in a dict of bytes,
    which every change to os.environ writes; a lookup there takes 40 ns."""
    data = getattr(os.environ, "_data", None)
    if os.name != "posix" or not isinstance(data, dict):
        return lambda: os.environ.get(name, "")
    get, key = data.get, os.fsencode(name)
    return lambda: os.fsdecode(get(key, b""))


def env_snapshot(*names: str):
    """A function() -> a hashable value that changes when any of the environment variables
    `names` changes (on POSIX the tuple of os.environ's own bytes objects for them, one C call:
    a changed variable is a new bytes object there), for caching what a jitted call derives from
    them (its backend and disabled passes) per value."""
    data = getattr(os.environ, "_data", None)
    if os.name != "posix" or not isinstance(data, dict):
        return lambda: tuple(os.environ.get(n) for n in names)
    keys = tuple(map(os.fsencode, names))
    get = data.get
    return lambda: tuple(map(get, keys))


def update(name: str, value) -> None:
    """Set option `name` (JAX's `jax.config.update`; its names, with or without `jax_`)."""
    option = _OPTIONS.get(name)
    if option is None:
        raise ArgumentError(f"vg.config has no option {name!r}; it has {sorted(_OPTIONS)}")
    _values[option] = bool(value)


def x64() -> bool:
    """Whether float64 is computed in float64 (else it is truncated to float32)."""
    return _local.x64[-1] if _local.x64 else _values["enable_x64"]


def __getattr__(name):   # vg.config.x64_enabled, vg.config.jax_enable_x64: the current value
    if name in ("x64_enabled", "jax_enable_x64"):
        return x64()
    raise AttributeError(f"vg.config has no attribute {name!r}")


@contextmanager
def enable_x64(value: bool = True):
    """x64 on (or off) for the block, in this thread only (JAX's `with jax.enable_x64(True)`)."""
    _local.x64.append(bool(value))
    try:
        yield
    finally:
        _local.x64.pop()


def stored_dtype(name: str) -> str:
    """The dtype data of dtype `name` (a vkgrad dtype name) is computed in under the policy:
    float64 is float32 unless x64 is on."""
    return "f32" if name == "f64" and not x64() else name


def requested_dtype(requested, name: str, where: str) -> str:
    """`stored_dtype` of a dtype asked for by name (numpy's `requested`, vkgrad's `name`):
    JAX's UserWarning when it is a 64-bit dtype computed narrower, and one for an integer
    dtype JAX keeps that vkgrad stores as int32 (uint8, int8, int16, uint16, uint32)."""
    stored = stored_dtype(name)
    if requested.itemsize == 8 and requested.kind in "fiu" and stored != "f64":
        warn_truncated(requested.name, "float32" if requested.kind == "f" else "int32", where)
    elif requested.kind in "iu" and requested.name != "int32":
        warnings.warn(f"Explicitly requested dtype {requested.name} requested in {where} is "
                      "stored as int32: vkgrad computes every integer in int32, so arithmetic "
                      f"on it does not wrap at {requested.name}'s bounds as JAX's does (a "
                      "conversion to it does). See docs/numpy.md, \"dtypes\", for more.",
                      UserWarning, stacklevel=_user_stacklevel())
    return stored


_PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_stacklevel() -> int:
    """warnings.warn's stacklevel that points at the first frame outside the vkgrad package."""
    f, level = sys._getframe(2), 2
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f, level = f.f_back, level + 1
    return level


def warn_truncated(requested: str, truncated: str, where: str) -> None:
    """JAX's warning for a 64-bit dtype asked for by name that vkgrad computes narrower."""
    how = ("To enable more dtypes, set vg.config.update('enable_x64', True) or the "
           "VKGRAD_ENABLE_X64=1 shell environment variable (JAX's jax_enable_x64)"
           if truncated == "float32" else
           "vkgrad has no 64-bit integers (its kernels and interpreter compute int32), x64 or not")
    warnings.warn(f"Explicitly requested dtype {requested} requested in {where} is not "
                  f"available, and will be truncated to dtype {truncated}. {how}. See "
                  "docs/numpy.md, \"dtypes\", for more.", UserWarning,
                  stacklevel=_user_stacklevel())


# ---------------------------------------------------------- JAX's other switches, as far as
# vkgrad has them. Each is a context manager, as JAX's are (`with vg.disable_jit(): ...`), in
# this thread; vg.config.update takes their jax_ names too.

class _Switches(threading.local):
    def __init__(self):
        self.disable_jit = False
        self.log_compiles = False
        self.default_device = None


switches = _Switches()


@contextmanager
def _switched(attr: str, value):
    old = getattr(switches, attr)
    setattr(switches, attr, value)
    try:
        yield
    finally:
        setattr(switches, attr, old)


def disable_jit(disable: bool = True):
    """vg.jit'ed functions run eagerly, op by op, inside the block (jax.disable_jit): for
    print-debugging and pdb in a function that is jitted somewhere else."""
    return _switched("disable_jit", bool(disable))


def log_compiles(enable: bool = True):
    """Log each compile of a jitted function (and what changed in its cache key) to stderr
    inside the block, as VKGRAD_LOG_COMPILES=1 does for the whole run (jax.log_compiles)."""
    return _switched("log_compiles", bool(enable))


def default_device(device):
    """The Vulkan device (a vg.devices() entry or its index) that jitted calls and device_put
    use inside the block, in place of VKGRAD_DEVICE's (jax.default_device); None: the usual
    default."""
    index = getattr(device, "index", device)
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
        raise ArgumentError(f"default_device: {device!r} is not a device (vg.devices()[i]) or "
                            "a device index")
    return _switched("default_device", index)


def _accepting(name: str, accepted: tuple, why: str):
    """A JAX switch of which vkgrad has one behaviour: a context manager that takes the values
    that mean it (`accepted`) and refuses the others, saying why."""
    def switch(new_val):
        if new_val not in accepted:
            raise ArgumentError(f"{name}({new_val!r}): vkgrad supports only "
                                f"{' or '.join(map(repr, accepted))}: {why}")
        return _noop()
    switch.__name__ = switch.__qualname__ = name
    switch.__doc__ = f"JAX's {name} context manager; vkgrad accepts {accepted}: {why}."
    return switch


@contextmanager
def _noop():
    yield


default_matmul_precision = _accepting(
    "default_matmul_precision",
    (None, "default", "high", "highest", "bfloat16", "tensorfloat32", "float32", "fastest",
     "bfloat16_3x", "ANY_F32_F32_F32", "F32_F32_F32"),
    "float32 products always compute in float32 (JAX's 'highest'); no lower precision is used")
numpy_dtype_promotion = _accepting(
    "numpy_dtype_promotion", ("standard",),
    "vkgrad.numpy always promotes implicitly, with JAX's standard lattice ('strict' is not "
    "enforced)")
numpy_rank_promotion = _accepting(
    "numpy_rank_promotion", ("allow",),
    "vkgrad.numpy always broadcasts ranks as numpy does (no 'warn' or 'raise' mode)")
_GUARD_WHY = ("vkgrad does not guard transfers: host data is uploaded where it is used and "
              "results download when read")
_GUARDS = ("allow",)
transfer_guard = _accepting("transfer_guard", _GUARDS, _GUARD_WHY)
transfer_guard_host_to_device = _accepting("transfer_guard_host_to_device", _GUARDS, _GUARD_WHY)
transfer_guard_device_to_host = _accepting("transfer_guard_device_to_host", _GUARDS, _GUARD_WHY)
transfer_guard_device_to_device = _accepting("transfer_guard_device_to_device", _GUARDS,
                                             _GUARD_WHY)
check_tracer_leaks = _accepting(
    "check_tracer_leaks", (True, False),
    "vkgrad always checks: a leaked tracer used later is a LeakedTracerError")


def checking_leaks():
    """JAX's `with jax.checking_leaks():`: vkgrad checks for leaked tracers always."""
    return check_tracer_leaks(True)
