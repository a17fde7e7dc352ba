"""Tracing: `bind`, the trace stack, tracers, and running programs by binding their equations.

One kind of trace exists: a `Trace` records every primitive applied to its tracers as an `Eqn`
and, when finished, is a `Program`. Every transform is Program -> Program, so nesting is just a
stack of such traces:

* `bind(prim, *args, **params)` is the ONE entry point of every operation. With no active
  trace it evaluates now through `eval_eager` (on the interpreter, or on the device of the
  vkgrad.Arrays among the arguments), giving vkgrad.Arrays. Otherwise it emits an Eqn into
  the innermost trace.
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
* A trace made by an eager transform (grad, vjp, jvp, ... on concrete arguments) knows its
  inputs' values (`Trace.known`: each a value, or a tracer of an enclosing trace that knows
  its own), so `bool(x > 0)`, `float(x)`, `int(n)` on a tracer compute its value on the
  interpreter (`Trace.value_of`, each eqn once) and Python control flow works, as in JAX
  outside jit. An abstract trace (jit, vmap, make_ir) knows none: a ConcretizationError.

The trace stack and the source override are per thread: a trace in one thread never records
another thread's operations, and an eager call in a thread with no trace of its own runs
eagerly even while another thread is tracing.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import Any

import numpy as np

from vkgrad.errors import (ArgumentError, ConcretizationError, IRError, IntegerOverflowError,
                           LeakedTracerError, VkgradError)
from vkgrad.ir import interpreter
from vkgrad.dtypes import canonical_array, check_int
from vkgrad.ir.core import (Eqn, Literal, Params, Program, TensorType, Var, canonical_dtype,
                            dtype_name, np_dtype, type_str)

# ----------------------------------------------------------------------------------- sources

_PKG_PREFIX = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_display_cache: dict = {}


class _ThreadState(threading.local):
    """What tracing keeps per thread: the stack of active traces and the source overrides
    (`source_context`). Module-level lists would let thread B's eager ops land in thread A's
    trace, and B's jitted calls be inlined into it."""

    def __init__(self):
        self.traces: list["Trace"] = []
        self.sources: list = []
        self.deriving: list = []   # the primitives whose VJP rules are running (derivative_of)


_state = _ThreadState()


def _display(filename: str) -> str:
    cwd = os.getcwd()
    key = (filename, cwd)
    if key not in _display_cache:
        _display_cache[key] = (os.path.relpath(filename, cwd)
                               if filename.startswith(cwd + os.sep) else filename)
    return _display_cache[key]


def source_location(filename: str, line: int) -> str:
    """"file:line" as the user knows it: relative to the working directory, or, for code typed
    into IPython/Jupyter (a temporary file such as /tmp/ipykernel_14804/2871931229.py), the
    cell's name as IPython's tracebacks give it: "Cell In[7], line 1"."""
    ipython = sys.modules.get("IPython")   # never imported here: only when the user runs it
    if ipython is not None:
        shell = ipython.get_ipython()
        name = getattr(getattr(shell, "compile", None), "format_code_name", None)
        cell = name(filename) if name is not None else None   # None: not a cell's file
        if cell:
            return f"{cell[0]} {cell[1]}, line {line}"
    return f"{_display(filename)}:{line}"


def user_source() -> str | None:
    """Where the user's code is (`source_location`) of the innermost stack frame outside the
    vkgrad package (or the override set by `source_context`)."""
    sources = _state.sources
    if sources:
        return sources[-1]
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG_PREFIX):
            return source_location(fn, f.f_lineno)
        f = f.f_back
    return None


@contextmanager
def derivative_of(prim_name: str):
    """Backward eqns bound inside are part of the derivative of `prim_name` (Eqn.of: debug_nans
    says "div in the derivative of sqrt")."""
    _state.deriving.append(prim_name)
    try:
        yield
    finally:
        _state.deriving.pop()


def api_name() -> str:
    """The name of the vkgrad function the user called: the outermost frame of the vkgrad
    package below the user's (for JAX's messages, "requested in zeros")."""
    f, name = sys._getframe(1), "?"
    while f is not None and f.f_code.co_filename.startswith(_PKG_PREFIX):
        name, f = f.f_code.co_name, f.f_back
    return name


@contextmanager
def source_context(source: str | None):
    """Eqns bound inside get `source` (when not None) instead of the caller's frame."""
    if source is None:
        yield
        return
    sources = _state.sources
    sources.append(source)
    try:
        yield
    finally:
        sources.pop()


# ----------------------------------------------------------------------------------- traces

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
        # the concrete value of each input (a value, or a tracer of an enclosing trace), when
        # an eager transform traces concrete arguments; None: an abstract trace (jit, vmap)
        self.known: dict[Var, Any] | None = None
        self._values: dict | None = None   # the values computed so far (value_of)
        self._evaluated = 0                # how many of self.eqns they cover
        self.control: str | None = None   # "the body of vg.lax.scan": for errors inside one

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
            return Literal(canonical_array(np.asarray(x)).item(), canonical_dtype(x.dtype))
        if isinstance(x, (bool, int, float)):
            return Literal(x, _weak_dtype(x))
        if isinstance(x, np.ndarray):
            hit = self._const_of.get(id(x))
            if hit is None:
                arr = np.array(canonical_array(x), copy=True)
                v = Var(arr.shape, dtype_name(arr.dtype))
                self.consts.append((v, arr))
                hit = (x, v)
                self._const_of[id(x)] = hit
            return hit[1]
        raise ArgumentError(f"an operation got a value of type {type(x).__name__}; vkgrad "
                            "operations take arrays and Python/numpy scalars")

    def value_of(self, var: Var):
        """var's concrete value, computed on the interpreter from the known input values (each
        eqn once, as Python asks), or None in an abstract trace or when it depends on an input
        whose value is not known (a trace may know some inputs only: a custom rule's primals,
        not its cotangents)."""
        if self.known is None:
            return None
        env = self._values
        if env is None:
            env = self._values = dict(self.consts)
        for v, src in list(self.known.items()) + [(v, t) for t, v in self.captured.values()]:
            if v not in env:
                value = concrete_value(src)
                if value is not None:
                    env[v] = value
        eqns = self.eqns
        while var not in env and self._evaluated < len(eqns):
            e = eqns[self._evaluated]
            self._evaluated += 1
            if any(isinstance(x, Var) and x not in env for x in e.inputs):
                continue   # computed from an input whose value is not known: neither are its
            outs = interpreter.apply(e.prim, [x.array() if isinstance(x, Literal) else env[x]
                                              for x in e.inputs],
                                     e.params, [o.type for o in e.outputs])
            env.update(zip(e.outputs, outs))
        return env.get(var)

    def emit(self, prim, args, params: Params, source, phase, of=None):
        ins = [self.lift(a) for a in args]
        out_types = abstract_eval(prim, [i.type for i in ins], params, source)
        outs = [Var(t.shape, t.dtype) for t in out_types]
        ph = "bwd" if "bwd" in (self.phase, phase) else "fwd"
        if ph == "bwd" and of is None and _state.deriving:
            of = _state.deriving[-1]
        self.eqns.append(Eqn(prim, ins, params, outs, source, ph, of))
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
    stack = _state.traces
    t = Trace(name, len(stack) + 1)
    stack.append(t)
    try:
        yield t
    finally:
        popped = stack.pop()
        popped.active = False
        if popped is not t:   # pragma: no cover - a bug in a transform
            raise IRError("trace stack corrupted: traces ended out of order")


def concrete_value(src):
    """The concrete value of `src`, or None where it is not known now: a tracer (its value, if
    its trace knows it), an Array, numpy data or a Python scalar."""
    if isinstance(src, Tracer):   # its trace may have ended: its values are still what they were
        return src._trace.value_of(src._var)
    return np.asarray(src)


def current_trace() -> Trace | None:
    stack = _state.traces
    return stack[-1] if stack else None


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

def bind(prim, *args, **params):
    """Apply `prim` to `args` (the ONE entry point of every operation; JAX's `prim.bind`):
    emitted into the innermost trace, or evaluated now when none is active."""
    return bind_eqn(prim, args, params)


def bind_eqn(prim, args, params, *, source: str | None = None, phase: str | None = None,
             of: str | None = None):
    """`bind` with an explicit source line, phase and derivative (replaying an eqn of another
    program)."""
    params = params if isinstance(params, Params) else Params(params)
    trace = current_trace()
    if trace is None:
        try:
            return eval_eager(prim, args, params)
        except VkgradError as e:
            raise e.with_context(primitive=prim.name, source=source or user_source())
    return trace.emit(prim, args, params, source or user_source(), phase, of)


def eval_eager(prim, args, params):
    """Evaluate one primitive on concrete values now: the single eager path. The concrete array
    class (vkgrad.Array) runs it where its values live: their device, else the interpreter."""
    vals = [_concrete(a) for a in args]
    types = [v.aval if isinstance(v, ArrayOps) else TensorType(v.shape, dtype_name(v.dtype))
             for v in vals]
    out_types = abstract_eval(prim, types, params, None)
    outs = _array_owner(vals)._eager_apply(prim, vals, params, out_types)
    return outs if prim.multiple_results else outs[0]


_ARRAY: list = [None]   # the concrete array class: vkgrad.tracer.array.Array registers itself


def register_array(cls) -> None:
    """`cls` (vkgrad.Array, defined above this module's layer-mates) makes eager results."""
    _ARRAY[0] = cls


def _array_owner(values):
    """The concrete array class of the first concrete array among `values` (vkgrad.Array, or a
    class of its own that a test defines), else vkgrad.Array."""
    for v in values:
        if isinstance(v, ArrayOps) and not isinstance(v, Tracer):
            return type(v)
    return _ARRAY[0]


def _concrete(x):
    if isinstance(x, Tracer):
        raise leaked_error(x)
    if isinstance(x, ArrayOps):   # a vkgrad.Array: the eager backend decides where it runs
        return x
    if isinstance(x, (np.ndarray, np.generic)):   # before float: np.float64 is a float
        return canonical_array(x)
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
    """Run `program`: with no trace active, the WHOLE program where the concrete arrays among
    the arguments live (the joint program of an eager `grad`: on the interpreter, or one device
    submission), giving vkgrad.Arrays; inside a trace, by binding each eqn into it (keeping each
    eqn's source line and backward marker)."""
    if current_trace() is None:
        return list(_array_owner(args)._eager_program(program, list(args)))
    env: dict[Var, Any] = dict(zip(program.inputs, args))
    env.update(program.consts)

    def read(x):
        return x.array() if isinstance(x, Literal) else env[x]

    for e in program.eqns:
        outs = bind_eqn(e.prim, [read(x) for x in e.inputs], e.params, source=e.source,
                        phase=e.phase, of=e.of)
        env.update(zip(e.outputs, outs if e.prim.multiple_results else [outs]))
    return [read(o) for o in program.outputs]


# ----------------------------------------------------------------------------------- tracers

class ArrayOps:
    """What every array value of vkgrad shares: Tracer (a traced value) and vkgrad.Array (a
    concrete value on a backend). Subclasses provide `aval` (a TensorType). Python's operators
    and numpy's method names (`x + y`, `x @ w`, `x[i]`, `x.sum()`, `x.T`, ...) are installed on
    this class by vkgrad.numpy, which defines what they mean; this layer only knows shapes.

    A concrete subclass runs operations on its own values: `_eager_apply(prim, values, params,
    out_types)` and `_eager_program(program, values)` (see `eval_eager` and `eval_program`)."""

    __slots__ = ()
    __hash__ = None   # == is elementwise, as in numpy; internal maps key on id()

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

    def __len__(self) -> int:
        if not self.shape:
            raise ArgumentError("len() of a 0-d array", source=user_source())
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise ArgumentError("iteration over a 0-d array", source=user_source())
        return (self[i] for i in range(self.shape[0]))


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

    # --- concretization: Python needs a value. An eager transform traces concrete arguments
    # (as JAX's outside jit), so a value computed from them is known; in an abstract trace (jit,
    # vmap, make_ir) it is not, and asking for it is a ConcretizationError saying what to do
    def _known(self, what: str, instead: str) -> np.ndarray:
        value = self._trace.value_of(self._var) if self._trace.active else None
        if value is None:
            raise concretization_error(self, what, instead)
        return value

    def __array__(self, *a, **k):   # as JAX's: a numpy value would silently cut the gradient
        raise concretization_error(self, "np.asarray()/np.array()",
                                   "use vkgrad.numpy functions on it instead of numpy's")

    def __bool__(self):
        inner = current_trace()
        if inner is not None and inner.control:
            raise concretization_error(
                self, f"Python control flow (`if`, `while`, `and`/`or`, bool()) in {inner.control}",
                "use vg.lax.cond(pred, true_fun, false_fun, *operands) to branch (vg.lax.switch "
                "for more branches, vg.lax.while_loop to loop), or vnp.where(cond, a, b) to "
                "choose between values")
        return bool(self._known(
            "Python control flow (`if`, `while`, `and`/`or`, bool())",
            "use vnp.where(cond, a, b) to choose between values, or pass the value as a static "
            "argument (static_argnums) if it does not depend on the traced inputs"))

    def __float__(self):
        return float(self._known("float()", "keep it an array (x.sum() is already a 0-d "
                                 "array), or return it and convert the result"))

    def __int__(self):
        return int(self._known("int()", "pass the value as a static argument (static_argnums) "
                               "if it must be a Python int"))

    def __index__(self):
        return int(self._known("int()", "pass the value as a static argument (static_argnums) "
                               "if it must be a Python int"))

    def __complex__(self):
        return complex(self._known("complex()", "keep it an array"))

    def item(self, *args):
        return self._known(".item()", "return the array and read it afterwards").item(*args)

    def tolist(self):
        return self._known(".tolist()", "return the array and read it afterwards").tolist()


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
            if x.dtype.kind in "iu":
                canonical_array(np.asarray(x))      # an int64 value beyond int32: an error
            return TensorType(tuple(x.shape), canonical_dtype(x.dtype))
        except IntegerOverflowError as e:
            raise IntegerOverflowError(f"{where}: {e.message}") from None
        except VkgradError as e:
            raise ArgumentError(f"{where}: {e.message}") from None
    if isinstance(x, int) and not isinstance(x, bool):
        check_int(x)   # an argument becomes an int32 array (JAX raises OverflowError too)
    if isinstance(x, (bool, int, float)):
        return TensorType((), _weak_dtype(x))
    if allow_spec and isinstance(x, ShapeDtype):
        return TensorType(x.shape, x.dtype)
    raise ArgumentError(
        f"{where} has type {type(x).__name__}, which vkgrad cannot trace: arguments must be "
        "arrays, Python/numpy scalars, or tuples/lists/dicts of them (pass other values "
        "through static_argnums or a closure)", source=user_source())
