"""The derivative transforms users call: grad, value_and_grad, vjp, jvp, linearize.

Each one is the same three steps:
  1. trace `fun` on abstract versions of its (flattened pytree) arguments into a Program, in a
     fresh trace pushed on top of whatever is active (vkgrad.transforms.tracing);
  2. transform the Program (vkgrad.transforms.autodiff) and optimise it (vkgrad.passes);
  3. evaluate the result with `eval_program`, which binds each eqn: concretely (numpy) when no
     trace is active, or into the enclosing trace when the transform was called on tracers
     (grad of grad, grad inside a traced function). Values the function closed over from an
     enclosing trace were captured as extra program inputs (constants for THIS transform) and
     are passed back in here, so the enclosing trace sees -- and can differentiate -- them.

When the result is evaluated inside an enclosing trace, the program may still be differentiated
by it, so stop_gradient is kept (`optimize(final=False)`); evaluated concretely it is removed.
"""

from __future__ import annotations

import functools

import numpy as np

from vkgrad.errors import ArgumentError, GradError
from vkgrad.ir.core import is_float, np_dtype, type_str
from vkgrad.ir.verifier import checked
from vkgrad.passes import optimize
from vkgrad.primitives import broadcast_to, convert
from vkgrad.transforms.autodiff import grad_program, jvp_program, vjp_program
from vkgrad.transforms.tracing import (bind_kwargs, check_function, fun_name, fun_where,
                                       is_final, normalize_argnums, to_user, trace_function)
from vkgrad.tracer.core import ArrayOps, eval_program, user_source
from vkgrad.tracer.pytree import TreeDef, tree_flatten, tree_unflatten
from vkgrad.traceback_util import api_boundary


def value_and_grad(fun, argnums=0, has_aux=False):
    """`value_and_grad(fun)(*args) -> (value, grads)` (`((value, aux), grads)` with has_aux).

    fun must return a float scalar (or (scalar, aux)). grads has the structure of
    args[argnums] (a tuple of them when argnums is a tuple)."""
    check_function(fun, "value_and_grad")
    return _value_and_grad(fun, argnums, has_aux, keep_value=True)


def _value_and_grad(fun, argnums, has_aux, keep_value):
    name = fun_name(fun)

    @api_boundary
    @functools.wraps(fun)
    def value_and_grad_fun(*args, **kwargs):
        nums = normalize_argnums(argnums, len(args))
        f, args, nums = _close_over_untraceable(bind_kwargs(fun, kwargs), args, nums)
        tr = trace_function(f, args, concrete=True)
        wrt = []   # the inputs first (as JAX): an integer input is the usual cause of both
        for i in nums:
            for k in range(tr.arg_slices[i].start, tr.arg_slices[i].stop):
                v = tr.program.inputs[k]
                if not is_float(v.dtype):
                    raise GradError(
                        f"grad of {name} with respect to argument {i}: it holds "
                        f"{type_str(v.shape, v.dtype)} values (an integer input), and only "
                        "float arguments have gradients. Pass floats (e.g. 3.0, not 3, or "
                        "x.astype(np.float32)), or leave integer arguments (indices, labels) "
                        "out of argnums.", source=user_source())
                wrt.append(k)
        value_tree = _value_tree(tr.out_tree, has_aux, name)
        out0 = tr.program.outputs[0] if tr.program.outputs else None
        if value_tree.kind != "leaf" or not is_float(out0.dtype) or out0.shape != ():
            got = type_str(out0.shape, out0.dtype) if value_tree.kind == "leaf" else \
                f"a pytree {value_tree}"
            raise GradError(
                f"grad of {name} (defined at {fun_where(fun)}) needs it to return a float "
                f"scalar, but it returned {got}. Reduce it to a scalar (e.g. .sum() or "
                ".mean()) or use vkgrad.vjp for non-scalar results.", source=user_source())
        joint = checked(grad_program(tr.program, wrt), f"autodiff of {name}")
        n = len(tr.program.outputs)
        if not keep_value:   # grad: the value itself is not returned (aux still is)
            joint = joint.replace(outputs=joint.outputs[1:])
        joint = optimize(joint, final=is_final())
        res = eval_program(joint, tr.args)
        if not keep_value:
            res = [None] + res
        out = tree_unflatten(tr.out_tree, [to_user(r) for r in res[:n]])
        grads, pos = [], n
        for i in nums:
            sl = tr.arg_slices[i]
            grads.append(tree_unflatten(tr.arg_trees[i],
                                        [to_user(r) for r in res[pos:pos + sl.stop - sl.start]]))
            pos += sl.stop - sl.start
        g = tuple(grads) if isinstance(argnums, (tuple, list)) else grads[0]
        return (tuple(out) if has_aux else out), g

    return value_and_grad_fun


def _traceable(a) -> bool:
    """Whether every leaf of `a` is an array or a number (what tracing can take as input)."""
    return all(isinstance(leaf, (bool, int, float, np.ndarray, np.generic, ArrayOps))
               for leaf in tree_flatten(a)[0])


def _close_over_untraceable(fun, args, nums):
    """(fun, args, nums) with the arguments outside argnums that are not arrays (a function, a
    string: JAX passes them through as they are, so that `grad(app, 1)(f, x)` works) closed
    over, and nums renumbered for the arguments left."""
    fixed = {i: a for i, a in enumerate(args) if i not in nums and not _traceable(a)}
    if not fixed:
        return fun, args, nums
    keep = [i for i in range(len(args)) if i not in fixed]

    @functools.wraps(fun)
    def closed(*dyn):
        full = list(dyn)
        for i in sorted(fixed):
            full.insert(i, fixed[i])
        return fun(*full)
    return closed, tuple(args[i] for i in keep), [keep.index(i) for i in nums]


def grad(fun, argnums=0, has_aux=False):
    """`grad(fun)(*args)`: the gradient of a float-scalar function with respect to
    args[argnums] (same pytree structure); `(grads, aux)` with has_aux."""
    check_function(fun, "grad")
    vg = _value_and_grad(fun, argnums, has_aux, keep_value=False)

    @api_boundary
    @functools.wraps(fun)
    def grad_fun(*args, **kwargs):
        out, g = vg(*args, **kwargs)
        return (g, out[1]) if has_aux else g

    return grad_fun


def _value_tree(out_tree: TreeDef, has_aux: bool, name: str) -> TreeDef:
    if not has_aux:
        return out_tree
    if out_tree.kind not in ("tuple", "list") or len(out_tree.children) != 2:
        raise GradError(f"has_aux=True needs {name} to return a pair (value, aux), got "
                        f"{out_tree}", source=user_source())
    return out_tree.children[0]


@api_boundary
def vjp(fun, *primals, has_aux=False):
    """`vjp(fun, *primals) -> (out, vjp_fn)` (`(out, vjp_fn, aux)` with has_aux).

    `vjp_fn(cotangent)` takes a pytree like `out` and returns a tuple with one entry per primal
    (its structure), holding the cotangent of each float leaf and None for integer leaves."""
    check_function(fun, "vjp")
    name = fun_name(fun)
    tr = trace_function(fun, primals, concrete=True)
    value_tree = _value_tree(tr.out_tree, has_aux, name)
    nv = value_tree.num_leaves
    outs = eval_program(optimize(tr.program, final=is_final()), tr.args)
    outs = [to_user(o) for o in outs]
    out_all = tree_unflatten(tr.out_tree, outs)
    value = out_all[0] if has_aux else out_all
    wrt = [k for k in range(len(tr.leaves)) if is_float(tr.program.inputs[k].dtype)]
    ct_outputs = [j for j in range(nv) if is_float(tr.program.outputs[j].dtype)]
    joint = checked(vjp_program(tr.program, wrt, ct_outputs), f"autodiff of {name}")
    optimized: dict = {}

    @api_boundary
    def vjp_fn(cotangent):
        cts, ct_tree = tree_flatten(cotangent)
        if ct_tree != value_tree:
            raise ArgumentError(f"the cotangent passed to vjp_fn of {name} has structure "
                                f"{ct_tree}, but {name} returned {value_tree}",
                                source=user_source())
        ct_vals = []
        for j in ct_outputs:
            o, c = tr.program.outputs[j], cts[j]
            if tuple(np.shape(c)) != o.shape:
                raise ArgumentError(f"cotangent {j} for vjp_fn of {name} has shape "
                                    f"{tuple(np.shape(c))}, the result has "
                                    f"{type_str(o.shape, o.dtype)}", source=user_source())
            ct_vals.append(c if isinstance(c, ArrayOps) and c.aval.dtype == o.dtype else
                           _cast(c, o.dtype))
        final = is_final()
        if final not in optimized:   # once per kind of use (jacrev calls vjp_fn per row)
            optimized[final] = optimize(joint, final=final)
        res = eval_program(optimized[final], tr.args + ct_vals)[len(tr.program.outputs):]
        by_leaf = dict(zip(wrt, (to_user(r) for r in res)))
        return tuple(tree_unflatten(tr.arg_trees[i], [by_leaf.get(k) for k in range(
            tr.arg_slices[i].start, tr.arg_slices[i].stop)]) for i in range(len(primals)))

    return (value, vjp_fn, out_all[1]) if has_aux else (value, vjp_fn)


def _cast(x, dtype):
    if isinstance(x, ArrayOps):
        return convert(x, dtype)
    return np.asarray(x, dtype=np_dtype(dtype))


@api_boundary
def jvp(fun, primals, tangents):
    """`jvp(fun, primals, tangents) -> (out, tangent_out)`: forward mode, J u.

    Implemented by the double-VJP trick (vkgrad.transforms.autodiff.jvp_program): no JVP rule table.
    Tangents of integer primals are ignored; integer results get zero tangents."""
    check_function(fun, "jvp")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)) or \
            len(primals) != len(tangents):
        raise ArgumentError("jvp takes primals and tangents as tuples of equal length",
                            source=user_source())
    tr = trace_function(fun, tuple(primals), concrete=True)
    lin = _Linearized(tr, fun_name(fun), tr.out_tree, keep_primal=True)
    res = lin.evaluate(tangents)
    n = len(tr.program.outputs)
    return (tree_unflatten(tr.out_tree, [to_user(o) for o in res[:n]]),
            tree_unflatten(tr.out_tree, lin.tangent_leaves(res[n:])))


@api_boundary
def linearize(fun, *primals, has_aux=False):
    """`linearize(fun, *primals) -> (out, f_jvp)` (`(out, f_jvp, aux)` with has_aux), as
    jax.linearize: `f_jvp(*tangents)` is `jvp(fun, primals, tangents)[1]` at these fixed
    primals, each tangent with its primal's structure. fun is traced once and its JVP program
    (vkgrad.transforms.autodiff.jvp_program) built once; each f_jvp call evaluates that program
    with the primal outputs pruned (so it recomputes only the residuals the tangents need).
    Works inside jit, grad and vmap as jvp does."""
    check_function(fun, "linearize")
    name = fun_name(fun)
    tr = trace_function(fun, primals, concrete=True)
    value_tree = _value_tree(tr.out_tree, has_aux, name)
    outs = [to_user(o) for o in eval_program(optimize(tr.program, final=is_final()), tr.args)]
    out_all = tree_unflatten(tr.out_tree, outs)
    lin = _Linearized(tr, name, value_tree, keep_primal=False)

    @api_boundary
    def f_jvp(*tangents):
        if len(tangents) != len(primals):
            raise ArgumentError(f"f_jvp of linearize({name}) takes {len(primals)} tangents "
                                f"(one per primal), got {len(tangents)}", source=user_source())
        return tree_unflatten(value_tree, lin.tangent_leaves(lin.evaluate(tangents)))

    return (out_all[0], f_jvp, out_all[1]) if has_aux else (out_all, f_jvp)


class _Linearized:
    """The JVP program of a traced function's first `out_tree.num_leaves` outputs (with the
    primal outputs too where keep_primal), optimised once per kind of use, and its evaluation
    on tangents given as pytrees like the primals."""

    def __init__(self, tr, name: str, out_tree: TreeDef, keep_primal: bool):
        self.tr, self.name = tr, name
        program = tr.program.replace(outputs=tr.program.outputs[:out_tree.num_leaves])
        self.outputs = program.outputs
        self.wrt = [k for k, v in enumerate(program.inputs[:len(tr.leaves)])
                    if is_float(v.dtype)]
        self.float_outs = [j for j, o in enumerate(program.outputs) if is_float(o.dtype)]
        joint = checked(jvp_program(program, self.wrt), f"jvp of {name}")
        self.joint = joint if keep_primal else \
            joint.replace(outputs=joint.outputs[len(program.outputs):])
        self.optimized: dict = {}

    def evaluate(self, tangents) -> list:
        tr, name = self.tr, self.name
        t_leaves = []
        for i, t in enumerate(tangents):
            ls, tree = tree_flatten(t)
            if tree != tr.arg_trees[i]:
                raise ArgumentError(f"tangent {i} of jvp({name}) has structure {tree}, its "
                                    f"primal {tr.arg_trees[i]}", source=user_source())
            t_leaves += ls
        for k in self.wrt:
            v, t = tr.program.inputs[k], t_leaves[k]
            if tuple(np.shape(t)) != v.shape:
                raise ArgumentError(f"tangent leaf {k} of jvp({name}) has shape "
                                    f"{tuple(np.shape(t))}, its primal "
                                    f"{type_str(v.shape, v.dtype)}", source=user_source())
        final = is_final()
        if final not in self.optimized:
            self.optimized[final] = optimize(self.joint, final=final)
        zero_cts = [broadcast_to(np_dtype(o.dtype).type(0), o.shape)
                    for o in (self.outputs[j] for j in self.float_outs)]
        tans = [_cast(t_leaves[k], tr.program.inputs[k].dtype) for k in self.wrt]
        return eval_program(self.optimized[final], tr.args + zero_cts + tans)

    def tangent_leaves(self, float_tangents) -> list:
        """One tangent per output: the float outputs' computed, zeros for integer ones."""
        touts = dict(zip(self.float_outs, float_tangents))
        return [to_user(touts[j]) if j in touts else np.zeros(o.shape, np_dtype(o.dtype))
                for j, o in enumerate(self.outputs)]
