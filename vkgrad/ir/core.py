"""The IR: plain, slotted, immutable data (JAX's jaxpr, minus everything we do not need).

    Var       a value; holds only its type (shape tuple + dtype name). Identity is the value.
    Literal   a scalar constant with a dtype (Python value, weakly typed at the source level).
    Eqn       primitive, inputs (Var | Literal), params (immutable, hashable), outputs (Vars),
              source ("file:line" of the user's code or None), phase ('fwd' | 'bwd').
    Program   name, inputs, outputs (Var | Literal), eqns, consts ((Var, ndarray) pairs for
              non-scalar arrays captured while tracing).

Nothing here is mutated after construction: passes build new objects (`dataclasses.replace`).
Names (%0, %1, ...) exist only in the printer, numbered in order of appearance.

Dtypes are short names: 'f32', 'f64', 'i32', 'bool' (what the printer shows and the lowering
switches on); `np_dtype(name)` gives numpy's.

A `Primitive` is a name plus traits ('pure', 'elementwise', 'commutative'). Rules about a
primitive live in tables keyed by it, each owned by the module that uses it: the shape rules
(`abstract_eval_rules`, here: the tracer and the verifier both need them), the numpy
implementations (`interpreter.impls`), the VJP rules (`autodiff.vjp_rules`), the GLSL templates
(`lowering.rules.glsl_elementwise`), the printer's elided defaults (`printer.param_defaults`).
All of them are filled in beside each primitive's definition in `vkgrad/ir/primitives.py`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from vkgrad.errors import DTypeError, IRError, MissingRuleError

# ----------------------------------------------------------------------------------- dtypes

DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i32": np.dtype(np.int32),
    "bool": np.dtype(np.bool_),
}
FLOAT_DTYPES = frozenset({"f32", "f64"})
NUMERIC_DTYPES = frozenset({"f32", "f64", "i32"})
ALL_DTYPES = frozenset(DTYPES)
_NAME_OF = {v: k for k, v in DTYPES.items()}


def dtype_name(dt) -> str:
    """'f32' for 'f32', 'float32', np.float32, np.dtype('float32'); DTypeError otherwise."""
    if isinstance(dt, str) and dt in DTYPES:
        return dt
    try:
        d = np.dtype(dt)
    except TypeError:
        raise DTypeError(f"{dt!r} is not a dtype") from None
    if d in _NAME_OF:
        return _NAME_OF[d]
    raise DTypeError(f"unsupported dtype {d}: vkgrad computes in float32, float64, int32 and bool")


def canonical_dtype(dt) -> str:
    """The dtype user data of dtype `dt` is stored in: other ints -> i32, float16 -> f32.

    (int64 is numpy's default integer; indices and labels fit int32, which is what GPUs index
    with, so we narrow rather than reject.)"""
    d = np.dtype(dt)
    if d in _NAME_OF:
        return _NAME_OF[d]
    if d.kind in "iu":
        return "i32"
    if d.kind == "f" and d.itemsize <= 4:
        return "f32"
    raise DTypeError(f"unsupported dtype {d}: vkgrad computes in float32, float64, int32 and bool")


def np_dtype(name: str) -> np.dtype:
    return DTYPES[name]


def is_float(name: str) -> bool:
    return name in FLOAT_DTYPES


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


def type_str(shape, dtype) -> str:
    return f"{dtype}[{','.join(str(d) for d in shape)}]"


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


_PY_TYPE = {"f32": float, "f64": float, "i32": int, "bool": bool}


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


class Primitive:
    """An operation of the IR. Traits drive the passes (never special cases):
       'pure'        no side effects: DCE may drop it, CSE may merge it
       'elementwise' numpy-broadcasting elementwise; has a GLSL expression template
       'commutative' operands may be reordered (CSE canonicalises them)
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

    def bind(self, *args, **params):
        """Apply the primitive: emitted into the innermost active trace, or evaluated now."""
        from vkgrad.tracer.core import bind
        return bind(self, args, params)

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
        from vkgrad.ir.printer import print_program
        return print_program(self)

    def __repr__(self) -> str:
        return f"<Program {self.name}: {len(self.inputs)} inputs, {len(self.eqns)} eqns>"
