"""Tracebacks without vkgrad's own frames, as JAX's (jax._src.traceback_util).

An exception that leaves vkgrad through one of its entry points (a transformed function, a
jitted call, a vkgrad.numpy / nn / lax function; `api_boundary`) is re-raised with a traceback
keeping only the frames outside the vkgrad package: the user's calls and the user's functions
that vkgrad called (the function being traced, a custom rule). Where in vkgrad it was raised is
in the message already (vkgrad's errors name the primitive, the stage and the user's line).
A note on the exception says so, and VKGRAD_TRACEBACK_FILTERING=off shows every frame (for
debugging vkgrad itself); it is read when an exception passes, so it can be set at any time.
The outermost entry point's own re-raising frame stays (Python adds the frame that raises).
"""

from __future__ import annotations

import functools
import os
import types

_PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep
_GENERATED = ("<vkgrad",)   # code vkgrad generates (the jit's argument guards)


def filtering() -> bool:
    return os.environ.get("VKGRAD_TRACEBACK_FILTERING", "on").lower() not in ("off", "0", "no")


def _internal(frame) -> bool:
    name = frame.f_code.co_filename
    return name.startswith(_PKG) or name.startswith(_GENERATED)


def filtered(tb):
    """The traceback `tb` without vkgrad's frames (None when every frame is vkgrad's)."""
    kept = []
    while tb is not None:
        if not _internal(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def api_boundary(fun):
    """`fun`, whose exceptions leave with vkgrad's frames filtered out of their tracebacks."""
    @functools.wraps(fun)
    def boundary(*args, **kwargs):
        __tracebackhide__ = True   # noqa: F841  (pytest leaves this frame out too)
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            if not filtering():
                raise
            if _NOTE not in getattr(e, "__notes__", ()) and hasattr(e, "add_note"):
                e.add_note(_NOTE)          # (Python 3.11+)
            raise e.with_traceback(filtered(e.__traceback__))   # (VKGRAD_TRACEBACK_FILTERING)
    # the frame carries the API's name (tracebacks; "requested in zeros" in dtype warnings)
    boundary.__code__ = boundary.__code__.replace(co_name=getattr(fun, "__name__", "boundary"))
    return boundary


_NOTE = ("(vkgrad removed its internal frames from this traceback; "
         "VKGRAD_TRACEBACK_FILTERING=off shows them)")


def wrap_namespace(namespace: dict) -> None:
    """Every public function of a vkgrad module's namespace (a module's globals(), a package's
    __init__) behind `api_boundary`."""
    for name, fn in list(namespace.items()):
        if isinstance(fn, types.FunctionType) and not name.startswith("_") and \
                fn.__module__.startswith("vkgrad"):
            namespace[name] = api_boundary(fn)
