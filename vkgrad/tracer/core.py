"""Tracing: `bind`, the trace stack, tracers, and running programs by binding their equations.

One kind of trace exists: a `Trace` records every primitive applied to its tracers as an `Eqn`
and, when finished, is a `Program`. Every transform is Program -> Program, so nesting is just a
stack of such traces:

* `bind(prim, args, params)` is the ONE entry point of every operation. With no active trace
  it evaluates now through `eval_eager` (numpy today; the jit issue redirects it to the device
  through `eager_backend`). Otherwise it emits an Eqn into the innermost (top) trace.
* The top trace lifts each argument: its own tracers are Vars; Python and numpy scalars become
  Literals; numpy arrays become consts; a tracer of an OUTER active trace (a closure, as in
  `grad(lambda x: grad(lambda y: x * y)(x))`) becomes an extra input of the inner program,
  remembered in `captured`. A transform evaluates the inner program's result by binding each of
  its eqns into the enclosing trace with those outer tracers as the extra arguments, so the
  outer trace sees the whole dependency (and can differentiate it); the inner transform saw the
  captured value as a constant input. A tracer of a trace that has ENDED leaked out of its
  function: a LeakedTracerError.
* Each Eqn records the first stack frame outside the vkgrad package ("file:line");
  `source_context(src)` overrides that while a VJP rule or a program replay runs, so eqns made
  from another eqn carry the user's line of the original.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Callable

import numpy as np

from vkgrad.errors import (ArgumentError, ConcretizationError, IRError, LeakedTracerError,
                           VkgradError)
from vkgrad.ir import interpreter
from vkgrad.ir.core import (Eqn, Literal, Params, Program, TensorType, Var, canonical_dtype,
                            dtype_name, np_dtype, type_str)

# ----------------------------------------------------------------------------------- sources

_PKG_PREFIX = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_display_cache: dict = {}
_source_override: list = []


def _display(filename: str) -> str:
    cwd = os.getcwd()
    key = (filename, cwd)
    if key not in _display_cache:
        _display_cache[key] = (os.path.relpath(filename, cwd)
                               if filename.startswith(cwd + os.sep) else filename)
    return _display_cache[key]


def user_source() -> str | None:
    """"file:line" of the innermost stack frame outside the vkgrad package (or the override
    set by `source_context`)."""
    if _source_override:
        return _source_override[-1]
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG_PREFIX):
            return f"{_display(fn)}:{f.f_lineno}"
        f = f.f_back
    return None


@contextmanager
def source_context(source: str | None):
    """Eqns bound inside get `source` (when not None) instead of the caller's frame."""
    if source is None:
        yield
        return
    _source_override.append(source)
    try:
        yield
    finally:
        _source_override.pop()


# ----------------------------------------------------------------------------------- traces

_trace_stack: list["Trace"] = []


class Trace:
    """Records eqns on its tracers; `finish(outputs)` makes the Program."""

    def __init__(self, name: str, level: int):
        self.name = name
        self.level = level
        self.inputs: list[Var] = []
        self.eqns: list[Eqn] = []
        self.consts: list[tuple[Var, np.ndarray]] = []
        self._const_of: dict[int, tuple[Any, Var]] = {}   # id(array) -> (array kept alive, Var)
        self.captured: dict[int, tuple["Tracer", Var]] = {}  # id(outer tracer) -> (it, Var)
        self.phase = "fwd"
        self.active = True

    def new_arg(self, shape, dtype: str, source: str | None = None) -> "Tracer":
        v = Var(tuple(shape), dtype)
        self.inputs.append(v)
        return Tracer(self, v, source)

    def lift(self, x) -> Var | Literal:
        """The Var or Literal standing for `x` in this trace (see the module docstring)."""
        if isinstance(x, Tracer):
            if x._trace is self:
                return x._var
            if not x._trace.active:
                raise leaked_error(x)
            hit = self.captured.get(id(x))
            if hit is None:   # a value of an enclosing trace: an extra input of this program
                hit = (x, Var(x._var.shape, x._var.dtype))
                self.captured[id(x)] = hit
            return hit[1]
        if isinstance(x, ArrayOps):   # a concrete vkgrad.Array used inside a trace: a const
            x = np.asarray(x)
        # numpy scalars first: np.float64 is a subclass of Python's float
        if isinstance(x, np.generic) or (isinstance(x, np.ndarray) and x.ndim == 0):
            return Literal(x.item(), canonical_dtype(x.dtype))
        if isinstance(x, (bool, int, float)):
            return Literal(x, _weak_dtype(x))
        if isinstance(x, np.ndarray):
            hit = self._const_of.get(id(x))
            if hit is None:
                arr = np.array(x, dtype=np_dtype(canonical_dtype(x.dtype)), copy=True)
                v = Var(arr.shape, dtype_name(arr.dtype))
                self.consts.append((v, arr))
                hit = (x, v)
                self._const_of[id(x)] = hit
            return hit[1]
        raise ArgumentError(f"an operation got a value of type {type(x).__name__}; vkgrad "
                            "operations take arrays and Python/numpy scalars")

    def emit(self, prim, args, params: Params, source, phase):
        ins = [self.lift(a) for a in args]
        out_types = abstract_eval(prim, [i.type for i in ins], params, source)
        outs = [Var(t.shape, t.dtype) for t in out_types]
        ph = "bwd" if "bwd" in (self.phase, phase) else "fwd"
        self.eqns.append(Eqn(prim, ins, params, outs, source, ph))
        tracers = [Tracer(self, v, source) for v in outs]
        return tracers if prim.multiple_results else tracers[0]

    def finish(self, outputs) -> tuple[Program, list]:
        """The Program (inputs: this trace's args, then captured outer values) and the outer
        values to pass for the captured inputs."""
        outs = [self.lift(o) for o in outputs]
        captured = list(self.captured.values())
        prog = Program(self.name, tuple(self.inputs) + tuple(v for _, v in captured),
                       tuple(outs), tuple(self.eqns), tuple(self.consts))
        return prog, [t for t, _ in captured]


@contextmanager
def new_trace(name: str):
    """Push a fresh trace; it is popped and marked ended (inactive) on exit."""
    t = Trace(name, len(_trace_stack) + 1)
    _trace_stack.append(t)
    try:
        yield t
    finally:
        popped = _trace_stack.pop()
        popped.active = False
        if popped is not t:   # pragma: no cover - a bug in a transform
            raise IRError("trace stack corrupted: traces ended out of order")


def current_trace() -> Trace | None:
    return _trace_stack[-1] if _trace_stack else None


def _weak_dtype(x) -> str:
    """Default dtype of a Python scalar standing alone (float32 default, like JAX)."""
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "i32"
    return "f32"


def abstract_eval(prim, in_types, params, source) -> list[TensorType]:
    try:
        return prim.abstract_eval(*in_types, **params)
    except VkgradError as e:
        raise e.with_context(primitive=prim.name, source=source)
    except Exception as e:   # a shape-rule bug: never surface a bare builtin error
        raise IRError(f"shape rule of '{prim.name}' failed on "
                      f"{', '.join(map(str, in_types))}: {type(e).__name__}: {e}",
                      primitive=prim.name, source=source) from e


# ----------------------------------------------------------------------------------- bind

eager_backend: Callable | None = None
"""If set, `fn(prim, values, params, out_types) -> list[array]` evaluates eager ops instead of
the numpy interpreter (the jit issue points this at the Vulkan device)."""

eager_program_backend: Callable | None = None
"""If set, `fn(program, args) -> list[array]` runs a WHOLE program that `eval_program` would
otherwise evaluate op by op with no trace active (e.g. the joint program of an eager `grad`):
the hook for running a transform's result as one device submission."""


def bind(prim, args, params, *, source: str | None = None, phase: str | None = None):
    """Apply `prim`: emit into the innermost trace, or evaluate concretely with none active."""
    params = params if isinstance(params, Params) else Params(params)
    trace = current_trace()
    if trace is None:
        try:
            return eval_eager(prim, args, params)
        except VkgradError as e:
            raise e.with_context(primitive=prim.name, source=source or user_source())
    return trace.emit(prim, args, params, source or user_source(), phase)


def eval_eager(prim, args, params):
    """Evaluate one primitive on concrete values now: the single eager path."""
    vals = [_concrete(a) for a in args]
    types = [TensorType(v.shape, dtype_name(v.dtype)) for v in vals]
    out_types = abstract_eval(prim, types, params, None)
    run = eager_backend or interpreter.apply
    outs = run(prim, vals, params, out_types)
    return outs if prim.multiple_results else outs[0]


def _concrete(x):
    if isinstance(x, Tracer):
        raise leaked_error(x)
    if isinstance(x, ArrayOps):   # a vkgrad.Array: the eager backend decides where it runs
        return x
    if isinstance(x, (np.ndarray, np.generic)):   # before float: np.float64 is a float
        dt = canonical_dtype(x.dtype)
        return x if x.dtype == np_dtype(dt) else np.asarray(x, dtype=np_dtype(dt))
    if isinstance(x, (bool, int, float)):
        return np_dtype(_weak_dtype(x)).type(x)
    raise ArgumentError(f"an operation got a value of type {type(x).__name__}; vkgrad "
                        "operations take arrays and Python/numpy scalars")


def leaked_error(t: "Tracer") -> LeakedTracerError:
    return LeakedTracerError(
        f"a traced value {t.aval} created at {t._source or '<unknown>'} was used after the "
        f"trace of '{t._trace.name}' ended: it escaped the function being traced (stored in a "
        "global, an attribute or a closure) and is not a real array. Return it from the "
        "function instead, or compute it outside the transformed function.",
        source=user_source())


def eval_program(program: Program, args) -> list:
    """Run `program` by binding each eqn: into the enclosing trace if one is active (keeping
    each eqn's source line and backward marker), else concretely through `eval_eager`."""
    if eager_program_backend is not None and current_trace() is None:
        return list(eager_program_backend(program, list(args)))
    env: dict[Var, Any] = dict(zip(program.inputs, args))
    env.update(program.consts)

    def read(x):
        return x.array() if isinstance(x, Literal) else env[x]

    for e in program.eqns:
        outs = bind(e.prim, [read(x) for x in e.inputs], e.params, source=e.source,
                    phase=e.phase)
        env.update(zip(e.outputs, outs if e.prim.multiple_results else [outs]))
    return [read(o) for o in program.outputs]


# ----------------------------------------------------------------------------------- tracers

def _vnp():
    from vkgrad import numpy as vnp
    return vnp


def _op(name, reflected=False):
    if reflected:
        def method(self, other):
            return getattr(_vnp(), name)(other, self)
    else:
        def method(self, other):
            return getattr(_vnp(), name)(self, other)
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


class ArrayOps:
    """What an array value does under Python's operators and numpy's method names, through
    vkgrad.numpy: shared by Tracer (traced values) and vkgrad.Array (concrete device values).
    Subclasses provide `aval` (a TensorType)."""

    __slots__ = ()

    # --- the abstract value
    @property
    def shape(self) -> tuple:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return np_dtype(self.aval.dtype)

    @property
    def ndim(self) -> int:
        return len(self.aval.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.aval.shape, dtype=np.int64))

    # --- operators (numpy semantics, through vkgrad.numpy)
    __add__, __radd__ = _op("add"), _op("add", True)
    __sub__, __rsub__ = _op("subtract"), _op("subtract", True)
    __mul__, __rmul__ = _op("multiply"), _op("multiply", True)
    __truediv__, __rtruediv__ = _op("divide"), _op("divide", True)
    __pow__, __rpow__ = _op("power"), _op("power", True)
    __matmul__, __rmatmul__ = _op("matmul"), _op("matmul", True)
    __lt__, __le__ = _op("less"), _op("less_equal")
    __gt__, __ge__ = _op("greater"), _op("greater_equal")
    __eq__, __ne__ = _op("equal"), _op("not_equal")
    __and__, __rand__ = _op("logical_and"), _op("logical_and", True)
    __or__, __ror__ = _op("logical_or"), _op("logical_or", True)
    __hash__ = None   # == is elementwise, as in numpy; internal maps key on id()

    def __neg__(self):
        return _vnp().negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _vnp().abs(self)

    def __invert__(self):
        return _vnp().logical_not(self)

    def __getitem__(self, key):
        return _vnp()._getitem(self, key)

    def __len__(self) -> int:
        if not self.shape:
            raise ArgumentError("len() of a 0-d array", source=user_source())
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise ArgumentError("iteration over a 0-d array", source=user_source())
        return (self[i] for i in range(self.shape[0]))

    # --- methods numpy arrays have
    @property
    def T(self):
        return _vnp().transpose(self)

    def reshape(self, *shape, order="C"):
        return _vnp().reshape(self, shape[0] if len(shape) == 1 else shape)

    def astype(self, dtype):
        return _vnp().astype(self, dtype)

    def transpose(self, *axes):
        return _vnp().transpose(self, (axes[0] if len(axes) == 1 else axes) or None)

    def swapaxes(self, a, b):
        return _vnp().swapaxes(self, a, b)

    def squeeze(self, axis=None):
        return _vnp().squeeze(self, axis)

    def ravel(self):
        return _vnp().reshape(self, (-1,))

    flatten = ravel

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return _vnp().sum(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return _vnp().mean(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return _vnp().var(self, axis=axis, ddof=ddof, keepdims=keepdims)

    def max(self, axis=None, out=None, keepdims=False):
        return _vnp().max(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        return _vnp().min(self, axis=axis, keepdims=keepdims)

    def clip(self, min=None, max=None):
        return _vnp().clip(self, min, max)

    def dot(self, other):
        return _vnp().dot(self, other)


class Tracer(ArrayOps):
    """A value being traced: an abstract array (shape, dtype) standing for `_var` in `_trace`.
    Behaves like a numpy array under operators, indexing and the common methods; asking for
    its concrete value raises a ConcretizationError that says what to do instead."""

    __slots__ = ("_trace", "_var", "_source")
    __array_priority__ = 1000   # ndarray (op) Tracer defers to the Tracer

    def __init__(self, trace: Trace, var: Var, source: str | None):
        self._trace = trace
        self._var = var
        self._source = source

    @property
    def aval(self) -> TensorType:
        return self._var.type

    def __repr__(self) -> str:
        return f"Traced<{type_str(self._var.shape, self._var.dtype)}>"

    # --- numpy interop: np.exp(tracer) works, np.asarray(tracer) cannot
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = getattr(_vnp(), ufunc.__name__, None)
        if method == "__call__" and not kwargs and fn is not None:
            return fn(*inputs)
        raise concretization_error(self, f"numpy's {ufunc.__name__}.{method}",
                                   f"use vkgrad.numpy.{ufunc.__name__} instead")

    def __array_function__(self, func, types, args, kwargs):
        fn = getattr(_vnp(), func.__name__, None)
        if fn is None or func.__name__ in ("asarray", "array"):
            raise concretization_error(self, f"numpy.{func.__name__}",
                                       "use the vkgrad.numpy function of that name")
        return fn(*args, **kwargs)

    # --- concretization: Python needs a value the trace does not have
    def __array__(self, *a, **k):
        raise concretization_error(self, "np.asarray()/np.array()",
                                   "use vkgrad.numpy functions on it instead of numpy's")

    def __bool__(self):
        raise concretization_error(
            self, "Python control flow (`if`, `while`, `and`/`or`, bool())",
            "use vnp.where(cond, a, b) to choose between values, or pass the value as a static "
            "argument (static_argnums) if it does not depend on the traced inputs")

    def __float__(self):
        raise concretization_error(self, "float()", "keep it an array (x.sum() is already a "
                                   "0-d array), or return it and convert the result")

    def __int__(self):
        raise concretization_error(self, "int()", "pass the value as a static argument "
                                   "(static_argnums) if it must be a Python int")

    __index__ = __int__

    def __complex__(self):
        raise concretization_error(self, "complex()", "keep it an array")

    def item(self):
        raise concretization_error(self, ".item()", "return the array and read it afterwards")

    def tolist(self):
        raise concretization_error(self, ".tolist()", "return the array and read it afterwards")


def concretization_error(t: Tracer, what: str, instead: str) -> ConcretizationError:
    return ConcretizationError(
        f"{what} needs a concrete value, but got a traced {t.aval}: inside a transformed "
        f"function its value is not known until the program runs. Instead, {instead}.",
        source=user_source())


# ----------------------------------------------------------------------------------- specs

class ShapeDtype:
    """An abstract argument for `make_ir` (and the dump command): a shape and a dtype, no data."""
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype="f32"):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype_name(dtype)

    def __repr__(self):
        return f"ShapeDtype({type_str(self.shape, self.dtype)})"


def abstract_leaf(x, where: str, allow_spec: bool = False) -> TensorType:
    """The type of an argument leaf, or an ArgumentError in the user's terms."""
    if isinstance(x, ArrayOps):   # a tracer, or a vkgrad.Array
        return x.aval
    if isinstance(x, (np.ndarray, np.generic)):   # before float: np.float64 is a float
        try:
            return TensorType(tuple(x.shape), canonical_dtype(x.dtype))
        except VkgradError as e:
            raise ArgumentError(f"{where}: {e.message}") from None
    if isinstance(x, (bool, int, float)):
        return TensorType((), _weak_dtype(x))
    if allow_spec and isinstance(x, ShapeDtype):
        return TensorType(x.shape, x.dtype)
    raise ArgumentError(
        f"{where} has type {type(x).__name__}, which vkgrad cannot trace: arguments must be "
        "arrays, Python/numpy scalars, or tuples/lists/dicts of them (pass other values "
        "through static_argnums or a closure)", source=user_source())
