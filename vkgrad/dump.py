"""`python -m vkgrad dump FILE.py:FUNCTION --args 'f32[64,784], i32[64]' [--grad] ...`

Prints a function's program at one compiler stage. The stages run in order; they are the same
table `vg.jit(f).lower(...).as_text(stage)` uses (vkgrad/lowering/stages.py):

{stages}

Without --stage: 'optimized' with --grad, else 'traced'. `--stage grad` implies --grad; later
stages apply to the gradient program with --grad and to the plain program without.
--format dot prints Graphviz DOT (kernels coloured, forward and backward apart), svg renders
it with Graphviz's `dot`. --disable (or VKGRAD_DISABLE_PASSES) switches passes off by name.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from vkgrad.errors import ArgumentError, VkgradError
from vkgrad.ir.parser import parse_type, split_top
from vkgrad.lowering.render import dot_svg
from vkgrad.lowering.stages import (ALIASES, FORMATS, STAGE_NAMES, Options, describe_stages,
                                    run_stages, stage_dot, stage_name, stage_text)
from vkgrad.passes import disabled_passes
from vkgrad.runtime import get_device
from vkgrad.tracer.core import ShapeDtype
from vkgrad.transforms.api import trace


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


def parse_args_spec(text: str) -> list[ShapeDtype]:
    """'f32[64,784], i32[64]' -> [ShapeDtype((64, 784), 'f32'), ShapeDtype((64,), 'i32')]"""
    try:
        return [ShapeDtype(*parse_type(t)) for t in split_top(text)]
    except Exception as e:
        raise ArgumentError(f"--args: {e}; expected e.g. 'f32[64,784], f32[784,10], i32[64]'")\
            from None


__doc__ = __doc__.format(stages=describe_stages())


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vkgrad dump", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", help="FILE.py:FUNCTION")
    ap.add_argument("--args", required=True, help="argument types, e.g. 'f32[64,784], i32[64]'")
    ap.add_argument("--grad", action="store_true", help="dump the gradient program")
    ap.add_argument("--argnums", default="0", help="arguments to differentiate, e.g. 0,1")
    ap.add_argument("--source", action="store_true", help="show the source line of each eqn")
    ap.add_argument("--stage", choices=list(STAGE_NAMES) + list(ALIASES),
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
    for i in opts.argnums:
        if not 0 <= i < len(specs):
            raise ArgumentError(f"--argnums {i} is out of range for {len(specs)} arguments")
    program = trace(fun, specs)
    late = STAGE_NAMES.index(stage) >= STAGE_NAMES.index("plan")
    values = run_stages(program, stage, Options(grad=opts.grad, argnums=opts.argnums,
                                                device_info=_device_info() if late else None,
                                                disabled=disabled_passes(opts.disable)))
    value = values[stage]
    if opts.format == "text":
        sys.stdout.write(stage_text(value, source=opts.source))
    else:
        dot = stage_dot(value)
        sys.stdout.write(dot if opts.format == "dot" else dot_svg(dot))
    return 0


def _device_info():
    """The default device's limits, for planning the `plan` stage (None: no device)."""
    try:
        return get_device().info
    except VkgradError:
        return None
