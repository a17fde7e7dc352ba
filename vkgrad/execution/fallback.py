"""Why a compiled program runs on the numpy interpreter, in the user's terms.

A program the Vulkan kernels cannot run falls back WHOLE to the interpreter (compiled.py). That
must never be silent: `explain` names the reason and the user's line that caused it (for
float64, the line that brought the first f64 value in, and how to keep it float32), and `warn`
issues it as a `FallbackWarning`, once per compiled program, pointing at the user's call.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import warnings

from vkgrad.tracer.core import source_location


class FallbackWarning(UserWarning):
    """A compiled program runs on the numpy interpreter instead of the Vulkan device."""


_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
FIX_F64 = ("the Vulkan kernels compute in float32: make it float32 (x.astype(np.float32), "
           "or float32 data); NumPy and Python scalars already adapt to float32 arrays")


def explain(program, unsupported) -> str:
    """The reason `program` cannot run on Vulkan, with the user's line (and what to do)."""
    f64 = float64_origin(program)
    if f64 is not None:
        return f"float64 values (from {f64}); {FIX_F64}"
    e = unsupported.eqn
    return unsupported.reason + (f" ({_at(e.source, e.prim.name)})" if e is not None and e.source
                                 else "")


def float64_origin(program) -> str | None:
    """Where the first float64 value of `program` comes from: an argument, or the first eqn
    that reads or makes one (with its line); None when the program has none."""
    names = program.arg_names
    for i, v in enumerate(program.inputs):
        if v.dtype == "f64":
            return f"the float64 argument {names[i] if i < len(names) else i}"
    consts = {v for v, _ in program.consts}
    for e in program.eqns:
        ins = [x for x in e.inputs if getattr(x, "dtype", None) == "f64"]
        if ins or any(o.dtype == "f64" for o in e.outputs):
            what = ("a float64 numpy array captured as a constant, "
                    if any(x in consts for x in ins) else "")
            return what + _at(e.source, e.prim.name)
    return None


def _at(source: str | None, prim: str = "") -> str:
    """`the line's code` at file:line (the code read back from the file when it can be)."""
    if not source:
        return f"an eqn '{prim}' with no source line"
    path, _, line = source.rpartition(":")
    code = linecache.getline(path, int(line)) if line.isdigit() else ""
    code = re.sub(r"\s+#.*", "", code.strip())       # without a trailing comment
    return f"`{code}` at {source}" if code else f"'{prim}' at {source}"


def warn(message: str) -> None:
    """A FallbackWarning at the user's frame (the innermost one outside vkgrad): issued each
    time it is called (no registry), i.e. once per compiled program. In a notebook its file is
    the cell as IPython names it ("Cell In[7]"), not the kernel's temporary file."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    if f is None:
        warnings.warn(message, FallbackWarning, stacklevel=2)
        return
    where = source_location(f.f_code.co_filename, f.f_lineno)
    filename = where.rpartition(",")[0] if where.startswith("Cell ") else f.f_code.co_filename
    warnings.warn_explicit(message, FallbackWarning, filename, f.f_lineno,
                           module=f.f_globals.get("__name__"))
