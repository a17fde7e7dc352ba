"""The transforms users call: grad, value_and_grad, vjp, jvp, vmap, make_ir, check_grads.

Each one is the same three steps:
  1. trace `fun` on abstract versions of its (flattened pytree) arguments into a Program, in a
     fresh trace pushed on top of whatever is active (`_trace`);
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
import inspect
import re

import numpy as np

from vkgrad.errors import ArgumentError, GradError, GradientCheckError
from vkgrad.ir.core import Program, is_float, np_dtype, type_str
from vkgrad.ir.verifier import checked
from vkgrad.passes import optimize
from vkgrad.primitives import broadcast_to, convert
from vkgrad.transforms.autodiff import grad_program, jvp_program, vjp_program
from vkgrad.transforms.batching import batch_program
from vkgrad.tracer.core import (ArrayOps, ShapeDtype, Tracer, abstract_leaf, current_trace,
                                eval_program, new_trace, source_location, user_source)
from vkgrad.tracer.pytree import TreeDef, flatten_up_to, tree_flatten, tree_map, tree_unflatten


# ----------------------------------------------------------------------------------- tracing

def _fun_name(fun) -> str:
    f = fun.func if isinstance(fun, functools.partial) else fun
    name = getattr(f, "__name__", type(f).__name__)
    return re.sub(r"\W", "_", name).strip("_") or "fun"


def _fun_where(fun) -> str:
    code = getattr(fun.func if isinstance(fun, functools.partial) else fun, "__code__", None)
    if code is None:
        return "?"
    where = source_location(code.co_filename, code.co_firstlineno)
    return where if where.startswith("Cell ") else \
        f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"


class _Traced:
    """A traced function: its program, output structure, and what to evaluate it with."""

    def __init__(self, program, out_tree, leaves, captured, arg_slices, arg_trees):
        self.program = program
        self.out_tree: TreeDef = out_tree
        self.leaves = leaves            # the concrete (or outer-trace) argument leaves
        self.captured = captured        # outer-trace values captured as extra inputs
        self.arg_slices = arg_slices    # positional arg index -> slice of leaves (None: static)
        self.arg_trees = arg_trees

    @property
    def args(self) -> list:
        return list(self.leaves) + list(self.captured)


def _trace(fun, args, static_argnums=(), allow_spec=False) -> _Traced:
    name = _fun_name(fun)
    static = set(_normalize_argnums(static_argnums, len(args), "static_argnums")) \
        if static_argnums != () else set()
    leaves, types, slices, trees = [], [], [], []
    for i, a in enumerate(args):
        if i in static:
            slices.append(None)
            trees.append(None)
            continue
        ls, tree = tree_flatten(a)
        types += [abstract_leaf(x, f"argument {i} of {name}", allow_spec) for x in ls]
        slices.append(slice(len(leaves), len(leaves) + len(ls)))
        trees.append(tree)
        leaves += ls
    src = user_source()
    with new_trace(name) as t:
        tracers = [t.new_arg(ty.shape, ty.dtype, src) for ty in types]
        rebuilt = [a if sl is None else tree_unflatten(tree, tracers[sl])
                   for a, sl, tree in zip(args, slices, trees)]
        out = fun(*rebuilt)
        out_leaves, out_tree = tree_flatten(out)
        for j, o in enumerate(out_leaves):
            abstract_leaf(o, f"result leaf {j} of {name}")
        program, captured = t.finish(out_leaves)
    if any(tree is not None and tree.kind != "leaf" for tree in trees):
        program = program.replace(arg_names=_leaf_names(fun, args, trees))
    return _Traced(checked(program, f"tracing {name}"), out_tree, leaves, captured, slices, trees)


def _leaf_names(fun, args, trees) -> tuple:
    """"params['w']", "x", "batch[0]": where each input leaf comes from (for printing, when an
    argument is a pytree)."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, tree in enumerate(trees):
        if tree is not None:
            base = params[i] if i < len(params) and not params[i].startswith("*") else f"arg{i}"
            names += _paths(tree, base)
    return tuple(names)


def _paths(tree: TreeDef, prefix: str) -> list:
    if tree.kind == "leaf":
        return [prefix]
    if tree.kind == "dict":
        return [p for k, c in zip(tree.meta, tree.children) for p in _paths(c, f"{prefix}[{k!r}]")]
    if tree.kind == "namedtuple":
        return [p for f, c in zip(tree.meta._fields, tree.children)
                for p in _paths(c, f"{prefix}.{f}")]
    return [p for i, c in enumerate(tree.children) for p in _paths(c, f"{prefix}[{i}]")]


def _normalize_argnums(argnums, nargs, what="argnums") -> tuple:
    many = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if many else (argnums,)
    out = []
    for a in nums:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool) or not -nargs <= a < nargs:
            raise ArgumentError(f"{what}={argnums!r} does not name positional arguments of a "
                                f"call with {nargs} argument(s)", source=user_source())
        out.append(int(a) % nargs)
    if len(set(out)) != len(out):
        raise ArgumentError(f"{what}={argnums!r} repeats an argument", source=user_source())
    return tuple(out)


def _bind_kwargs(fun, kwargs):
    """Keyword arguments are not differentiated: they are closed over (arrays in them become
    consts, values of an enclosing trace captured inputs)."""
    return functools.partial(fun, **kwargs) if kwargs else fun


def _final() -> bool:
    """True when results are computed now (not traced into an enclosing program)."""
    return current_trace() is None


def _to_user(x):
    return x if isinstance(x, ArrayOps) or x is None else np.asarray(x)


def make_ir(fun, static_argnums=()):
    """`make_ir(fun)(*args) -> Program`: the program `fun` traces to on these arguments (arrays,
    scalars, pytrees of them, or vkgrad.ShapeDtype specs). `str(program)` is its text."""
    @functools.wraps(fun)
    def make(*args, **kwargs) -> Program:
        return _trace(_bind_kwargs(fun, kwargs), args, static_argnums, allow_spec=True).program
    return make


# ----------------------------------------------------------------------------------- reverse

def value_and_grad(fun, argnums=0, has_aux=False):
    """`value_and_grad(fun)(*args) -> (value, grads)` (`((value, aux), grads)` with has_aux).

    fun must return a float scalar (or (scalar, aux)). grads has the structure of
    args[argnums] (a tuple of them when argnums is a tuple)."""
    return _value_and_grad(fun, argnums, has_aux, keep_value=True)


def _value_and_grad(fun, argnums, has_aux, keep_value):
    name = _fun_name(fun)

    @functools.wraps(fun)
    def value_and_grad_fun(*args, **kwargs):
        nums = _normalize_argnums(argnums, len(args))
        tr = _trace(_bind_kwargs(fun, kwargs), args)
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
                f"grad of {name} (defined at {_fun_where(fun)}) needs it to return a float "
                f"scalar, but it returned {got}. Reduce it to a scalar (e.g. .sum() or "
                ".mean()) or use vkgrad.vjp for non-scalar results.", source=user_source())
        joint = checked(grad_program(tr.program, wrt), f"autodiff of {name}")
        n = len(tr.program.outputs)
        if not keep_value:   # grad: the value itself is not returned (aux still is)
            joint = joint.replace(outputs=joint.outputs[1:])
        joint = optimize(joint, final=_final())
        res = eval_program(joint, tr.args)
        if not keep_value:
            res = [None] + res
        out = tree_unflatten(tr.out_tree, [_to_user(r) for r in res[:n]])
        grads, pos = [], n
        for i in nums:
            sl = tr.arg_slices[i]
            grads.append(tree_unflatten(tr.arg_trees[i],
                                        [_to_user(r) for r in res[pos:pos + sl.stop - sl.start]]))
            pos += sl.stop - sl.start
        g = tuple(grads) if isinstance(argnums, (tuple, list)) else grads[0]
        return (tuple(out) if has_aux else out), g

    return value_and_grad_fun


def grad(fun, argnums=0, has_aux=False):
    """`grad(fun)(*args)`: the gradient of a float-scalar function with respect to
    args[argnums] (same pytree structure); `(grads, aux)` with has_aux."""
    vg = _value_and_grad(fun, argnums, has_aux, keep_value=False)

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


def vjp(fun, *primals, has_aux=False):
    """`vjp(fun, *primals) -> (out, vjp_fn)` (`(out, vjp_fn, aux)` with has_aux).

    `vjp_fn(cotangent)` takes a pytree like `out` and returns a tuple with one entry per primal
    (its structure), holding the cotangent of each float leaf and None for integer leaves."""
    name = _fun_name(fun)
    tr = _trace(fun, primals)
    value_tree = _value_tree(tr.out_tree, has_aux, name)
    nv = value_tree.num_leaves
    outs = eval_program(optimize(tr.program, final=_final()), tr.args)
    outs = [_to_user(o) for o in outs]
    out_all = tree_unflatten(tr.out_tree, outs)
    value = out_all[0] if has_aux else out_all
    wrt = [k for k in range(len(tr.leaves)) if is_float(tr.program.inputs[k].dtype)]
    ct_outputs = [j for j in range(nv) if is_float(tr.program.outputs[j].dtype)]
    joint = checked(vjp_program(tr.program, wrt, ct_outputs), f"autodiff of {name}")
    optimized: dict = {}

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
        final = _final()
        if final not in optimized:   # once per kind of use (jacrev calls vjp_fn per row)
            optimized[final] = optimize(joint, final=final)
        res = eval_program(optimized[final], tr.args + ct_vals)[len(tr.program.outputs):]
        by_leaf = dict(zip(wrt, (_to_user(r) for r in res)))
        return tuple(tree_unflatten(tr.arg_trees[i], [by_leaf.get(k) for k in range(
            tr.arg_slices[i].start, tr.arg_slices[i].stop)]) for i in range(len(primals)))

    return (value, vjp_fn, out_all[1]) if has_aux else (value, vjp_fn)


def _cast(x, dtype):
    if isinstance(x, ArrayOps):
        return convert(x, dtype)
    return np.asarray(x, dtype=np_dtype(dtype))


# ----------------------------------------------------------------------------------- forward

def jvp(fun, primals, tangents):
    """`jvp(fun, primals, tangents) -> (out, tangent_out)`: forward mode, J u.

    Implemented by the double-VJP trick (vkgrad.transforms.autodiff.jvp_program): no JVP rule table.
    Tangents of integer primals are ignored; integer results get zero tangents."""
    name = _fun_name(fun)
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)) or \
            len(primals) != len(tangents):
        raise ArgumentError("jvp takes primals and tangents as tuples of equal length",
                            source=user_source())
    tr = _trace(fun, tuple(primals))
    t_leaves = []
    for i, t in enumerate(tangents):
        ls, tree = tree_flatten(t)
        if tree != tr.arg_trees[i]:
            raise ArgumentError(f"tangent {i} of jvp({name}) has structure {tree}, its primal "
                                f"{tr.arg_trees[i]}", source=user_source())
        t_leaves += ls
    wrt = []
    for k, (v, t) in enumerate(zip(tr.program.inputs, t_leaves)):
        if is_float(v.dtype):
            if tuple(np.shape(t)) != v.shape:
                raise ArgumentError(f"tangent leaf {k} of jvp({name}) has shape "
                                    f"{tuple(np.shape(t))}, its primal "
                                    f"{type_str(v.shape, v.dtype)}", source=user_source())
            wrt.append(k)
    prog = optimize(checked(jvp_program(tr.program, wrt), f"jvp of {name}"), final=_final())
    float_outs = [j for j, o in enumerate(tr.program.outputs) if is_float(o.dtype)]
    zero_cts = [broadcast_to(np_dtype(o.dtype).type(0), o.shape)
                for o in (tr.program.outputs[j] for j in float_outs)]
    tans = [_cast(t_leaves[k], tr.program.inputs[k].dtype) for k in wrt]
    res = eval_program(prog, tr.args + zero_cts + tans)
    n = len(tr.program.outputs)
    outs, touts = res[:n], dict(zip(float_outs, res[n:]))
    tangent_leaves = [_to_user(touts[j]) if j in touts else
                      np.zeros(o.shape, np_dtype(o.dtype))
                      for j, o in enumerate(tr.program.outputs)]
    return (tree_unflatten(tr.out_tree, [_to_user(o) for o in outs]),
            tree_unflatten(tr.out_tree, tangent_leaves))


# ----------------------------------------------------------------------------------- checking

def check_grads(fun, args, order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-4, eps=1e-4,
                seed=0):
    """Check fun's derivatives against central finite differences, in float64.

    Float leaves of `args` are converted to float64 (integer leaves are held fixed). For a
    random unit tangent u and unit cotangent v, <v, (f(x+eps u) - f(x-eps u)) / 2eps> must match
    <vjp(v), u> ("rev") and <v, jvp(u)> ("fwd") within atol + rtol * scale. order=2 also checks
    the derivatives of x -> vjp(fun, x)(v), and so on. Raises GradientCheckError on mismatch."""
    args = tuple(args)
    x = tree_map(_to_f64, args)
    rng = np.random.default_rng(seed)
    leaves, tree = tree_flatten(x)
    fl = [k for k, a in enumerate(leaves) if np.asarray(a).dtype.kind == "f"]
    u = _unit([rng.standard_normal(np.shape(leaves[k])) for k in fl])

    def f_at(t):
        moved = list(leaves)
        for k, d in zip(fl, u):
            moved[k] = leaves[k] + t * d
        out = fun(*tree_unflatten(tree, moved))
        return tree_flatten(out)

    out_leaves, out_tree = f_at(0.0)
    ofl = [j for j, o in enumerate(out_leaves) if np.asarray(o).dtype.kind == "f"]
    v = _unit([rng.standard_normal(np.shape(out_leaves[j])) for j in ofl])
    plus, minus = f_at(eps)[0], f_at(-eps)[0]
    fd = sum(float(np.vdot(vj, np.subtract(plus[j], minus[j], dtype=np.float64))) / (2 * eps)
             for j, vj in zip(ofl, v))
    v_full = [np.zeros(np.shape(o), np.asarray(o).dtype) for o in out_leaves]
    for j, vj in zip(ofl, v):
        v_full[j] = vj
    v_tree = tree_unflatten(out_tree, v_full)
    name = _fun_name(fun)

    def compare(mode, got):
        scale = max(abs(fd), abs(got), 1.0)
        if not abs(got - fd) <= atol + rtol * scale:
            raise GradientCheckError(
                f"check_grads({name}, order={order}): {mode}-mode directional derivative "
                f"{got!r} differs from finite differences {fd!r} (|diff| {abs(got - fd):.3g} > "
                f"atol {atol} + rtol {rtol} * {scale:.3g})")

    if "rev" in modes:
        _, vjp_fn = vjp(fun, *x)
        cts = _ct_leaves(x, vjp_fn(v_tree))   # aligned with `leaves`; None for int leaves
        compare("reverse", sum(float(np.vdot(np.asarray(cts[k], np.float64), d))
                               for k, d in zip(fl, u)))
    if "fwd" in modes:
        tangents = [np.zeros(np.shape(a), np.asarray(a).dtype) for a in leaves]
        for k, d in zip(fl, u):
            tangents[k] = d
        _, t_out = jvp(fun, x, tree_unflatten(tree, tangents))
        t_leaves = tree_flatten(t_out)[0]
        compare("forward", sum(float(np.vdot(vj, np.asarray(t_leaves[j], np.float64)))
                               for j, vj in zip(ofl, v)))
    if order > 1:
        def vjp_of_fun(*xs):
            return vjp(fun, *xs)[1](v_tree)
        vjp_of_fun.__name__ = f"vjp_{name}"
        check_grads(vjp_of_fun, x, order - 1, modes, atol, rtol, eps, seed + 1)


def _ct_leaves(primal, ct) -> list:
    """The leaves of `ct` at the leaf positions of `primal` (ct holds None for int leaves, which
    a plain flatten would drop)."""
    return flatten_up_to(tree_flatten(primal)[1], ct)


def _unit(vs):
    norm = np.sqrt(sum(float(np.sum(np.square(v))) for v in vs)) or 1.0
    return [np.asarray(v / norm, np.float64) for v in vs]


def _to_f64(a):
    if isinstance(a, float) or (isinstance(a, (np.ndarray, np.generic)) and a.dtype.kind == "f"):
        return np.asarray(a, np.float64)
    return a


def trace(fun, args, static_argnums=()) -> Program:
    """The Program `fun` traces to on `args` (a tuple of arrays, scalars, pytrees of them, or
    vkgrad.ShapeDtype specs); static_argnums are passed through as Python values."""
    return _trace(fun, tuple(args), static_argnums, allow_spec=True).program


# ----------------------------------------------------------------------------------- vmap

def vmap(fun, in_axes=0, out_axes=0, axis_size=None):
    """`vmap(fun, in_axes=0, out_axes=0, axis_size=None)(*args)`: fun mapped over an axis of
    its arguments, as JAX's vmap: one program for the whole batch, no per-example loop.

    in_axes: an int, None, or a tuple with one entry per positional argument, each an int,
    None, or a pytree prefix of that argument (`{"w": None, "b": 0}`); negative axes count from
    the end. Keyword arguments are mapped over their axis 0. out_axes: the same for the result;
    a result that does not depend on a mapped argument is broadcast along its out axis (as JAX
    does). axis_size: the batch size when no argument is mapped."""
    name = _fun_name(fun)
    _check_axes_spec(in_axes, "in_axes", name)
    _check_axes_spec(out_axes, "out_axes", name)

    @functools.wraps(fun)
    def vmapped(*args, **kwargs):
        specs = _in_axes_per_argument(in_axes, len(args), name)
        labels = [_arg_label(fun, i) for i in range(len(args))]
        f = fun
        if kwargs:   # mapped over axis 0, passed as one more (dict) argument
            f = lambda *a: fun(*a[:-1], **a[-1])
            args, specs, labels = args + (kwargs,), specs + (0,), labels + ["keyword arguments"]
        leaves, dims, traced_args, mapped = [], [], [], []
        for arg, spec, label in zip(args, specs, labels):
            ls, tree = tree_flatten(arg)
            paths = _leaf_paths(tree, label)
            axes = _broadcast_prefix(spec, tree, in_axes if isinstance(in_axes, (tuple, list))
                                     else spec, label, name, "in_axes")
            per_example = []
            for x, axis, path in zip(ls, axes, paths):
                ty = abstract_leaf(x, f"{path} of vmap({name})")
                if axis is not None:
                    axis = _normalize_axis(axis, len(ty.shape), f"in_axes {axis} for {path} "
                                           f"({type_str(ty.shape, ty.dtype)})", name,
                                           scalar_hint=True)
                    mapped.append((path, axis, ty.shape[axis]))
                    x_spec = ShapeDtype(ty.shape[:axis] + ty.shape[axis + 1:], ty.dtype)
                else:
                    x_spec = x
                per_example.append(x_spec)
                dims.append(axis)
            leaves += ls
            traced_args.append(tree_unflatten(tree, per_example))
        size = _mapped_size(mapped, axis_size, name)
        tr = _trace(f, tuple(traced_args), allow_spec=True)
        outs = tr.program.outputs
        out_specs = _broadcast_prefix(out_axes, tr.out_tree, out_axes, "the result", name,
                                      "out_axes")
        out_names = _leaf_paths(tr.out_tree, "result")
        out_dims = [None if a is None else
                    _normalize_axis(a, len(o.shape) + 1, f"out_axes {a} for {p} "
                                    f"({type_str((size,) + tuple(o.shape), o.dtype)} mapped)",
                                    name)
                    for a, o, p in zip(out_specs, outs, out_names)]
        batched = checked(batch_program(tr.program, dims + [None] * len(tr.captured), out_dims,
                                        size, out_names=out_names), f"vmap of {name}")
        res = eval_program(optimize(batched, final=_final()), leaves + list(tr.captured))
        return tree_unflatten(tr.out_tree, [_to_user(r) for r in res])

    return vmapped


def _is_axis(a) -> bool:
    return a is None or (isinstance(a, (int, np.integer)) and not isinstance(a, bool))


def _check_axes_spec(spec, what, name):
    bad = [a for a in tree_flatten(spec)[0] if not _is_axis(a)]
    if bad:
        raise ArgumentError(f"vmap of {name}: {what}={spec!r}: its entries must be ints or "
                            f"None, got {bad[0]!r}", source=user_source())


def _in_axes_per_argument(in_axes, nargs, name) -> tuple:
    if _is_axis(in_axes):
        return (in_axes,) * nargs
    if not isinstance(in_axes, (tuple, list)):
        raise ArgumentError(f"vmap of {name}: in_axes must be an int, None, or a tuple with one "
                            f"entry per positional argument, got {in_axes!r} (to give one "
                            "argument a pytree of axes, wrap it: in_axes=(spec,))",
                            source=user_source())
    if len(in_axes) != nargs:
        raise ArgumentError(f"vmap of {name}: in_axes has {len(in_axes)} entries "
                            f"({in_axes!r}), but {name} was called with {nargs} positional "
                            "argument(s)", source=user_source())
    return tuple(in_axes)


def _arg_label(fun, i) -> str:
    """'argument 1 (x)': the i-th positional argument, by its parameter name when known."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return f"argument {i}"
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return f"argument {i} ({pos[i].name})" if i < len(pos) else f"argument {i}"


def _leaf_paths(tree: TreeDef, label: str) -> list:
    """A name per leaf: the label, then the keys down to it (`argument 0 (params)['w']`)."""
    if tree.kind == "leaf":
        return [label]
    if tree.kind == "none":
        return []
    keys = tree.meta if tree.kind == "dict" else range(len(tree.children))
    return [p for k, c in zip(keys, tree.children) for p in _leaf_paths(c, f"{label}[{k!r}]")]


def _broadcast_prefix(spec, tree: TreeDef, whole, label, name, what) -> list:
    """One axis per leaf of `tree` from `spec`, a pytree prefix of it (an int or None stands
    for a whole subtree)."""
    if _is_axis(spec):
        return [spec] * tree.num_leaves
    s_leaves, s_tree = tree_flatten(spec)
    kinds = {"tuple", "list", "namedtuple"}
    same = (s_tree.kind == tree.kind or {s_tree.kind, tree.kind} <= kinds) and \
        len(s_tree.children) == len(tree.children) and \
        (tree.kind != "dict" or s_tree.meta == tree.meta)
    if not same:
        raise ArgumentError(f"vmap of {name}: {what} entry {spec!r} for {label} does not match "
                            f"its structure {tree} ({what}={whole!r}); an entry is an int, None, "
                            "or a pytree prefix of its argument", source=user_source())
    children = [spec[k] for k in tree.meta] if tree.kind == "dict" else list(spec)
    keys = tree.meta if tree.kind == "dict" else range(len(children))
    return [a for k, s, c in zip(keys, children, tree.children)
            for a in _broadcast_prefix(s, c, whole, f"{label}[{k!r}]", name, what)]


def _normalize_axis(axis, ndim, what, name, scalar_hint=False) -> int:
    if not -ndim <= axis < ndim:
        hint = (": a scalar has no axis to map over; give it in_axes None" if ndim == 0 and
                scalar_hint else f" (axes {-ndim}..{ndim - 1})")
        raise ArgumentError(f"vmap of {name}: {what} is out of range{hint}",
                            source=user_source())
    return int(axis) % ndim


def _mapped_size(mapped, axis_size, name) -> int:
    sizes = {s for _, _, s in mapped}
    if axis_size is not None:
        sizes.add(int(axis_size))
    if not sizes:
        raise ArgumentError(f"vmap of {name}: no argument is mapped (in_axes is None for "
                            "every one); pass axis_size to say how many examples",
                            source=user_source())
    if len(sizes) > 1:
        parts = [f"{p} has size {s} along axis {a}" for p, a, s in mapped]
        if axis_size is not None:
            parts.insert(0, f"axis_size is {axis_size}")
        raise ArgumentError(f"vmap of {name}: the mapped axes have different sizes: "
                            + "; ".join(parts), source=user_source())
    return sizes.pop()
