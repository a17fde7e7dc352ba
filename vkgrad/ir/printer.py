"""The text format: stable, diffable, one eqn per line, values numbered in order of appearance.

    program loss(%0: f32[64,784], %1: f32[784,10], %2: i32[64]) -> (f32[], f32[784,10]) {
      %3: f32[64,10] = matmul %0, %1                          # model.py:12
      %4: f32[64,10] = log_softmax[axis=1] %3                 # model.py:13
      ...
      # ---- backward ----
      %9: f32[784,10] = matmul[transpose_a=True] %0, %8       # model.py:12
      return %7, %9
    }

* inputs are numbered first, then consts (`%5: f32[3] = const [1.0, 2.0, 3.0]`; arrays over
  16 elements print as `const ...`), then eqn outputs, in order;
* every binding has its type `dtype[d0,d1,...]` (a scalar is `f32[]`);
* params, sorted by name, in brackets; values are ints, bools, tuples `(3,4)` and dtype
  names; a param equal to its entry in `param_defaults[prim]` is left out
  (`matmul %0, %1` means both transpose flags are False);
* literals are `value:dtype` (`1.0:f32`, `0:i32`, `True:bool`), f32 values printed in the
  shortest form that reads back to the same float32;
* `# ---- backward ----` marks where the eqns made by autodiff begin;
* `source=True` appends `# file:line` of the user's code to each eqn.

`vkgrad.ir.parser.parse_program` reads this format back.
"""

from __future__ import annotations

import numpy as np

from vkgrad.ir.core import Literal, Program, Var, type_str

param_defaults: dict = {}   # Primitive -> {param: value the printer leaves out}

BACKWARD_MARKER = "# ---- backward ----"
CONST_PRINT_LIMIT = 16
_SOURCE_COLUMN = 60


def format_scalar(value, dtype: str) -> str:
    if dtype == "bool":
        return "True" if value else "False"
    if dtype == "i32":
        return str(int(value))
    if dtype == "f32":
        return str(np.float32(value))
    return repr(float(value))


def format_literal(lit: Literal) -> str:
    return f"{format_scalar(lit.value, lit.dtype)}:{lit.dtype}"


def format_param(v) -> str:
    if isinstance(v, tuple):
        inner = ",".join(format_param(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def format_params(prim, params) -> str:
    defaults = param_defaults.get(prim, {})
    shown = [(k, v) for k, v in params.items()
             if not (k in defaults and defaults[k] == v) and not isinstance(v, Program)]
    if not shown:
        return ""
    return "[" + ", ".join(f"{k}={format_param(v)}" for k, v in shown) + "]"


class _Namer:
    def __init__(self):
        self.names: dict[Var, str] = {}

    def define(self, v: Var) -> str:
        self.names[v] = f"%{len(self.names)}"
        return self.names[v]

    def __call__(self, x) -> str:
        if isinstance(x, Literal):
            return format_literal(x)
        if x not in self.names:        # ill-formed program: still print, the verifier complains
            return self.define(x) + "?"
        return self.names[x]


def print_program(program: Program, *, source: bool = False) -> str:
    name = _Namer()
    ins = ", ".join(f"{name.define(v)}: {type_str(v.shape, v.dtype)}" for v in program.inputs)
    outs = [type_str(o.shape, o.dtype) for o in program.outputs]
    out_t = outs[0] if len(outs) == 1 else f"({', '.join(outs)})"
    lines = [f"program {program.name}({ins}) -> {out_t} {{"]
    for v, arr in program.consts:
        vals = ("..." if arr.size > CONST_PRINT_LIMIT else
                "[" + ", ".join(format_scalar(x, v.dtype) for x in arr.reshape(-1).tolist()) + "]")
        lines.append(f"  {name.define(v)}: {type_str(v.shape, v.dtype)} = const {vals}")
    _print_eqns(program.eqns, name, lines, source, "  ")
    lines.append(f"  return {', '.join(name(o) for o in program.outputs)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _print_eqns(eqns, name: _Namer, lines: list, source: bool, indent: str) -> None:
    """One line per eqn. An eqn with a sub-program (a `fused` body) is followed by the body's
    eqns in braces, indented, in the same numbering: the body reads the outer values by their
    names, and its results are the eqn's outputs."""
    phase = "fwd"
    for e in eqns:
        if e.phase != phase:
            lines.append(indent + (BACKWARD_MARKER if e.phase == "bwd" else "# ---- forward ----"))
            phase = e.phase
        args = ", ".join(name(x) for x in e.inputs)
        lhs = ", ".join(f"{name.names.get(o) or name.define(o)}: {type_str(o.shape, o.dtype)}"
                        for o in e.outputs)
        line = f"{indent}{lhs} = {e.prim.name}{format_params(e.prim, e.params)}"
        line += f" {args}" if args else ""
        bodies = [v for _, v in e.params.items() if isinstance(v, Program)]
        if source and e.source:
            line = f"{line.ljust(_SOURCE_COLUMN)}  # {e.source}"
        lines.append(line + (" {" if bodies else ""))
        for body in bodies:
            _print_eqns(body.eqns, name, lines, source, indent + "    ")
            lines.append(indent + "}")
