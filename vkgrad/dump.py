"""`python -m vkgrad dump FILE.py:FUNCTION --args 'f32[64,784], i32[64]' [--grad] ...`

Prints a function's program at one compiler stage. The stages run in order, each a function
Program -> Program in `STAGES` (later issues append fusion and lowering stages):

    traced      the function as traced
    grad        the joint forward+backward program of its gradient (`--grad`), un-optimised
    optimized   after the pass pipeline (DCE, CSE, simplification, transpose folding)
    fused       elementwise and layout eqns grouped into `fused` kernels (what runs on the GPU)
    lowered     the dispatches and buffers vg.jit records for the default device

Without --stage: 'optimized' with --grad, else 'traced'. `--stage grad` implies --grad; later
stages apply to the gradient program with --grad and to the plain program without.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from vkgrad.errors import ArgumentError
from vkgrad.ir.autodiff import grad_program
from vkgrad.ir.parser import parse_type, split_top
from vkgrad.ir.passes import optimize
from vkgrad.ir.printer import print_program
from vkgrad.ir.verifier import checked
from vkgrad.tracer.core import ShapeDtype
from vkgrad.tracer.transforms import trace


def _grad_stage(program, opts):
    return checked(grad_program(program, opts.argnums), "autodiff") if opts.grad else program


def _optimize_stage(program, opts):
    return optimize(program, final=True)


def _fuse_stage(program, opts):
    from vkgrad.ir.passes.fuse import canonicalize_for_lowering, fuse
    return checked(fuse.apply(canonicalize_for_lowering.apply(program)), "pass fuse")


def _lower_stage(program, opts):
    """The kernels and buffers vg.jit would run, planned for the default device (if any)."""
    from vkgrad.errors import VkgradError
    from vkgrad.lowering.lower import lower
    try:
        from vkgrad.runtime import get_device
        info = get_device().info
    except VkgradError:
        info = None
    return lower(program, info)


# name -> fn(program, options) -> program, in pipeline order; the last one gives a Lowered
STAGES: dict = {"traced": lambda p, opts: p, "grad": _grad_stage, "optimized": _optimize_stage,
                "fused": _fuse_stage, "lowered": _lower_stage}


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


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vkgrad dump", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", help="FILE.py:FUNCTION")
    ap.add_argument("--args", required=True, help="argument types, e.g. 'f32[64,784], i32[64]'")
    ap.add_argument("--grad", action="store_true", help="dump the gradient program")
    ap.add_argument("--argnums", default="0", help="arguments to differentiate, e.g. 0,1")
    ap.add_argument("--source", action="store_true", help="show the source line of each eqn")
    ap.add_argument("--stage", choices=list(STAGES), help="the stage to stop after")
    return ap


def main(argv: list[str]) -> int:
    opts = build_parser().parse_args(argv)
    try:
        opts.argnums = tuple(int(a) for a in opts.argnums.split(",") if a.strip())
    except ValueError:
        raise ArgumentError(f"--argnums: expected e.g. 0,1, got {opts.argnums!r}") from None
    names = list(STAGES)
    stage = opts.stage or ("optimized" if opts.grad else "traced")
    if stage == "grad":
        opts.grad = True
    fun = load_function(opts.target)
    specs = parse_args_spec(opts.args)
    for i in opts.argnums:
        if not 0 <= i < len(specs):
            raise ArgumentError(f"--argnums {i} is out of range for {len(specs)} arguments")
    program = trace(fun, specs)
    for name in names[:names.index(stage) + 1]:
        program = STAGES[name](program, opts)
    sys.stdout.write(print_program(program, source=opts.source) if stage != "lowered"
                     else program.text())
    return 0
