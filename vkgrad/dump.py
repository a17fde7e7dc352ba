"""`python -m vkgrad dump FILE.py:FUNCTION --args 'f32[64,784], i32[64]' [--grad] ...`

Prints a function's program at one compiler stage. The stages run in order; they are the same
table `vg.jit(f).lower(...).as_text(stage)` uses (vkgrad/pipeline.py):

{stages}

Without --stage: 'optimized' with --grad, else 'traced'. `--stage grad` implies --grad; later
stages apply to the gradient program with --grad and to the plain program without.
--format dot prints Graphviz DOT (kernels coloured, forward and backward apart), svg renders
it with Graphviz's `dot`. --disable (or VKGRAD_DISABLE_PASSES) switches passes off by name.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import re
import sys

from vkgrad.dtypes import canonical_dtype
from vkgrad.errors import ArgumentError, VkgradError
from vkgrad.ir.parser import split_top
from vkgrad.lowering.render import dot_svg
from vkgrad.pipeline import (FORMATS, STAGE_ALIASES, STAGE_NAMES, Options, describe_stages,
                             disabled_passes, run_stages, stage_dot, stage_name, stage_text)
from vkgrad.runtime import get_device
from vkgrad.tracer.core import ShapeDtype
from vkgrad.transforms.tracing import trace_function


def load_function(target: str):
    """FILE.py:FUNCTION -> the function object (the file is imported as a module)."""
    path, sep, fname = target.rpartition(":")
    if not sep or not path or not fname:
        raise ArgumentError(f"expected FILE.py:FUNCTION, got {target!r}")
    if not os.path.isfile(path):
        raise ArgumentError(f"no such file: {path}")
    mod_name = "_vkgrad_dump_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    fun = getattr(module, fname, None)
    if not callable(fun):
        raise ArgumentError(f"{path} has no function named {fname!r}")
    return fun


# Type names a user may write, by the dtype policy (vkgrad/dtypes.py): other integer widths
# are stored as i32, f16 as f32.
_TYPE_NAMES = {"f16": "float16", "f32": "float32", "f64": "float64", "bool": "bool",
               **{f"{k}{b}": f"{'u' if k == 'u' else ''}int{b}" for k in "iu"
                  for b in (8, 16, 32, 64)}}


_SPEC_TYPE = re.compile(r"^([a-z]+[0-9]*)\[([0-9,\s]*)\]$")


def _spec_item(text: str):
    """One argument: a type, or a pytree of them: {name: ..., ...}, [..., ...], (..., ...)."""
    t = text.strip()
    if t.startswith("{") and t.endswith("}"):
        out = {}
        for entry in _split_braces(t[1:-1]):
            key, sep, value = entry.partition(":")
            if not sep:
                raise ArgumentError(f"--args: {entry!r} in a dict needs 'name: type'")
            out[key.strip().strip("'\"")] = _spec_item(value)
        return out
    if t.startswith("(") and t.endswith(")"):
        return tuple(_spec_item(x) for x in _split_braces(t[1:-1]))
    if t.startswith("[") and t.endswith("]"):
        return [_spec_item(x) for x in _split_braces(t[1:-1])]
    m = _SPEC_TYPE.match(t)
    if not m:
        raise ArgumentError(f"--args: bad type {t!r} (expected e.g. f32[3,4] or f32[])")
    name, shape = m.group(1), tuple(int(d) for d in m.group(2).replace(" ", "").split(",") if d)
    if name not in _TYPE_NAMES:
        raise ArgumentError(f"--args: unknown dtype {name!r} in {t!r} (use f32, f64, i32, bool; "
                            "i64, u8, ... are stored as i32, f16 as f32)")
    return ShapeDtype(shape, canonical_dtype(_TYPE_NAMES[name]))


def _split_braces(s: str) -> list[str]:
    """The parser's split_top, also respecting {} (dict specs)."""
    return split_top(s, ",", "([{", ")]}")


def parse_args_spec(text: str) -> list:
    """'f32[64,784], i32[64]' -> [ShapeDtype((64, 784), 'f32'), ShapeDtype((64,), 'i32')];
    pytrees too: '{w: f32[3,4], b: f32[4]}, [f32[2], f32[2]]'."""
    try:
        return [_spec_item(t) for t in _split_braces(text)]
    except ArgumentError:
        raise
    except Exception as e:
        raise ArgumentError(f"--args: {e}; expected e.g. 'f32[64,784], f32[784,10], i32[64]' "
                            "or, for a dict or list argument, '{w: f32[784,10], b: f32[10]}', "
                            "'[f32[3], f32[3]]'") from None


def check_arity(fun, specs, target: str) -> None:
    """A clear message when --args does not give one type per parameter of the function."""
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return
    params = [p for p in sig.parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in params if p.default is p.empty]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    if len(required) <= len(specs) and (varargs or len(specs) <= len(params)):
        return
    names = ", ".join(p.name + ("" if p.default is p.empty else "=...") for p in params)
    raise ArgumentError(f"{target} takes {len(required)} argument(s) ({names}), but --args gives "
                        f"{len(specs)} type(s): give one type per parameter, e.g. "
                        "--args 'f32[64,784], f32[784,10], i32[64]' (a dict parameter: "
                        "'{w: f32[784,10], b: f32[10]}')")


__doc__ = __doc__.format(stages=describe_stages())


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vkgrad dump", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", help="FILE.py:FUNCTION")
    ap.add_argument("--args", required=True,
                    help="one type per parameter, e.g. 'f32[64,784], i32[64]'; a dict, list or "
                    "tuple parameter as '{w: f32[784,10], b: f32[10]}', '[f32[3], f32[3]]'; "
                    "i64, u8, ... are i32 and f16 is f32 (the dtype policy)")
    ap.add_argument("--grad", action="store_true", help="dump the gradient program")
    ap.add_argument("--argnums", default="0", help="arguments to differentiate, e.g. 0,1")
    ap.add_argument("--source", action="store_true", help="show the source line of each eqn")
    ap.add_argument("--stage", choices=list(STAGE_NAMES) + list(STAGE_ALIASES),
                    help="the stage to stop after")
    ap.add_argument("--format", choices=FORMATS, default="text",
                    help="text (default), dot (Graphviz) or svg (needs Graphviz's dot)")
    ap.add_argument("--disable", default=None,
                    help="passes to switch off, e.g. fuse,remat (default: VKGRAD_DISABLE_PASSES)")
    return ap


def main(argv: list[str]) -> int:
    opts = build_parser().parse_args(argv)
    try:
        opts.argnums = tuple(int(a) for a in opts.argnums.split(",") if a.strip())
    except ValueError:
        raise ArgumentError(f"--argnums: expected e.g. 0,1, got {opts.argnums!r}") from None
    stage = stage_name(opts.stage or ("optimized" if opts.grad else "traced"))
    if stage == "grad":
        opts.grad = True
    fun = load_function(opts.target)
    specs = parse_args_spec(opts.args)
    check_arity(fun, specs, opts.target)
    for i in opts.argnums:
        if not 0 <= i < len(specs):
            raise ArgumentError(f"--argnums {i} is out of range for {len(specs)} arguments")
    traced = trace_function(fun, tuple(specs), allow_spec=True)
    program = traced.program
    # an argument that is a pytree is several program inputs: differentiate all its leaves
    leaves = tuple(k for i in opts.argnums for k in range(traced.arg_slices[i].start,
                                                          traced.arg_slices[i].stop))
    late = STAGE_NAMES.index(stage) >= STAGE_NAMES.index("plan")
    values = run_stages(program, stage, Options(grad=opts.grad, argnums=leaves,
                                                target=_target() if late else None,
                                                disabled=disabled_passes(opts.disable)))
    value = values[stage]
    if opts.format == "text":
        sys.stdout.write(stage_text(value, source=opts.source))
    else:
        dot = stage_dot(value)
        sys.stdout.write(dot if opts.format == "dot" else dot_svg(dot))
    return 0


def _target():
    """The default device's Target, for planning the `plan` stage (None: no device)."""
    try:
        return get_device().target
    except VkgradError:
        return None
