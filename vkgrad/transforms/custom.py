"""vg.custom_vjp and vg.custom_jvp: functions with derivative rules of their own (JAX's API).

    @vg.custom_vjp
    def clip_gradient(x):
        return x
    def fwd(x):                        # -> (output, residuals)
        return x, None
    def bwd(res, g):                   # -> one cotangent per argument (None: zero)
        return (vnp.clip(g, -1.0, 1.0),)
    clip_gradient.defvjp(fwd, bwd)

    @vg.custom_jvp
    def safe_log1pexp(x):
        return vnp.logaddexp(x, 0.0)
    @safe_log1pexp.defjvp
    def _(primals, tangents):          # -> (output, tangent of the output)
        (x,), (t,) = primals, tangents
        return safe_log1pexp(x), t * nn.sigmoid(x)

Outside any transform the function just runs. Inside one, its body is traced into ONE
custom_*_call eqn (vkgrad/primitives/custom.py) whose VJP is the user's rule:
  * custom_vjp: `fwd` runs in the backward pass (its residuals are recomputed there; after the
    custom call is inlined, CSE shares what fwd has in common with the body), then `bwd`;
  * custom_jvp: reverse mode transposes the user's (linear in the tangents) jvp: the VJP of
    `t -> jvp(primals, t)[1]`, by vkgrad's own reverse mode.
Forward mode (vg.jvp) is derived from the backward (the double-VJP trick): a custom_jvp
function works under jvp, grad and grad of grad wherever its rule is differentiable; a
custom_vjp function under jvp (jacfwd, hessian) is refused with JAX's error, "can't apply
forward-mode autodiff (jvp) to a custom_vjp function" (its rule says nothing about forward
mode). In a jitted function the rule is traced into the program; `optimize(final=True)` inlines
the body.

`f.defjvps(jvp_0, jvp_1, ...)` is JAX's shorthand: one function per argument,
`jvp_i(tangent_i, primal_out, *primals) -> that argument's share of the output tangent` (None:
no share); the shares are summed.

Under an eager transform (grad, jvp, ... on concrete values, not jit) the body and the rule may
use Python control flow on the primals' values (JAX's docs: `if x > 0:` in both), as any
function may there: the rule is traced knowing them (`_knowing_primals`).

nondiff_argnums: those arguments are passed through as Python values (hashable or not) and get
no cotangent; `bwd(*nondiff, res, g)`, `jvp(*nondiff, primals, tangents)` as in JAX. Values the
body closes over from an enclosing trace are inputs of the eqn too, but get no cotangent
(JAX refuses such closures; pass them as arguments).
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np

from vkgrad.errors import ArgumentError
from vkgrad.ir.core import Program, is_float, np_dtype, type_str
from vkgrad.primitives import (CustomRule, broadcast_to, convert, custom_jvp_call_p,
                               custom_vjp_call_p)
from vkgrad.tracer.core import bind, current_trace, eval_program, new_trace, user_source
from vkgrad.tracer.pytree import flatten_up_to, tree_leaves, tree_map, tree_unflatten
from vkgrad.transforms.differentiation import vjp
from vkgrad.transforms.tracing import fun_name, trace_function


class _Custom:
    """What custom_vjp and custom_jvp share: nondiff arguments, tracing the body, binding."""

    prim = None

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)

    def _split(self, args):
        nd = set(self.nondiff_argnums)
        return ([args[i] for i in sorted(nd)], [a for i, a in enumerate(args) if i not in nd])

    def _merge(self, nondiff, dyn):
        it_nd, it_d, out = iter(nondiff), iter(dyn), []
        for i in range(len(nondiff) + len(dyn)):
            out.append(next(it_nd) if i in self.nondiff_argnums else next(it_d))
        return out

    def _missing(self) -> str | None:
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise ArgumentError(f"{fun_name(self.fun)} is a custom-derivative function: pass "
                                "its arguments by position", source=user_source())
        missing = self._missing()
        if missing:
            raise ArgumentError(f"{fun_name(self.fun)}: {missing}", source=user_source())
        if current_trace() is None:          # nothing differentiates it: just run it
            return self.fun(*args)
        nondiff, dyn = self._split(args)
        tr = trace_function(lambda *d: self.fun(*self._merge(nondiff, d)), tuple(dyn),
                            concrete=True)
        n_leaves = len(tr.leaves)

        def cotangents(gs, ins):
            dyn_args = [tree_unflatten(tree, ins[sl]) for tree, sl in zip(tr.arg_trees,
                                                                          tr.arg_slices)]
            cts = self._cotangents(nondiff, dyn_args, tree_unflatten(tr.out_tree, gs), tr)
            flat = []
            for i, (ct, tree) in enumerate(zip(cts, tr.arg_trees)):
                for c, v in zip(flatten_up_to(tree, ct), tr.program.inputs[tr.arg_slices[i]]):
                    flat.append(_fit(c, v, self.fun) if is_float(v.dtype) else None)
            return tuple(flat) + (None,) * (len(ins) - n_leaves)

        rule_vjp = cotangents
        if current_trace().known is not None:   # an eager transform: the primals have values
            def rule_vjp(gs, ins):
                return _knowing_primals(cotangents, gs, ins, tr.args, tr.program)

        rule = CustomRule(fun_name(self.fun), tr.program, rule_vjp)
        outs = bind(self.prim, *tr.args, rule=rule)
        return tree_unflatten(tr.out_tree, outs)


def _knowing_primals(cotangents, gs, ins, sources, body: Program) -> tuple:
    """`cotangents(gs, ins)` traced where the primal inputs `ins` have the values of `sources`
    (the call's arguments in the eager transform's trace that made it), so a rule with Python
    control flow on them (`if x > 0`) works as the body does; a value is computed only if the
    rule asks for it, and the cotangents `gs` stay unknown. The traced rule is replayed on `ins`
    and `gs`, so the cotangents still depend on the primals (a second derivative differentiates
    them)."""
    with new_trace(f"the derivative rule of {body.name}") as t:
        t_ins = [t.new_arg(v.shape, v.dtype) for v in body.inputs]
        t.known = dict(zip(t.inputs, sources))
        t_gs = [t.new_arg(v.type.shape, v.type.dtype) for v in body.outputs]
        cts = cotangents(t_gs, t_ins)
        present = [j for j, c in enumerate(cts) if c is not None]
        program, captured = t.finish([cts[j] for j in present])
    outs = eval_program(program, list(ins) + list(gs) + captured)
    flat = [None] * len(cts)
    for j, o in zip(present, outs):
        flat[j] = o
    return tuple(flat)


def _fit(c, v, fun):
    """A user's cotangent for input v: None stays None; shapes must match."""
    if c is None:
        return None
    shape = tuple(getattr(c, "shape", np.shape(c)))
    if shape != v.shape:
        if shape == ():
            return broadcast_to(convert(c, v.dtype), v.shape)
        raise ArgumentError(f"the derivative rule of {fun_name(fun)} returned a cotangent of "
                            f"shape {shape} for an argument of type "
                            f"{type_str(v.shape, v.dtype)}")
    return convert(c, v.dtype) if hasattr(c, "shape") else np_dtype(v.dtype).type(c)


class custom_vjp(_Custom):
    """`f = vg.custom_vjp(fun)`, then `f.defvjp(fwd, bwd)` (module docstring)."""

    prim = custom_vjp_call_p
    fwd = bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def _missing(self):
        return None if self.fwd is not None else \
            "a custom_vjp function needs its rule: call .defvjp(fwd, bwd) before using it"

    def _cotangents(self, nondiff, dyn_args, g, tr):
        res = self.fwd(*self._merge(nondiff, dyn_args))
        if not isinstance(res, tuple) or len(res) != 2:
            raise ArgumentError(f"the fwd of {fun_name(self.fun)} must return a pair "
                                "(output, residuals)")
        cts = self.bwd(*nondiff, res[1], g)
        if not isinstance(cts, (tuple, list)) or len(cts) != len(dyn_args):
            raise ArgumentError(f"the bwd of {fun_name(self.fun)} must return a tuple with "
                                f"one cotangent per differentiable argument ({len(dyn_args)})")
        return cts


class custom_jvp(_Custom):
    """`f = vg.custom_jvp(fun)`, then `@f.defjvp` on `jvp(primals, tangents) -> (out,
    tangent_out)` (module docstring)."""

    prim = custom_jvp_call_p
    jvp = None

    def defjvp(self, jvp):
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, each `(tangent, primal_out, *primals) -> tangent_out`, None
        for an argument whose tangent contributes nothing; the contributions are summed."""
        if self.nondiff_argnums:
            raise ArgumentError(f"{fun_name(self.fun)}: defjvps cannot be used with "
                                "nondiff_argnums (use defjvp)")

        def jvp(primals, tangents):
            if len(jvps) != len(primals):
                raise ArgumentError(f"{fun_name(self.fun)}: defjvps was given {len(jvps)} "
                                    f"rules for {len(primals)} arguments")
            out = self(*primals)
            shares = [rule(t, out, *primals) for rule, t in zip(jvps, tangents)
                      if rule is not None]
            if not shares:
                return out, tree_map(lambda o: o * 0, out)
            return out, tree_map(lambda *ts: functools.reduce(lambda a, b: a + b, ts), *shares)

        self.jvp = jvp

    def _missing(self):
        return None if self.jvp is not None else \
            "a custom_jvp function needs its rule: decorate it with @f.defjvp first"

    def _cotangents(self, nondiff, dyn_args, g, tr):
        # The VJP is the transpose of the tangent map t -> jvp(primals, t)[1], which is linear:
        # reverse mode of that map at t = 0 (any t gives the same transpose).
        leaves = [tr.program.inputs[k] for k in range(len(tr.leaves))]
        fl = [k for k, v in enumerate(leaves) if is_float(v.dtype)]

        def tangent_map(*float_tangents):
            t_leaves = [np.zeros(v.shape, np_dtype(v.dtype)) for v in leaves]
            for k, t in zip(fl, float_tangents):
                t_leaves[k] = t
            tangents = [tree_unflatten(tree, t_leaves[sl]) for tree, sl in zip(tr.arg_trees,
                                                                               tr.arg_slices)]
            out = self.jvp(*nondiff, tuple(dyn_args), tuple(tangents))
            if not isinstance(out, tuple) or len(out) != 2:
                raise ArgumentError(f"the jvp rule of {fun_name(self.fun)} must return a pair "
                                    "(output, tangent of the output)")
            return out[1]

        zeros = [np.zeros(leaves[k].shape, np_dtype(leaves[k].dtype)) for k in fl]
        _, f_vjp = vjp(tangent_map, *zeros)
        by_leaf = dict(zip(fl, f_vjp(g)))
        flat = [by_leaf.get(k) for k in range(len(leaves))]
        return [tree_unflatten(tree, flat[sl]) for tree, sl in zip(tr.arg_trees, tr.arg_slices)]


# ------------------------------------------------------- JAX's other derivative/tracing helpers

def custom_gradient(fun):
    """jax.custom_gradient: `fun(*args) -> (out, vjp)` where `vjp(g)` gives the cotangents of
    the arguments (a tuple, or one value for one argument); the result is a function of args
    whose derivative is that vjp. Built on custom_vjp (fwd runs fun again in the backward
    pass, as every custom_vjp rule here does)."""
    def primal(*args):
        return fun(*args)[0]
    primal.__name__ = fun_name(fun)

    def bwd(vjp_fn, g):
        cts = vjp_fn(g)
        return tuple(cts) if isinstance(cts, (tuple, list)) else (cts,)

    f = custom_vjp(primal)
    f.defvjp(fun, bwd)     # fun's (out, vjp) is the (output, residuals) pair fwd returns
    return f


def closure_convert(fun, *example_args):
    """(converted, consts) (jax.closure_convert): `converted(*args, *consts)` computes
    `fun(*args)` with the values fun closes over from an enclosing trace (a jit, a grad) as
    the explicit arguments `consts`, so a custom_vjp rule can take them. Outside any trace
    there are none: consts is []."""
    if current_trace() is None:
        return (lambda *args: fun(*args)), []
    tr = trace_function(fun, example_args)
    consts = list(tr.captured)
    n_args = len(example_args)

    def converted(*args_and_consts):
        args, given = args_and_consts[:n_args], args_and_consts[n_args:]
        leaves = [x for a in args for x in tree_leaves(a)]
        return tree_unflatten(tr.out_tree, eval_program(tr.program, leaves + list(given)))

    converted.__name__ = fun_name(fun)
    return converted, consts


def named_call(fun, *, name: str | None = None):
    """fun, its traced eqns under `name` (jax.named_call): vkgrad's programs name eqns by
    their source lines, not by a name stack, so this is fun with __name__ `name`."""
    @functools.wraps(fun)
    def named(*args, **kwargs):
        return fun(*args, **kwargs)
    if name is not None:
        named.__name__ = named.__qualname__ = name
    return named


@contextlib.contextmanager
def named_scope(name: str):
    """JAX's name-stack scope: vkgrad's programs name eqns by their source lines, so the
    block runs as it is."""
    if not isinstance(name, str):
        raise ArgumentError(f"named_scope: the name must be a str, got {type(name).__name__}")
    yield


@contextlib.contextmanager
def ensure_compile_time_eval():
    """JAX's `with jax.ensure_compile_time_eval():` (values of constants computed while
    tracing): vkgrad already computes an op on concrete values at once, inside jit too, so
    the block runs as it is."""
    yield
