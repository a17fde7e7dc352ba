"""The derivative transforms users call: grad, value_and_grad, vjp, jvp, linearize, and
linear_transpose (a linear function's transpose, which is its VJP).

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
from vkgrad.ir.core import Program, Var, is_float, np_dtype, type_str
from vkgrad.ir.verifier import checked
from vkgrad.passes import dce, optimize
from vkgrad.primitives import broadcast_to, convert
from vkgrad.primitives.control_flow import checkpoint_p, cond_p, depends, scan_p
from vkgrad.transforms.autodiff import grad_program, jvp_program, vjp_program
from vkgrad.transforms.tracing import (_spec, bind_kwargs, check_function, fun_name,
                                       fun_where, is_final, normalize_argnums, to_user,
                                       trace_function)
from vkgrad.tracer.core import ArrayOps, abstract_leaf, eval_program, user_source
from vkgrad.tracer.pytree import TreeDef, tree_flatten, tree_unflatten
from vkgrad.tree_util import Partial
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


@api_boundary
def linear_transpose(fun, *primals, reduce_axes=()):
    """`linear_transpose(fun, *primals) -> fun_t`, as jax.linear_transpose: fun must be linear
    in its arguments, and `fun_t(cotangent)` (cotangent: a pytree like fun's result) returns a
    tuple with one entry per primal, each with its structure: the transpose of fun applied to
    the cotangent (A^T c for fun(x) = A x). Only the primals' shapes and dtypes are read (they
    may be vg.ShapeDtypeStructs). fun_t is a vg.tree_util.Partial, so it can be passed through
    vg.jit.

    A linear map's transpose is its VJP at any point; fun_t evaluates the VJP program once
    built. Linearity is checked eqn by eqn (`_nonlinear_eqn`), as JAX finds a transpose rule
    for each: an op that is not linear in the values computed from the arguments (sin, x * x, a
    select on a comparison of them) is an error naming it. An affine fun (x + 1) passes, as in
    JAX, and its transpose is that of its linear part."""
    check_function(fun, "linear_transpose")
    name = fun_name(fun)
    if reduce_axes:
        raise ArgumentError(f"linear_transpose of {name}: reduce_axes={reduce_axes!r} is "
                            "deprecated in JAX and not supported; pass reduce_axes=()",
                            source=user_source())
    specs = tuple(tree_unflatten(t, [_spec(x) for x in ls])
                  for ls, t in map(tree_flatten, primals))
    tr = trace_function(fun, specs, allow_spec=True)
    n_in, n_out = len(tr.leaves), len(tr.program.outputs)
    ins, outs = tr.program.inputs[:n_in], tr.program.outputs
    if not all(is_float(v.dtype) for v in (*ins, *outs)):
        raise ArgumentError(
            f"linear_transpose only supports float -> float functions (JAX's also integer -> "
            f"integer ones), but {name} is ({', '.join(v.dtype for v in ins)}) -> "
            f"({', '.join(v.dtype for v in outs)})", source=user_source())
    bad = _nonlinear_eqn(tr.program, range(n_in))
    if bad is not None:
        raise ArgumentError(
            f"linear_transpose needs {name} to be linear in its arguments, but its "
            f"'{bad.prim.name}' is not linear in values computed from them (a linear function "
            "adds, subtracts, negates, scales by constants, reshapes, slices, sums, "
            "contracts with constants...)", primitive=bad.prim.name, source=bad.source)
    joint = checked(vjp_program(tr.program, range(n_in), range(n_out)),
                    f"transpose of {name}")
    joint = joint.replace(outputs=joint.outputs[n_out:])
    zeros = [np.zeros(v.shape, np_dtype(v.dtype)) for v in ins]   # read by nothing: linear
    optimized: dict = {}

    @api_boundary
    def transposed(captured, cotangent):
        cts, ct_tree = tree_flatten(cotangent)
        if ct_tree != tr.out_tree:
            raise ArgumentError(f"the cotangent passed to the transpose of {name} has "
                                f"structure {ct_tree}, but {name} returns {tr.out_tree}",
                                source=user_source())
        ct_vals = []
        for j, (o, c) in enumerate(zip(outs, cts)):
            t = abstract_leaf(c, f"cotangent leaf {j} of the transpose of {name}")
            scalar = isinstance(c, (int, float)) and not isinstance(c, bool)
            if t.shape != o.shape or (t.dtype != o.dtype and not scalar):
                raise ArgumentError(f"cotangent leaf {j} of the transpose of {name} is "
                                    f"{type_str(t.shape, t.dtype)}, but that result of {name} "
                                    f"is {type_str(o.shape, o.dtype)}", source=user_source())
            ct_vals.append(c if isinstance(c, ArrayOps) and not scalar else _cast(c, o.dtype))
        final = is_final()
        if final not in optimized:
            optimized[final] = optimize(joint, final=final)
        res = [to_user(r) for r in eval_program(optimized[final],
                                                zeros + list(captured) + ct_vals)]
        return tuple(tree_unflatten(tr.arg_trees[i], res[sl]) for i, sl in
                     enumerate(tr.arg_slices))

    return Partial(transposed, tuple(tr.captured))


def _nonlinear_eqn(program: Program, wrt):
    """The first eqn of program that is not linear in the values computed from inputs[wrt],
    or None. An eqn is linear in its operands computed from them when its VJP with respect to
    those reads none of them and does read the cotangent (checked on a program of that eqn
    alone, after DCE: `x * c`'s is `ct * c`; `x * x`'s reads x, `sin`'s cos x, and `floor`'s
    is zero, so none of them is linear). A float result computed from an integer
    or bool one that depends on them (a select on a comparison, an index from argmax) is not
    linear either; integer and bool results themselves are left to their uses. A loop, a
    cond or a checkpoint is linear when its body is (its eqns checked the same way: a scan's
    VJP reads its forward's carries whatever the body)."""
    dep = {program.inputs[i] for i in wrt}
    for e in program.eqns:
        ins = list(dict.fromkeys(x for x in e.inputs if isinstance(x, Var) and x in dep))
        if not ins:
            continue
        dep.update(e.outputs)
        if not any(is_float(o.dtype) for o in e.outputs):
            continue
        if not all(is_float(x.dtype) for x in ins):
            return e
        bodies = _bodies(e, [isinstance(x, Var) and x in dep for x in e.inputs])
        if bodies is not None:
            bad = next((b for b in (_nonlinear_eqn(body, w) for body, w in bodies) if b), None)
            if bad is not None:
                return bad
            continue
        vars_ = list(dict.fromkeys(x for x in e.inputs if isinstance(x, Var)))
        one = Program(e.prim.name, vars_, e.outputs, (e,))
        back = vjp_program(one, [vars_.index(x) for x in ins])
        back = dce.apply(back.replace(outputs=back.outputs[len(e.outputs):]))
        read = {x for b in back.eqns for x in b.inputs} | set(back.outputs)
        if any(back.inputs[vars_.index(x)] in read for x in ins) or \
                not any(c in read for c in back.inputs[len(vars_):]):
            return e
    return None


def _bodies(e, dep: list):
    """[(sub-program, the positions of its inputs that depend on the arguments)] of a scan, a
    cond or a checkpoint eqn (dep: which of e's inputs do), or None for another eqn."""
    p = e.params
    if e.prim is scan_p:
        nc, nk = p["num_consts"], p["num_carry"]
        while True:   # a carry depends on them if it starts so or the body makes it so
            out = depends(p["jaxpr"], dep)
            carry = [a or b for a, b in zip(dep[nc:nc + nk], out[:nk])]
            if carry == dep[nc:nc + nk]:
                break
            dep[nc:nc + nk] = carry
        return [(p["jaxpr"], [i for i, d in enumerate(dep) if d])]
    if e.prim is cond_p:   # the index depends on none of them (else: an int operand, refused)
        return [(b, [i for i, d in enumerate(dep[1:]) if d]) for b in p["branches"]]
    if e.prim is checkpoint_p:
        return [(p["jaxpr"], [i for i, d in enumerate(dep) if d])]
    return None
