"""The IR: plain, slotted, immutable data (JAX's jaxpr, minus everything we do not need), and
its text form.

    Var       a value; holds only its type (shape tuple + dtype name). Identity is the value.
    Literal   a scalar constant with a dtype (Python value, weakly typed at the source level).
    Eqn       primitive, inputs (Var | Literal), params (immutable, hashable), outputs (Vars),
              source ("file:line" of the user's code or None), phase ('fwd' | 'bwd').
    Program   name, inputs, outputs (Var | Literal), eqns, consts ((Var, ndarray) pairs for
              non-scalar arrays captured while tracing).

Nothing here is mutated after construction: passes build new objects (`dataclasses.replace`).
Names (%0, %1, ...) exist only in the printer (`print_program`, below), numbered in order of
appearance. Dtypes are short names ('f16', 'bf16', 'f32', 'f64', 'i32', 'bool';
vkgrad/dtypes.py).

A `Primitive` is a name plus traits ('pure', 'elementwise', 'layout', 'commutative'). Rules about
a primitive live in plain dicts keyed by it, defined here (and the numpy implementations in
`interpreter.impls`) so that the module defining a primitive fills them in without importing any
layer above the IR:

    abstract_eval_rules[p]   shape/dtype rule              (the tracer, the verifier)
    impls[p]                 numpy implementation          (interpreter.py: the reference)
    vjp_rules[p]             VJP rule                      (vkgrad.transforms.autodiff)
    jvp_rules[p]             JVP rule, only where no VJP   (while; autodiff.jvp_program)
    batching_rules[p]        batching rule                 (vkgrad.transforms.batching: vmap)
    param_defaults[p]        params the printer elides     (the printer, the parser)

All of them are filled in beside each primitive's definition (vkgrad/primitives/). Hand-written
kernels' planners register themselves in vkgrad/lowering/, keyed by primitive, and the GLSL
of each elementwise primitive is the lowering's table (vkgrad/lowering/glsl.py): the IR holds no
backend's facts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from vkgrad.dtypes import (ALL_DTYPES, DTYPES, FLOAT_DTYPES, NUMERIC_DTYPES, canonical_dtype,  # noqa: F401
                           dtype_name, is_float, np_dtype, type_str)
from vkgrad.errors import DTypeError, IRError, MissingRuleError

# ----------------------------------------------------------------------------------- types

@dataclass(frozen=True, slots=True)
class TensorType:
    """The abstract value of an array: what shape rules take and return."""
    shape: tuple
    dtype: str

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __str__(self) -> str:
        return type_str(self.shape, self.dtype)


@dataclass(frozen=True, slots=True, eq=False)
class Var:
    """An SSA value. Equality and hashing are by identity: two Vars of one type are different
    values. It carries only its type; printing names it."""
    shape: tuple
    dtype: str

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise DTypeError(f"unsupported dtype {self.dtype!r} for a program value")
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def type(self) -> TensorType:
        return TensorType(self.shape, self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Var({type_str(self.shape, self.dtype)})"


_PY_TYPE = {"f16": float, "bf16": float, "f32": float, "f64": float, "i32": int,
            "bool": bool}


@dataclass(frozen=True, slots=True)
class Literal:
    """A scalar constant. `value` is a plain Python bool/int/float of the dtype's kind (for f32,
    the float32-rounded value, so equal literals compare equal)."""
    value: Any
    dtype: str

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise DTypeError(f"unsupported dtype {self.dtype!r} for a literal")
        v = np.asarray(self.value).astype(DTYPES[self.dtype]).item()
        object.__setattr__(self, "value", _PY_TYPE[self.dtype](v))

    shape = ()
    ndim = 0

    @property
    def type(self) -> TensorType:
        return TensorType((), self.dtype)

    def array(self) -> np.ndarray:
        """The value as a numpy scalar of its dtype (what the interpreter computes with)."""
        return DTYPES[self.dtype].type(self.value)

    def __repr__(self) -> str:
        return f"Literal({self.value!r}:{self.dtype})"


Atom = "Var | Literal"  # an eqn input or program output


# ----------------------------------------------------------------------------------- params

def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


class Params(Mapping):
    """An immutable, hashable mapping of a primitive's parameters, kept sorted by name so that
    equal parameters print, hash and compare equal (CSE keys on them)."""
    __slots__ = ("_items", "_dict")

    def __init__(self, items=(), **kwargs):
        d = dict(items)
        d.update(kwargs)
        frozen = {k: _freeze(v) for k, v in d.items()}
        for k, v in frozen.items():
            try:
                hash(v)
            except TypeError:
                raise IRError(f"parameter {k}={v!r} is not hashable") from None
        self._items = tuple(sorted(frozen.items()))
        self._dict = dict(self._items)

    def __getitem__(self, k):
        return self._dict[k]

    def __iter__(self):
        return iter(self._dict)

    def __len__(self):
        return len(self._items)

    def __hash__(self):
        return hash(self._items)

    def __eq__(self, other):
        if isinstance(other, Params):
            return self._items == other._items
        return isinstance(other, Mapping) and self._dict == dict(other)

    def items(self):
        return self._items

    def replace(self, **kwargs) -> "Params":
        return Params(self._dict, **kwargs)

    def __repr__(self):
        return "Params(" + ", ".join(f"{k}={v!r}" for k, v in self._items) + ")"


# ----------------------------------------------------------------------------------- primitives

PRIMITIVES: dict[str, "Primitive"] = {}       # name -> primitive (the parser looks names up)
abstract_eval_rules: dict["Primitive", Callable] = {}   # prim -> rule(*TensorType, **params)
vjp_rules: dict["Primitive", Callable] = {}   # prim -> rule(g, ans, *inputs, **params) -> tuple
batching_rules: dict["Primitive", Callable] = {}
"""prim -> rule(args, dims, **params) -> (outs, out_dims) (JAX's `primitive_batchers`): `args`
are the operands with the mapped axis in them, `dims[i]` is where it is in args[i] (None: not
mapped, args[i] is a per-example value); the rule binds ordinary primitives and returns the
result(s) and where the mapped axis is in each (a list for multiple_results primitives). Called
only when some operand is mapped (vkgrad/transforms/batching.py)."""
param_defaults: dict["Primitive", dict] = {}  # prim -> {param: value the printer leaves out}
jvp_rules: dict["Primitive", Callable] = {}
"""prim -> rule(primals, tangents, **params) -> (outs, out tangents), tangents None where
zero: forward mode for the few primitives with no reverse mode (while: JAX's too). Every other
primitive's forward mode is its VJP's VJP (vkgrad.transforms.autodiff.jvp_program)."""
program_transforms: dict[str, Callable] = {}
"""name -> Program transform, for the rules of primitives that hold sub-programs (a scan's VJP
is the VJP program of its body): 'vjp' and 'jvp' (vkgrad.transforms.autodiff's vjp_program,
jvp_program) and 'batch' (vkgrad.transforms.batching.batch_program), registered by those
modules, a layer above the primitives (vkgrad/primitives/control_flow.py)."""


class Primitive:
    """An operation of the IR. Traits drive the passes (never special cases):
       'pure'        no side effects: DCE may drop it, CSE may merge it
       'elementwise' numpy-broadcasting elementwise (the lowering has its GLSL expression)
       'layout'      each output element is one operand element (or a constant) found by index
                     arithmetic: broadcast, reshape, transpose, slice, pad, concatenate, iota
       'commutative' operands may be reordered (CSE canonicalises them)
       'control'     its Program params (a loop's body, a cond's branches) are CLOSED
                     sub-programs: their own inputs and outputs, bound to the eqn's operands
                     and results by the primitive's rules (vkgrad/primitives/control_flow.py);
                     a `fused` body is open instead (its inputs and outputs are the eqn's)
    Elementwise and layout eqns are *fusible*: a generated kernel computes them inline.
    Applying a primitive to values is `vkgrad.tracer.core.bind(prim, *args, **params)`.
    """
    __slots__ = ("name", "traits", "multiple_results")

    def __init__(self, name: str, traits=("pure",), multiple_results: bool = False):
        if name in PRIMITIVES:
            raise IRError(f"a primitive named {name!r} is already defined")
        self.name = name
        self.traits = frozenset(traits)
        self.multiple_results = multiple_results
        PRIMITIVES[name] = self

    @property
    def pure(self) -> bool:
        return "pure" in self.traits

    @property
    def elementwise(self) -> bool:
        return "elementwise" in self.traits

    @property
    def commutative(self) -> bool:
        return "commutative" in self.traits

    @property
    def control(self) -> bool:
        return "control" in self.traits

    @property
    def fusible(self) -> bool:
        return "elementwise" in self.traits or "layout" in self.traits

    def abstract_eval(self, *in_types: TensorType, **params) -> list[TensorType]:
        """Output types from input types (the shape/dtype rule); always a list."""
        rule = abstract_eval_rules.get(self)
        if rule is None:
            raise MissingRuleError(f"primitive '{self.name}' has no shape rule",
                                   primitive=self.name, stage="shape inference")
        out = rule(*in_types, **params)
        return list(out) if self.multiple_results else [out]

    def __repr__(self) -> str:
        return self.name


# ----------------------------------------------------------------------------------- eqn, program

@dataclass(frozen=True, slots=True, eq=False)
class Eqn:
    prim: Primitive
    inputs: tuple
    params: Params
    outputs: tuple
    source: str | None = None
    phase: str = "fwd"
    of: str | None = None   # a backward eqn: the primitive whose derivative it computes (messages)

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not isinstance(self.params, Params):
            object.__setattr__(self, "params", Params(self.params))

    @property
    def out(self) -> Var:
        """The single output (most primitives have one)."""
        return self.outputs[0]

    def replace(self, **changes) -> "Eqn":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True, eq=False)
class Program:
    name: str
    inputs: tuple
    outputs: tuple
    eqns: tuple
    consts: tuple = ()     # ((Var, np.ndarray), ...): arrays captured while tracing
    arg_names: tuple = ()  # where the first inputs come from ("params['w']"), for printing

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "eqns", tuple(self.eqns))
        object.__setattr__(self, "consts", tuple((v, a) for v, a in self.consts))

    def replace(self, **changes) -> "Program":
        return dataclasses.replace(self, **changes)

    @property
    def in_types(self) -> list[TensorType]:
        return [v.type for v in self.inputs]

    @property
    def out_types(self) -> list[TensorType]:
        return [v.type for v in self.outputs]

    def __str__(self) -> str:
        return print_program(self)

    def __repr__(self) -> str:
        return f"<Program {self.name}: {len(self.inputs)} inputs, {len(self.eqns)} eqns>"

    def _repr_markdown_(self) -> str:
        """How a notebook shows a program: its text, with source lines."""
        return f"```\n{print_program(self, source=True)}```\n"
    def _repr_pretty_(self, p, cycle) -> None:
        """IPython/Jupyter show the program text (as jax.make_jaxpr does), not the repr."""
        p.text(print_program(self).rstrip("\n"))


# ----------------------------------------------------------------------------------- text form
# The text format: stable, diffable, one eqn per line, values numbered in order of appearance.
#
#     program loss(%0: f32[64,784], %1: f32[784,10], %2: i32[64]) -> (f32[], f32[784,10]) {
#       %3: f32[64,10] = matmul %0, %1                          # model.py:12
#       %4: f32[64,10] = log_softmax[axis=1] %3                 # model.py:13
#       ...
#       # ---- backward ----
#       %9: f32[784,10] = matmul[transpose_a=True] %0, %8       # model.py:12
#       return %7, %9
#     }
#
# * inputs are numbered first, then consts (`%5: f32[3] = const [1.0, 2.0, 3.0]`; arrays over
#   16 elements print as `const ...`), then eqn outputs, in order;
# * every binding has its type `dtype[d0,d1,...]` (a scalar is `f32[]`);
# * params, sorted by name, in brackets; values are ints, bools, tuples `(3,4)` and dtype
#   names; a param equal to its entry in `param_defaults[prim]` is left out
#   (`matmul %0, %1` means both transpose flags are False);
# * literals are `value:dtype` (`1.0:f32`, `0:i32`, `True:bool`), f32 values printed in the
#   shortest form that reads back to the same float32;
# * `# ---- backward ----` marks where the eqns made by autodiff begin;
# * `source=True` appends `# file:line` of the user's code to each eqn.
#
# (`vkgrad.ir.parser.parse_program` reads this format back.)

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


def sub_programs(params) -> list:
    """[(key, index or None, Program)]: the programs an eqn's params hold (a `fused` body, a
    loop's body, each of a cond's branches, in a tuple)."""
    out = []
    for k, v in params.items():
        if isinstance(v, Program):
            out.append((k, None, v))
        elif isinstance(v, tuple) and v and all(isinstance(b, Program) for b in v):
            out += [(k, i, b) for i, b in enumerate(v)]
    return out


def _is_programs(v) -> bool:
    return isinstance(v, Program) or (isinstance(v, tuple) and bool(v) and
                                      all(isinstance(b, Program) for b in v))


def format_params(prim, params) -> str:
    defaults = param_defaults.get(prim, {})
    shown = [(k, v) for k, v in params.items()
             if not (k in defaults and defaults[k] == v) and not _is_programs(v)]
    if not shown:
        return ""
    return "[" + ", ".join(f"{k}={format_param(v)}" for k, v in shown) + "]"


class _Namer:
    def __init__(self):
        self.names: dict[Var, str] = {}
        self.count = 0      # names given (a body printed twice names its values anew)

    def define(self, v: Var) -> str:
        self.names[v] = f"%{self.count}"
        self.count += 1
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
    if program.arg_names:   # a comment (the parser skips it): which input is which leaf
        lines.append("  # inputs: " + ", ".join(f"%{i} {n}" for i, n in
                                                enumerate(program.arg_names)))
    for v, arr in program.consts:
        lines.append(f"  {name.define(v)}: {type_str(v.shape, v.dtype)} = const "
                     f"{_const_text(arr, v.dtype)}")
    _print_eqns(program.eqns, name, lines, source, "  ")
    lines.append(f"  return {', '.join(name(o) for o in program.outputs)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def value_names(program: Program) -> dict:
    """{Var: '%n'}: the names `print_program` gives (for other views of the same program,
    such as the plan and the graph, to name values as the printed program does)."""
    name = _Namer()
    for v in program.inputs:
        name.define(v)
    for v, _ in program.consts:
        name.define(v)
    _print_eqns(program.eqns, name, [], False, "")
    return dict(name.names)


def format_eqns(eqns, names: dict, indent: str = "", source: bool = False) -> list:
    """Eqn lines as `print_program` writes them, naming values by `names` (value_names)."""
    namer = _Namer()
    namer.names = dict(names)
    namer.count = max((int(n[1:]) for n in names.values()), default=-1) + 1
    lines: list = []
    _print_eqns(eqns, namer, lines, source, indent)
    return lines


def _print_eqns(eqns, name: _Namer, lines: list, source: bool, indent: str,
                closed: bool = False) -> None:
    """One line per eqn. An eqn with a sub-program (a `fused` body) is followed by the body's
    eqns in braces, indented, in the same numbering: the body reads the outer values by their
    names, and its results are the eqn's outputs. A control eqn's closed sub-programs (a scan's
    `jaxpr`, a cond's `branches`) each print inside those braces as `key(inputs) { ... return
    ... }` (`branches[1](...)` for a tuple's entries), numbered on from the outer values."""
    phase = "fwd"
    for e in eqns:
        if e.phase != phase:
            lines.append(indent + (BACKWARD_MARKER if e.phase == "bwd" else "# ---- forward ----"))
            phase = e.phase
        args = ", ".join(name(x) for x in e.inputs)
        lhs = ", ".join(f"{(not closed and name.names.get(o)) or name.define(o)}: "
                        f"{type_str(o.shape, o.dtype)}" for o in e.outputs)
        line = f"{indent}{lhs} = {e.prim.name}{format_params(e.prim, e.params)}"
        line += f" {args}" if args else ""
        bodies = sub_programs(e.params)
        if source and e.source:
            line = f"{line.ljust(_SOURCE_COLUMN)}  # {e.source}"
        lines.append(line + (" {" if bodies else ""))
        if e.prim.control and bodies:
            for key, i, body in bodies:
                _print_closed(body, key if i is None else f"{key}[{i}]", name, lines, source,
                              indent + "  ")
            lines.append(indent + "}")
            continue
        for _, _, body in bodies:
            _print_eqns(body.eqns, name, lines, source, indent + "    ")
            lines.append(indent + "}")


def _print_closed(body: Program, key: str, name: _Namer, lines: list, source: bool,
                  indent: str) -> None:
    ins = ", ".join(f"{name.define(v)}: {type_str(v.shape, v.dtype)}" for v in body.inputs)
    lines.append(f"{indent}{key}({ins}) {{")
    for v, arr in body.consts:
        lines.append(f"{indent}  {name.define(v)}: {type_str(v.shape, v.dtype)} = const "
                     f"{_const_text(arr, v.dtype)}")
    _print_eqns(body.eqns, name, lines, source, indent + "  ", closed=True)
    lines.append(f"{indent}  return {', '.join(name(o) for o in body.outputs)}")
    lines.append(f"{indent}}}")


def _const_text(arr, dtype: str) -> str:
    return ("..." if arr.size > CONST_PRINT_LIMIT else
            "[" + ", ".join(format_scalar(x, dtype) for x in arr.reshape(-1).tolist()) + "]")
